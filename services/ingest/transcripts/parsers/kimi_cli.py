"""Kimi CLI wire files (`~/.kimi/sessions/<workdir hash>/<session id>/wire.jsonl`).

The first line is `{"type": "metadata", "protocol_version": ...}`; every other line is
`{timestamp: <epoch seconds>, message: {type, payload}}`, the recorder's merged wire
messages (streamed text and tool-call deltas arrive already joined). No record carries a
session id, a model or a cwd: the session key is the session directory's name, keys are the
tool call ids or content hashes.

- `TurnBegin {user_input}` opens a turn (user_input); `SteerInput` is typed by the person
  into the running turn; `TurnEnd` ends it (terminal, completed unless a `StepInterrupted`
  cut it off; an interrupted turn may have no TurnEnd at all).
- `ContentPart {type: text|think}`: assistant_response / reasoning.
- `ToolCall {id, function {name, arguments (JSON text)}}` / `ToolResult {tool_call_id,
  return_value {is_error, output, message}}`.
- `CompactionBegin` is the compaction; `StatusUpdate` (token usage), `StepBegin`, hooks, MCP
  loading, approvals, questions and `SubagentEvent`s are runtime (a subagent's events are
  also written to its own wire file, so only their kind is kept here); `Notification` and
  `PlanDisplay` are system.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import PurePath
from typing import Any

from mcpd.sessions.model import EventType, ParsedEvent, ParsedSession, ParseError
from services.ingest.transcripts.keys import ContentKeys
from services.ingest.transcripts.parsers._common import (
    UniqueKeys,
    block_text,
    mark_turn_start,
    parse_timestamp,
    read_json_lines,
    tool_call_event,
)
from services.ingest.transcripts.parsers.cursor import link_responses
from services.ingest.transcripts.tool_args import base_tool_name, parse_arguments

__all__ = ["KimiCliParser"]

# Kimi's editing tools that tool_args does not list as mutating.
_MUTATING = frozenset({"writefile", "strreplacefile"})
_RUNTIME = frozenset(
    {
        "StepBegin",
        "StatusUpdate",
        "CompactionEnd",
        "HookTriggered",
        "HookResolved",
        "MCPLoadingBegin",
        "MCPLoadingEnd",
        "MCPStatusSnapshot",
        "ApprovalRequest",
        "ApprovalResponse",
        "ApprovalRequestResolved",
        "QuestionRequest",
        "QuestionResponse",
        "ToolCallRequest",
        "ToolCallPart",
        "SubagentEvent",
        "BtwBegin",
        "BtwEnd",
    }
)


def _obj(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _str(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _input_text(value: Any) -> str:
    """A user input: a string, or content parts (text joined, media as placeholders)."""
    if not isinstance(value, list):
        return _str(value)
    parts = [block_text([p for p in value if _obj(p).get("type") == "text"])]
    parts += [f"[{_obj(p).get('type')}]" for p in value if _obj(p).get("type") != "text"]
    return "\n".join(p for p in parts if p)


def _runtime_text(kind: str, payload: dict[str, Any]) -> str:
    """A short description: runtime records are looked at, rarely searched."""
    if kind == "StepBegin":
        return f"step {payload.get('n')}"
    if kind == "StatusUpdate":
        usage = _obj(payload.get("token_usage"))
        tokens = ", ".join(f"{k}={v}" for k, v in usage.items())
        return f"status: context {payload.get('context_tokens')} tokens" + (
            f"; usage {tokens}" if tokens else ""
        )
    if kind in ("HookTriggered", "HookResolved"):
        return " ".join(
            filter(None, (kind, _str(payload.get("event")), _str(payload.get("target"))))
        )
    if kind == "ApprovalRequest":
        return (
            f"approval requested: {_str(payload.get('action'))} {_str(payload.get('description'))}"
        )
    if kind in ("ApprovalResponse", "ApprovalRequestResolved"):
        return f"approval: {_str(payload.get('response'))} {_str(payload.get('feedback'))}".strip()
    if kind == "SubagentEvent":
        inner = _str(_obj(payload.get("event")).get("type"))
        return f"subagent {_str(payload.get('agent_id'))}: {inner}"
    return kind


class KimiCliParser:
    """Reads a Kimi CLI `wire.jsonl`."""

    harness = "kimi-cli"

    def parse(self, lines: Sequence[str], *, path: str) -> ParsedSession:
        events: list[ParsedEvent] = []
        errors: list[ParseError] = []
        ids, content = UniqueKeys(), ContentKeys()
        setup_from: int | None = 0
        interrupted = False
        for item in read_json_lines(lines):
            if isinstance(item, ParseError):
                errors.append(item)
                continue
            line, record = item
            message = _obj(record.get("message"))
            if not message and record.get("type") == "metadata":
                continue
            kind = _str(message.get("type")) or _str(record.get("type"))
            payload = _obj(message.get("payload"))
            base = content.key(json.dumps(record, sort_keys=True, ensure_ascii=False))
            event = self._event(kind, payload, line, base, ids)
            if event is None:
                continue
            event.timestamp = parse_timestamp(record.get("timestamp"))
            if kind == "TurnEnd":
                event.terminal, event.completes_turn = True, not interrupted
            elif kind == "StepInterrupted":
                event.terminal, interrupted = True, True
            events.append(event)
            if kind == "TurnBegin":
                mark_turn_start(events, len(events) - 1, setup_from)
                setup_from, interrupted = None, False
            elif event.terminal:
                setup_from = len(events)
        link_responses(events)
        where = PurePath(path)
        return ParsedSession(
            harness=self.harness,
            session_key=where.parent.name or where.stem,
            events=events,
            errors=errors,
        )

    def _event(
        self, kind: str, payload: dict[str, Any], line: int, base: str, ids: UniqueKeys
    ) -> ParsedEvent | None:
        if kind in ("TurnBegin", "SteerInput"):
            text = _input_text(payload.get("user_input"))
            return ParsedEvent(base, line, EventType.USER_INPUT, text, payload={"kind": kind})
        if kind == "ContentPart":
            part = _str(payload.get("type"))
            if part == "think":
                return ParsedEvent(base, line, EventType.REASONING, _str(payload.get("think")))
            if part == "text":
                text = _str(payload.get("text"))
                return ParsedEvent(base, line, EventType.ASSISTANT_RESPONSE, text)
            return ParsedEvent(
                base, line, EventType.UNKNOWN, f"{part} content part", payload=payload
            )
        if kind == "ToolCall":
            function = _obj(payload.get("function"))
            name, call_id = _str(function.get("name")), _str(payload.get("id")) or None
            call = tool_call_event(
                key=ids.claim(f"call:{call_id}") if call_id else base,
                line=line,
                name=name,
                arguments=parse_arguments(function.get("arguments")),
                call_id=call_id,
                timestamp=None,
            )
            call.mutation = call.mutation or base_tool_name(name)[1].lower() in _MUTATING
            return call
        if kind == "ToolResult":
            call_id = _str(payload.get("tool_call_id")) or None
            value = _obj(payload.get("return_value"))
            output = value.get("output")
            text = output if isinstance(output, str) else block_text(output)
            return ParsedEvent(
                ids.claim(f"result:{call_id}") if call_id else base,
                line,
                EventType.TOOL_RESPONSE,
                text or _str(value.get("message")),
                call_id=call_id,
                payload={"is_error": bool(value.get("is_error")), "message": value.get("message")},
            )
        if kind in ("TurnEnd", "StepInterrupted"):
            return ParsedEvent(base, line, EventType.RUNTIME, kind)
        if kind == "CompactionBegin":
            return ParsedEvent(base, line, EventType.COMPACTION, "context compaction")
        if kind == "Notification":
            text = "\n".join(filter(None, (_str(payload.get("title")), _str(payload.get("body")))))
            return ParsedEvent(base, line, EventType.SYSTEM, text, payload=payload)
        if kind == "PlanDisplay":
            text = _str(payload.get("content"))
            return ParsedEvent(
                base, line, EventType.SYSTEM, text, payload={"file_path": payload.get("file_path")}
            )
        if kind in _RUNTIME:
            body = {k: v for k, v in payload.items() if k != "event"} or None
            return ParsedEvent(
                base, line, EventType.RUNTIME, _runtime_text(kind, payload), payload=body
            )
        return ParsedEvent(base, line, EventType.UNKNOWN, kind or "record", payload=payload)
