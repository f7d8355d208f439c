"""Pi coding agent session files (sources `pi` and `omp`): a JSONL tree of entries.

The first line is the `session` header (`id`, `cwd`); every other entry has `id`, `parentId`
and `timestamp`. `message` entries hold one agent message whose `role` is `user`,
`assistant` (blocks `thinking`, `text`, `toolCall`; `stopReason` says how the response
ended), `toolResult`, `bashExecution` (a `!command` the person ran), `custom`,
`branchSummary` or `compactionSummary`. Other entries: `model_change`,
`thinking_level_change`, `compaction`, `branch_summary`, `custom` (extension state, not sent
to the model), `custom_message` (extension context), `label`, `session_info` (the session
name; omp also writes `title`/`title_change`).

`PiReader` is shared by the Pi-family parsers (prime-agent subclasses it).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime
from pathlib import PurePath
from typing import Any

from mcpd.sessions.model import EventType, ParsedEvent, ParsedSession, ParseError
from services.ingest.transcripts.keys import ContentKeys
from services.ingest.transcripts.parsers._common import (
    ENCRYPTED_REASONING,
    UniqueKeys,
    block_text,
    mark_turn_start,
    parse_timestamp,
    read_json_lines,
    tool_call_event,
)
from services.ingest.transcripts.parsers.cursor import link_responses

__all__ = ["PiParser", "PiReader"]

# stopReason -> completes_turn, for the reasons that end the turn ("toolUse" does not).
_STOP_REASONS = {"stop": True, "end_turn": True, "length": False, "error": False, "aborted": False}


def obj(value: Any) -> dict[str, Any]:
    """`value` if it is a JSON object, else an empty one."""
    return value if isinstance(value, dict) else {}


def string(value: Any) -> str:
    """`value` if it is a string, else ''."""
    return value if isinstance(value, str) else ""


def content_text(content: Any) -> str:
    """Text blocks joined; images and other media as `[image image/png]` placeholders."""
    text = block_text(content)
    parts = [text] if text else []
    if isinstance(content, list):
        for block in content:
            block = obj(block)
            kind = string(block.get("type"))
            if kind in ("image", "image_url", "audio", "video", "file"):
                mime = string(block.get("mimeType") or block.get("mime_type"))
                parts.append(f"[{kind} {mime}]".replace(" ]", "]"))
    return "\n".join(parts)


def stamp(record: dict[str, Any]) -> datetime | None:
    """The entry's time, else its message's (epoch milliseconds)."""
    value = parse_timestamp(record.get("timestamp"))
    return value or parse_timestamp(obj(record.get("message")).get("timestamp"))


class PiReader:
    """The state of one Pi-family file being read: events, errors, keys, current model."""

    harness = "pi-coding-agent"

    def __init__(self, path: str) -> None:
        self.path = path
        self.events: list[ParsedEvent] = []
        self.errors: list[ParseError] = []
        self.session_key: str | None = None
        self.title: str | None = None
        self.cwd: str | None = None
        self.model: str | None = None
        self._ids = UniqueKeys()
        self._content = ContentKeys()
        self._setup_from: int | None = 0
        self._base: str | None = None

    def read(self, lines: Sequence[str]) -> ParsedSession:
        for item in read_json_lines(lines):
            if isinstance(item, ParseError):
                self.errors.append(item)
            else:
                self._base = None
                self.entry(*item)
        link_responses(self.events)
        return ParsedSession(
            harness=self.harness,
            session_key=self.session_key or PurePath(self.path).stem,
            events=self.events,
            errors=self.errors,
            title=self.title,
            cwd=self.cwd,
            model=self.model,
        )

    # -- building blocks -------------------------------------------------------------------

    def key(self, record: dict[str, Any], index: int | None = None) -> str:
        """The record's own id (plus block index), else a content hash."""
        if self._base is None:  # once per record: a duplicate record gets the next occurrence
            self._base = string(record.get("id")) or self._content.key(
                json.dumps(record, sort_keys=True, ensure_ascii=False)
            )
        return self._ids.claim(self._base if index is None else f"{self._base}:{index}")

    def event(
        self, line: int, record: dict[str, Any], kind: EventType, text: str, **fields: Any
    ) -> ParsedEvent:
        key = fields.pop("key", None) or self.key(record)
        return ParsedEvent(key, line, kind, text, stamp(record), cwd=self.cwd, **fields)

    def emit(
        self, line: int, record: dict[str, Any], kind: EventType, text: str, payload: Any = None
    ) -> None:
        """Append one event for `record` (an empty payload is none)."""
        self.add(self.event(line, record, kind, text, payload=payload or None))

    def add(self, event: ParsedEvent, *, prompt: bool = False) -> None:
        """Append in transcript order; a genuine prompt opens a turn, a terminal event ends it."""
        self.events.append(event)
        if prompt:
            mark_turn_start(self.events, len(self.events) - 1, self._setup_from)
            self._setup_from = None
        elif event.terminal:
            self._setup_from = len(self.events)

    def unknown(self, line: int, record: dict[str, Any], label: str) -> None:
        """Openable (the raw record is the payload), never searched by default."""
        self.emit(line, record, EventType.UNKNOWN, label, record)

    # -- entries ---------------------------------------------------------------------------

    def entry(self, line: int, record: dict[str, Any]) -> None:
        kind = string(record.get("type"))
        custom = string(record.get("customType"))
        if kind == "session":
            self.session_key = string(record.get("id")) or self.session_key
            self.cwd = string(record.get("cwd")) or self.cwd
        elif kind in ("session_info", "title", "title_change"):
            self.title = string(record.get("name") or record.get("title")) or self.title
        elif kind == "message":
            self.message(line, record, obj(record.get("message")))
        elif kind == "model_change":
            provider, model = string(record.get("provider")), string(record.get("modelId"))
            self.model = model or self.model
            name = "/".join(filter(None, (provider, model)))
            self.emit(line, record, EventType.SYSTEM, f"model: {name}", {"provider": provider})
        elif kind == "thinking_level_change":
            level = string(record.get("thinkingLevel"))
            self.emit(line, record, EventType.SYSTEM, f"thinking level: {level}")
        elif kind in ("compaction", "branch_summary"):
            keep = ("firstKeptEntryId", "fromId", "tokensBefore")
            extra = {k: record[k] for k in keep if k in record}
            summary = string(record.get("summary"))
            self.emit(line, record, EventType.COMPACTION, summary, {"kind": kind, **extra})
        elif kind == "custom":
            data = json.dumps(record.get("data"), ensure_ascii=False, sort_keys=True)
            self.emit(line, record, EventType.RUNTIME, f"{custom}: {data}", {"custom": custom})
        elif kind == "custom_message":
            text = content_text(record.get("content"))
            self.emit(line, record, EventType.SYSTEM, text, {"custom": custom})
        elif kind == "label":
            text = f"label {string(record.get('label'))!r} on {string(record.get('targetId'))}"
            self.emit(line, record, EventType.SYSTEM, text)
        else:
            self.unknown(line, record, kind or "record without a type")

    def message(self, line: int, record: dict[str, Any], message: dict[str, Any]) -> None:
        role, content = string(message.get("role")), message.get("content")
        if role == "user":
            # A message without text (an attached image) belongs to the prompt before it.
            event = self.event(line, record, EventType.USER_INPUT, content_text(content))
            self.add(event, prompt=bool(block_text(content).strip()))
        elif role == "assistant":
            self.assistant(line, record, message)
        elif role in ("toolResult", "bashExecution"):
            self.result(line, record, message)
        elif role == "custom":
            custom = string(message.get("customType"))
            self.emit(line, record, EventType.SYSTEM, content_text(content), {"custom": custom})
        elif role in ("branchSummary", "compactionSummary"):
            summary = string(message.get("summary")) or content_text(content)
            self.emit(line, record, EventType.COMPACTION, summary, {"kind": role})
        else:
            self.unknown(line, record, f"message with role {role or 'none'}")

    def result(self, line: int, record: dict[str, Any], message: dict[str, Any]) -> None:
        """A tool's output; a `bashExecution` (a `!command` the person ran) is its call too."""
        payload: dict[str, Any] = {"is_error": bool(message.get("isError"))}
        if message.get("role") == "bashExecution":
            call_id, name, output = string(record.get("id")), "bash", message.get("output")
            arguments = {"command": string(message.get("command"))}
            self.add(self.call(line, record, name, arguments, call_id, user_initiated=True))
            payload = {
                k: message[k] for k in ("exitCode", "cancelled", "truncated") if k in message
            }
            payload["is_error"] = message.get("exitCode") not in (0, None) or bool(
                message.get("cancelled")
            )
            key = self.key(record, 1)
        else:
            call_id, name = string(message.get("toolCallId")), string(message.get("toolName"))
            output, key = message.get("content"), self.key(record)
            if message.get("details") is not None:
                payload["details"] = message["details"]
        event = self.event(line, record, EventType.TOOL_RESPONSE, content_text(output), key=key)
        event.call_id, event.tool_name, event.payload = call_id or None, name or None, payload
        self.add(event)

    def call(
        self,
        line: int,
        record: dict[str, Any],
        name: str,
        arguments: Any,
        call_id: str,
        index: int = 0,
        **payload: Any,
    ) -> ParsedEvent:
        return tool_call_event(
            key=self.key(record, index),
            line=line,
            name=name,
            arguments=arguments,
            call_id=call_id or None,
            timestamp=stamp(record),
            model=None if payload.get("user_initiated") else self.model,
            cwd=self.cwd,
            payload=payload or None,
        )

    def assistant(self, line: int, record: dict[str, Any], message: dict[str, Any]) -> None:
        self.model = string(message.get("model")) or self.model
        blocks = message.get("content")
        events: list[ParsedEvent] = []
        for index, block in enumerate(blocks if isinstance(blocks, list) else [blocks]):
            block = obj(block) if not isinstance(block, str) else {"type": "text", "text": block}
            kind = string(block.get("type"))
            if kind == "toolCall":
                name, call_id = string(block.get("name")), string(block.get("id"))
                events.append(self.call(line, record, name, block.get("arguments"), call_id, index))
                continue
            event_type, text = EventType.UNKNOWN, f"{kind or 'untyped'} block"
            if kind == "thinking":
                text = string(block.get("thinking"))
                text = ENCRYPTED_REASONING if block.get("redacted") and not text else text
                event_type = EventType.REASONING
            elif kind == "text":
                event_type, text = EventType.ASSISTANT_RESPONSE, string(block.get("text"))
            if text.strip():
                event = self.event(line, record, event_type, text, key=self.key(record, index))
                event.model = self.model
                event.payload = block if event_type is EventType.UNKNOWN else None
                events.append(event)
        reason = string(message.get("stopReason"))
        pending = any(e.type is EventType.TOOL_CALL for e in events)
        if reason in _STOP_REASONS and (not pending or not _STOP_REASONS[reason]):
            if not events:  # an empty response that still ended the turn (abort, error)
                error = string(message.get("errorMessage"))
                text = f"assistant stopped: {reason}" + (f": {error}" if error else "")
                events.append(self.event(line, record, EventType.RUNTIME, text, model=self.model))
            events[-1].terminal = True
            events[-1].completes_turn = _STOP_REASONS[reason]
        for event in events:
            self.add(event)


class PiParser:
    """Reads a Pi (or omp) session file."""

    harness = "pi-coding-agent"

    def parse(self, lines: Sequence[str], *, path: str) -> ParsedSession:
        return PiReader(path).read(lines)
