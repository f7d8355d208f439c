"""Claude Code project transcripts (`~/.claude/projects/<cwd>/<session>.jsonl`), also used by
Claude cowork sessions. One record per line; docs/sessions.md ("Claude Code") describes the
mapping.

One API response is split over several `assistant` records sharing `message.id`; each content
block is its own event keyed by record uuid and block index. A turn completes on
`stop_reason` end_turn/stop_sequence, on a `turn_duration` record, or when the next genuine
prompt follows a final text response with no tool call pending; an interrupt ends it
uncompleted. Sidechain (subagent) records inside a main transcript never drive turns.
"""

from __future__ import annotations

import posixpath
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from mcpd.sessions.model import EventType, ParsedEvent, ParsedSession
from services.ingest.transcripts.keys import ContentKeys
from services.ingest.transcripts.parsers._claude_text import (
    INTERRUPT_PREFIX,
    is_command_text,
    result_text,
    session_key,
    side_record,
    tool_error_exit_code,
)
from services.ingest.transcripts.parsers._common import (
    ENCRYPTED_REASONING,
    UniqueKeys,
    block_text,
    feed_records,
    mark_turn_start,
    parse_timestamp,
    tool_call_event,
)
from services.ingest.transcripts.text import canonical_json
from services.ingest.transcripts.tool_args import self_tool_name

__all__ = ["ClaudeCodeParser"]

_METADATA_ONLY = frozenset(
    {"file-history-snapshot", "last-prompt", "permission-mode", "mode", "agent-name", "tag"}
)
_TOOL_USES = frozenset({"tool_use", "server_tool_use", "mcp_tool_use"})
_ENDS_TURN = frozenset({"end_turn", "stop_sequence"})
_COMPACTIONS = frozenset({"compact_boundary", "microcompact_boundary"})
# Title records, in order of preference, and the field holding the title.
_TITLES = {"custom-title": "customTitle", "ai-title": "aiTitle", "summary": "summary"}


class ClaudeCodeParser:
    """Parses one Claude Code transcript file."""

    harness = "claude-code"

    def parse(self, lines: Sequence[str], *, path: str) -> ParsedSession:
        stem = posixpath.basename(path).removesuffix(".jsonl")
        state = _Transcript(subagent=True if stem.startswith("agent-") else None)
        errors = feed_records(lines, state.record)
        return ParsedSession(
            harness=self.harness,
            session_key=session_key(stem, state.session_id),
            events=state.events,
            errors=errors,
            title=next((state.titles[k] for k in _TITLES if k in state.titles), None),
            summary=state.titles.get("summary"),
            slug=state.slug,
            cwd=state.session_cwd,
            model=state.model,
        )


