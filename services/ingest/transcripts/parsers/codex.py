"""Codex rollout files (`~/.codex/sessions/**/rollout-*.jsonl`): `{timestamp, type, payload}`.

docs/sessions.md ("Codex") describes the mapping. The parts that need care: Codex sends
injected context (environment, AGENTS.md, instructions, plugin lists) as user-role messages,
which become `system`; `event_msg` user/agent messages and reasoning repeat `response_item`s
and are folded into one event (whichever comes first); the setup a turn writes before its
prompt (task_started, instructions) belongs to that turn; task_complete ends a turn completed,
turn_aborted and error end it uncompleted.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from mcpd.sessions.model import EventType, ParsedEvent, ParsedSession
from services.ingest.transcripts.keys import ContentKeys
from services.ingest.transcripts.parsers._codex_text import (
    Twins,
    is_injected,
    render_history,
    runtime_text,
    tool_output,
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
from services.ingest.transcripts.tool_args import parse_arguments, self_tool_name

__all__ = ["CodexParser"]

_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", re.I)
_QUIET_EVENTS = frozenset({"agent_reasoning_section_break"})
_TURN_EDGES = frozenset({"task_started", "task_complete", "turn_aborted"})
_TERMINAL_EVENTS = frozenset({"task_complete", "turn_aborted", "error"})
_BULKY = frozenset({"type", "stdout", "stderr", "aggregated_output", "formatted_output"})
_SETUP_TYPES = (EventType.SYSTEM, EventType.RUNTIME, EventType.USER_INPUT)


class CodexParser:
    """Parses one Codex rollout file."""

    harness = "codex"

    def parse(self, lines: Sequence[str], *, path: str) -> ParsedSession:
        state = _Rollout()
        errors = feed_records(lines, state.record)
        return ParsedSession(
            harness=self.harness,
            session_key=state.session_key or _key_from_path(path),
            events=state.events,
            errors=errors,
            cwd=state.session_cwd,
            model=state.model,
        )


def _key_from_path(path: str) -> str:
    """The uuid at the end of a rollout file name, else the file name."""
    stem = posixpath.basename(path).removesuffix(".jsonl")
    found = _UUID.findall(stem)
    return found[-1].lower() if found else stem


class _Rollout:
    def __init__(self) -> None:
        self.events: list[ParsedEvent] = []
        self.session_key: str | None = None
        self.session_cwd: str | None = None
        self.cwd: str | None = None
        self.model: str | None = None
        self._keys = UniqueKeys()
        self._content = ContentKeys()
        self._twins = Twins()
        self._setup_from: int | None = 0
        self._calls: dict[str, tuple[str, str | None]] = {}
        self._exit_codes: dict[str, int] = {}
        # The record being read: its line, time, and (type, payload) for content keys.
        self._line = 0
        self._time: datetime | None = None
        self._raw: tuple[str, dict[str, Any]] = ("", {})

    def record(self, line: int, record: dict[str, Any]) -> None:
        kind = str(record.get("type"))
        payload = _dict(record.get("payload"))
        self._line, self._time = line, parse_timestamp(record.get("timestamp"))
        self._raw = (kind, payload)
        if kind == "session_meta":
            self.session_key = self.session_key or _str(payload.get("id"))
            self.cwd = self.cwd or _str(payload.get("cwd"))
            self.session_cwd = self.session_cwd or self.cwd
        elif kind == "turn_context":
            self.model = _str(payload.get("model")) or self.model
            self.cwd = _str(payload.get("cwd")) or self.cwd
            self.session_cwd = self.session_cwd or self.cwd
        elif kind == "response_item":
            self._response_item(payload)
        elif kind == "event_msg":
            self._event_msg(payload)
        elif kind == "compacted":
            history = payload.get("replacement_history")
            text = _str(payload.get("message")) or render_history(history)
            count = len(history) if isinstance(history, list) else 0
            self._emit(EventType.COMPACTION, text, {"history_items": count})
        else:
            self._raw = (kind, record)
            self._emit(EventType.UNKNOWN, canonical_json(record))

    def _response_item(self, item: dict[str, Any]) -> None:
        kind = str(item.get("type"))
        if kind == "message":
            self._message(item)
        elif kind == "reasoning":
            self._reasoning(item)
        elif kind.endswith("_call_output"):
            self._tool_output(item)
        elif kind.endswith("_call"):
            self._tool_call(item, kind)
        elif kind in ("compaction", "compaction_summary"):
            text = _str(item.get("summary")) or "[encrypted compaction summary omitted]"
            self._emit(EventType.COMPACTION, text, {"item_type": kind})
        elif kind == "ghost_snapshot":
            self._emit(EventType.RUNTIME, kind, {"item_type": kind})
        else:
            self._emit(EventType.UNKNOWN, canonical_json(item))

    def _message(self, item: dict[str, Any]) -> None:
        role, content = str(item.get("role")), item.get("content")
        parts = [block_text([b]) for b in content] if isinstance(content, list) else []
        parts = [part for part in parts if part.strip()] or [block_text(content)]
        extra: dict[str, Any] = {"role": role}
        if isinstance(item.get("phase"), str):
            extra["phase"] = item["phase"]
        kind = {
            "user": EventType.USER_INPUT,
            "assistant": EventType.ASSISTANT_RESPONSE,
            "developer": EventType.SYSTEM,
            "system": EventType.SYSTEM,
        }.get(role, EventType.UNKNOWN)
        if role == "user":
            typed = [part for part in parts if not is_injected(part)]
            if not typed:
                kind = EventType.SYSTEM
            elif len(typed) < len(parts):
                extra["injected_parts"] = len(parts) - len(typed)
                parts = typed
        ident = _str(item.get("id"))
        self._twin(kind, "\n".join(parts), "item", extra, f"msg:{ident}" if ident else None)

    def _reasoning(self, item: dict[str, Any]) -> None:
        parts = [
            text
            for field in ("summary", "content")
            for text in (block_text([b]) for b in _list(item.get(field)))
            if text.strip()
        ]
        extra = {"encrypted": True} if item.get("encrypted_content") else {}
        fresh = [part for part in parts if not self._twins.take("reasoning", part, "item")]
        if parts and not fresh:
            return  # every part already came as agent_reasoning
        text = "\n\n".join(fresh) if fresh else (ENCRYPTED_REASONING if extra else "")
        ident = _str(item.get("id"))
        key = f"rs:{ident}" if ident else None
        self._emit(EventType.REASONING, text, extra, model=self.model, key=key)
        for part in fresh:
            self._twins.note("reasoning", part, "item")

    def _tool_call(self, item: dict[str, Any], kind: str) -> None:
        call_id = _str(item.get("call_id")) or _str(item.get("id"))
        name = _str(item.get("name")) or kind.removesuffix("_call")
        if kind == "custom_tool_call":
            arguments = item.get("input")
        elif kind in ("local_shell_call", "web_search_call"):
            arguments = item.get("action")
        else:
            arguments = parse_arguments(item.get("arguments", item.get("action")))
        extra: dict[str, Any] = {"item_type": kind}
        if isinstance(item.get("status"), str):
            extra["status"] = item["status"]
        event = tool_call_event(
            key=self._key(f"call:{call_id}" if call_id else None),
            line=self._line,
            name=name,
            arguments=arguments,
            call_id=call_id,
            timestamp=self._time,
            model=self.model,
            cwd=self.cwd,
            payload=extra,
        )
        if call_id:
            self._calls[call_id] = (name, self_tool_name(name, arguments))
        self._append(event)

    def _tool_output(self, item: dict[str, Any]) -> None:
        call_id = _str(item.get("call_id"))
        text, exit_code, extra = tool_output(item.get("output"))
        if exit_code is None:
            exit_code = self._exit_codes.get(call_id or "")
        if exit_code is not None:
            extra["exit_code"] = exit_code
        name, canonical = self._calls.get(call_id or "", (None, None))
        if canonical is not None:
            extra.update(self_tool=True, canonical_tool=canonical)
        key = f"out:{call_id}" if call_id else None
        self._emit(EventType.TOOL_RESPONSE, text, extra, key=key, tool_name=name, call_id=call_id)

    def _event_msg(self, payload: dict[str, Any]) -> None:
        kind = str(payload.get("type"))
        if kind in _TURN_EDGES:
            self._twins.clear()
        if kind == "user_message":
            text = _str(payload.get("message")) or ""
            injected = payload.get("kind") not in (None, "plain") or is_injected(text)
            event_type = EventType.SYSTEM if injected else EventType.USER_INPUT
            self._twin(event_type, text, "event", {"role": "user", "event_msg": kind})
        elif kind == "agent_message":
            text = _str(payload.get("message")) or ""
            extra = {"role": "assistant", "event_msg": kind}
            self._twin(EventType.ASSISTANT_RESPONSE, text, "event", extra)
        elif kind in ("agent_reasoning", "agent_reasoning_raw_content"):
            self._twin(EventType.REASONING, _str(payload.get("text")) or "", "event", {})
        elif kind not in _QUIET_EVENTS:
            self._runtime(kind, payload)

    def _runtime(self, kind: str, payload: dict[str, Any]) -> None:
        call_id = _str(payload.get("call_id"))
        code = payload.get("exit_code")
        if kind == "exec_command_end" and call_id and isinstance(code, int):
            self._exit_codes[call_id] = code
        if kind == "task_started":
            self._setup_from = len(self.events)
        body = {k: v for k, v in payload.items() if k not in _BULKY}
        body["event_msg"] = kind
        text = runtime_text(kind, payload)
        event = self._emit(EventType.RUNTIME, text, body, call_id=call_id)
        if kind in _TERMINAL_EVENTS:
            event.terminal, event.completes_turn = True, kind == "task_complete"
            self._setup_from = len(self.events)

    def _twin(
        self, kind: EventType, text: str, src: str, extra: dict[str, Any], key: str | None = None
    ) -> None:
        """An event for content Codex writes twice, unless its twin already made one."""
        if self._twins.take(kind.value, text, src):
            return
        self._twins.note(kind.value, text, src)
        model = self.model if kind in (EventType.ASSISTANT_RESPONSE, EventType.REASONING) else None
        self._emit(kind, text, extra, model=model, key=key)
        if kind is EventType.USER_INPUT:
            mark_turn_start(self.events, len(self.events) - 1, self._setup_from)
            self._setup_from = None

    def _key(self, key: str | None) -> str:
        """The harness id when there is one, else the record's content hash and occurrence."""
        kind, raw = self._raw
        return self._keys.claim(key or self._content.key(kind, canonical_json(raw)))

    def _emit(
        self, kind: EventType, text: str, payload: dict[str, Any] | None = None, **fields: Any
    ) -> ParsedEvent:
        """Appends an event of the current record; `fields`: model, key, tool_name, call_id."""
        event = ParsedEvent(
            key=self._key(fields.pop("key", None)),
            line=self._line,
            type=kind,
            text=text,
            timestamp=self._time,
            payload=payload or None,
            cwd=self.cwd,
            **fields,
        )
        self._append(event)
        return event

    def _append(self, event: ParsedEvent) -> None:
        # Turn setup is system/runtime only (the prompt that ends it resets it itself).
        if event.type not in _SETUP_TYPES:
            self._setup_from = None
        self.events.append(event)


def _str(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


def _dict(value: object) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _list(value: object) -> list[Any]:
    return value if isinstance(value, list) else []