class _Transcript:
    def __init__(self, *, subagent: bool | None) -> None:
        # A subagent transcript (its own file) starts with a sidechain record; its sidechain
        # prompts are its prompts. Known from the file name, else from the first message.
        self.subagent = subagent
        self.events: list[ParsedEvent] = []
        self.session_id: str | None = None
        self.titles: dict[str, str] = {}  # record type -> its latest title text
        self.slug: str | None = None
        self.session_cwd: str | None = None
        self.model: str | None = None
        self._keys = UniqueKeys()
        self._content = ContentKeys()
        self._calls: dict[str, tuple[str, str | None]] = {}
        self._usage_seen: set[str] = set()
        # The current turn: has it ended, which calls await results, the last actor event.
        self._ended = False
        self._pending: set[str] = set()
        self._last_actor: int | None = None
        self._setup_from: int | None = 0
        self._line = 0
        self._time: datetime | None = None
        self._record: dict[str, Any] = {}

    def record(self, line: int, record: dict[str, Any]) -> None:
        self._line, self._record = line, record
        self._time = parse_timestamp(record.get("timestamp"))
        self.session_id = self.session_id or _str(record.get("sessionId"))
        self.slug = self.slug or _str(record.get("slug"))
        self.session_cwd = self.session_cwd or _str(record.get("cwd"))
        kind = record.get("type")
        if self.subagent is None and kind in ("user", "assistant"):
            self.subagent = bool(record.get("isSidechain"))
        if kind == "user":
            self._user(record)
        elif kind == "assistant":
            self._assistant(record)
        elif kind == "system":
            self._system(record)
        elif isinstance(kind, str) and kind in _TITLES:
            title = _str(record.get(_TITLES[kind]))
            if title:
                self.titles[kind] = title
        elif kind not in _METADATA_ONLY:
            self._emit(*side_record(record), 0)

    @property
    def _sidechain(self) -> bool:
        return bool(self._record.get("isSidechain")) and not self.subagent

    def _user(self, record: dict[str, Any]) -> None:
        message = _obj(record.get("message"))
        content = message.get("content")
        if record.get("isCompactSummary"):
            self._emit(EventType.COMPACTION, block_text(content), {"compact_summary": True}, 0)
            return
        blocks = content if isinstance(content, list) else [{"type": "text", "text": content}]
        if not any(isinstance(b, dict) and b.get("type") == "tool_result" for b in blocks):
            images = sum(1 for b in blocks if isinstance(b, dict) and b.get("type") == "image")
            self._user_text(block_text(blocks), 0, alone=True, images=images)
            return
        for index, block in enumerate(blocks):
            if not isinstance(block, dict):
                continue
            if block.get("type") == "tool_result":
                self._tool_result(block, index, {})
            elif block.get("type") == "text":
                self._user_text(_text(block), index, alone=False, images=0)

    def _user_text(self, text: str, index: int, *, alone: bool, images: int) -> None:
        extra: dict[str, Any] = {"images": images} if images else {}
        if text.lstrip().startswith(INTERRUPT_PREFIX):
            extra.update(interrupt=True, sidechain=self._sidechain or None)
            event = self._emit(EventType.RUNTIME, text, extra, index)
            self._end_turn(event, completed=False)
        elif not alone or self._sidechain or self._record.get("isMeta") or is_command_text(text):
            extra.update(meta=self._record.get("isMeta") or None, sidechain=self._sidechain or None)
            self._emit(EventType.SYSTEM, text, extra, index)
        else:
            if not self._ended and not self._pending and self._last_actor is not None:
                final = self.events[self._last_actor]
                if final.type is EventType.ASSISTANT_RESPONSE:
                    final.terminal = final.completes_turn = True
            self._emit(EventType.USER_INPUT, text, extra, index)
            mark_turn_start(self.events, len(self.events) - 1, self._setup_from)
            self._ended, self._last_actor, self._setup_from = False, None, None
            self._pending.clear()

    def _tool_result(self, block: dict[str, Any], index: int, extra: dict[str, Any]) -> ParsedEvent:
        """A `tool_result` block (user record) or a server tool's `*_tool_result` block."""
        call_id = _str(block.get("tool_use_id"))
        text = result_text(block.get("content"))
        if block.get("type") == "tool_result":
            extra["is_error"] = bool(block.get("is_error"))
            extra["exit_code"] = tool_error_exit_code(text) if extra["is_error"] else None
        name, canonical = self._calls.get(call_id or "", (None, None))
        if canonical is not None:
            extra.update(self_tool=True, canonical_tool=canonical)
        if not self._sidechain:
            self._pending.discard(call_id or "")
        return self._emit(
            EventType.TOOL_RESPONSE, text, extra, index, tool_name=name, call_id=call_id
        )

    def _assistant(self, record: dict[str, Any]) -> None:
        message = _obj(record.get("message"))
        model = _str(message.get("model"))
        model = None if model == "<synthetic>" else model  # Claude Code's own messages
        self.model = model or self.model
        base: dict[str, Any] = {"sidechain": True} if self._sidechain else {}
        message_id = _str(message.get("id"))
        if message_id:
            base["message_id"] = message_id
        content = message.get("content")
        if record.get("isApiErrorMessage"):
            event = self._emit(EventType.RUNTIME, block_text(content), {**base, "error": True}, 0)
            self._end_turn(event, completed=False)
            return
        blocks = content if isinstance(content, list) else [{"type": "text", "text": content}]
        # Split records repeat the response's usage: it goes on the response's first event.
        usage = message.get("usage") if isinstance(message.get("usage"), dict) else None
        if message_id is not None and message_id in self._usage_seen:
            usage = None
        elif message_id is not None:
            self._usage_seen.add(message_id)
        last: ParsedEvent | None = None
        for index, block in enumerate(blocks):
            if not isinstance(block, dict):
                continue
            extra = dict(base)
            if usage is not None:
                extra["usage"], usage = usage, None
            last = self._block(block, index, model, extra)
        ends = message.get("stop_reason") in _ENDS_TURN
        if ends and last is not None and last.type is EventType.ASSISTANT_RESPONSE:
            self._end_turn(last, completed=True)

    def _block(
        self, block: dict[str, Any], index: int, model: str | None, extra: dict[str, Any]
    ) -> ParsedEvent:
        kind = block.get("type")
        actor = False
        if kind == "text":
            event = self._emit(EventType.ASSISTANT_RESPONSE, _text(block), extra, index)
            actor = True
        elif kind in ("thinking", "redacted_thinking"):
            text = _str(block.get("thinking")) if kind == "thinking" else None
            if text is None:
                extra["encrypted"] = True
            event = self._emit(EventType.REASONING, text or ENCRYPTED_REASONING, extra, index)
        elif kind in _TOOL_USES:
            call_id, name = _str(block.get("id")), str(block.get("name"))
            event = tool_call_event(
                key=self._key(index),
                line=self._line,
                name=name,
                arguments=block.get("input"),
                call_id=call_id,
                timestamp=self._time,
                model=model,
                cwd=_str(self._record.get("cwd")),
                payload={**extra, "block_type": kind},
            )
            self._append(event)
            if call_id:
                self._calls[call_id] = (name, self_tool_name(name, block.get("input")))
                if not self._sidechain:
                    self._pending.add(call_id)
            actor = True
        elif isinstance(kind, str) and kind.endswith("_tool_result"):
            event = self._tool_result(block, index, extra)
        else:
            event = self._emit(EventType.UNKNOWN, canonical_json(block), extra, index)
        if event.type is not EventType.TOOL_CALL:
            event.model = model
        if actor and not self._sidechain:
            self._last_actor = len(self.events) - 1
        return event

    def _system(self, record: dict[str, Any]) -> None:
        subtype = _str(record.get("subtype")) or "system"
        text = _str(record.get("content")) or subtype
        extra: dict[str, Any] = {"subtype": subtype}
        if subtype in _COMPACTIONS:
            metadata = record.get("compactMetadata")
            if isinstance(metadata, dict):
                extra["compact_metadata"] = metadata
            self._emit(EventType.COMPACTION, text, extra, 0)
        elif subtype == "turn_duration":
            duration = record.get("durationMs")
            text = f"turn_duration {duration} ms" if isinstance(duration, int | float) else text
            event = self._emit(EventType.SYSTEM, text, extra, 0)
            if not self._ended:
                self._end_turn(event, completed=True)
            self._setup_from = len(self.events)
        else:
            self._emit(EventType.SYSTEM, text, extra, 0)

    def _end_turn(self, event: ParsedEvent, *, completed: bool) -> None:
        if self._sidechain:
            return  # a subagent's end is not the main turn's
        event.terminal, event.completes_turn = True, completed
        self._ended = True
        self._setup_from = len(self.events)

    def _key(self, index: int) -> str:
        uuid = _str(self._record.get("uuid"))
        if uuid is None:
            kind = str(self._record.get("type"))
            return self._keys.claim(self._content.key(kind, canonical_json(self._record)))
        return self._keys.claim(f"{uuid}#{index}")

    def _emit(
        self, kind: EventType, text: str, payload: dict[str, Any], index: int, **fields: Any
    ) -> ParsedEvent:
        """Appends an event for block `index` of the current record (`fields`: tool_name,
        call_id, model)."""
        event = ParsedEvent(
            key=self._key(index),
            line=self._line,
            type=kind,
            text=text,
            timestamp=self._time,
            payload={k: v for k, v in payload.items() if v is not None} or None,
            cwd=_str(self._record.get("cwd")),
            **fields,
        )
        self._append(event)
        return event

    def _append(self, event: ParsedEvent) -> None:
        # Turn setup is system/runtime only (the prompt that ends it resets it itself).
        if event.type not in (EventType.SYSTEM, EventType.RUNTIME, EventType.USER_INPUT):
            self._setup_from = None
        self.events.append(event)


def _str(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


def _text(block: dict[str, Any]) -> str:
    text = block.get("text")
    return text if isinstance(text, str) else ""


def _obj(value: object) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}
