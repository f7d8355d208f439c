"""Cursor agent transcripts (`~/.cursor/projects/*/agent-transcripts/**/*.jsonl`).

One message per line: `{role, message: {content}, timestamp?, model?}`, `role` being `user`,
`assistant` or `tool`, `content` a string or Anthropic-style blocks (`text`, `reasoning` or
`thinking`, `tool_use {id, name, input}`, `tool_result {tool_use_id, content, is_error}`).
Records carry no ids and no session id: the session key is the file name (a UUID), event
keys are content hashes plus the block index. User text may be wrapped in `<user_query>`.

The format has no end-of-turn record: `close_turns` (shared with qwen-code) marks a turn's
last assistant text as its final, completing response when no tool call follows it and
every tool call of the turn was answered.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from pathlib import PurePath
from typing import Any

from mcpd.sessions.model import EventType, ParsedEvent, ParsedSession, ParseError
from services.ingest.transcripts.keys import ContentKeys
from services.ingest.transcripts.parsers._common import (
    block_text,
    mark_turn_start,
    parse_timestamp,
    read_json_lines,
    tool_call_event,
)
from services.ingest.transcripts.tool_args import base_tool_name

__all__ = ["CursorParser", "close_turns", "link_responses"]

_SESSION_FIELDS = ("conversationId", "conversation_id", "sessionId", "session_id")
_USER_QUERY = re.compile(r"^\s*<user_query>\s*(.*?)\s*</user_query>\s*$", re.DOTALL)
# Cursor's editing tools that tool_args does not list as mutating.
_MUTATING = frozenset({"strreplace", "delete", "editnotebook", "multiedit"})


def close_turns(events: list[ParsedEvent], prompts: list[int]) -> None:
    """For formats without an end-of-turn record: in each turn (from a prompt to the next),
    the last assistant response is terminal and completes the turn when no tool call or
    terminal event follows it and no tool call of the turn is left unanswered; then the turns
    are opened (`mark_turn_start`, setup after the previous turn's end joins the next)."""
    answered = {e.call_id for e in events if e.type is EventType.TOOL_RESPONSE and e.call_id}
    bounds = [*prompts, len(events)]
    ends: list[int | None] = []
    for start, end in zip([0, *prompts], bounds, strict=True):
        final: int | None = None
        pending = False
        for index in range(start, end):
            event = events[index]
            if event.type is EventType.ASSISTANT_RESPONSE:
                final = index
            elif event.type is EventType.TOOL_CALL or event.terminal:
                final = None
            if event.type is EventType.TOOL_CALL and event.call_id not in answered:
                pending = pending or event.call_id is not None
        if final is not None and not pending:
            events[final].terminal = events[final].completes_turn = True
        last = max((i for i in range(start, end) if events[i].terminal), default=None)
        ends.append(last)
    for turn, prompt in enumerate(prompts):
        before = ends[turn]  # where what precedes this prompt (the previous turn) ended
        setup_from = before + 1 if before is not None else (0 if turn == 0 else None)
        mark_turn_start(events, prompt, setup_from)


def link_responses(events: list[ParsedEvent]) -> None:
    """Tool responses take the tool name of their call when they lack one, and the responses
    of mcpd's own tools are flagged `self_tool` like their calls."""
    calls = {e.call_id: e for e in events if e.type is EventType.TOOL_CALL and e.call_id}
    for event in events:
        is_response = event.type is EventType.TOOL_RESPONSE and event.call_id
        call = calls.get(event.call_id or "") if is_response else None
        if call is None:
            continue
        event.tool_name = event.tool_name or call.tool_name
        if (call.payload or {}).get("self_tool"):
            event.payload = {**(event.payload or {}), "self_tool": True}


def _text(value: Any) -> str:
    if isinstance(value, str):
        return value
    text = block_text(value)
    if text or value is None:
        return text
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


def _is_result(block: Any) -> bool:
    kind = block.get("type") if isinstance(block, dict) else None
    return kind in ("tool_result", "function_call_output", "tool_call_result")


def _first(record: dict[str, Any], fields: Sequence[str]) -> str | None:
    message = record.get("message")
    for source in (record, message if isinstance(message, dict) else {}):
        for field in fields:
            value = source.get(field)
            if isinstance(value, str) and value.strip():
                return value.strip()
    return None


class CursorParser:
    """Reads a Cursor agent transcript."""

    harness = "cursor"

    def parse(self, lines: Sequence[str], *, path: str) -> ParsedSession:
        events: list[ParsedEvent] = []
        errors: list[ParseError] = []
        prompts: list[int] = []
        content_keys = ContentKeys()
        session_key: str | None = None
        model: str | None = None
        for item in read_json_lines(lines):
            if isinstance(item, ParseError):
                errors.append(item)
                continue
            line, record = item
            session_key = session_key or _first(record, _SESSION_FIELDS)
            model = _first(record, ("model", "modelName", "modelId")) or model
            base = content_keys.key(json.dumps(record, sort_keys=True, ensure_ascii=False))
            for event in self._record(line, record, base, model):
                if event.starts_turn:
                    event.starts_turn = False
                    prompts.append(len(events))
                events.append(event)
        close_turns(events, prompts)
        link_responses(events)
        return ParsedSession(
            harness=self.harness,
            session_key=session_key or PurePath(path).stem,
            events=events,
            errors=errors,
            model=model,
        )

    def _record(
        self, line: int, record: dict[str, Any], base: str, model: str | None
    ) -> list[ParsedEvent]:
        role = (_first(record, ("role",)) or "").lower()
        message = record.get("message")
        content = message.get("content") if isinstance(message, dict) else record.get("content")
        timestamp = parse_timestamp(record.get("timestamp") or record.get("createdAt"))
        blocks: list[Any] = (
            list(content) if isinstance(content, list) else [] if content is None else [content]
        )
        events: list[ParsedEvent] = []
        if role == "user":
            said = [b for b in blocks if not _is_result(b)]
            text = block_text(said)
            match = _USER_QUERY.match(text)
            text = match.group(1) if match else text
            if text.strip():
                prompt = ParsedEvent(base, line, EventType.USER_INPUT, text, timestamp)
                prompt.starts_turn = True  # collected as a prompt by `parse`
                events.append(prompt)
            blocks = [b if _is_result(b) else None for b in blocks]
        default = {
            "assistant": EventType.ASSISTANT_RESPONSE,
            "user": EventType.USER_INPUT,
            "system": EventType.SYSTEM,
            "tool": EventType.TOOL_RESPONSE,
        }.get(role, EventType.UNKNOWN)
        for index, block in enumerate(blocks):
            if block is None:
                continue
            key = f"{base}:{index}"
            block = block if isinstance(block, dict) else {"type": "text", "text": _text(block)}
            kind = str(block.get("type", "text")).lower()
            if kind in ("tool_use", "tool_call", "function_call"):
                name = str(block.get("name") or "")
                call = tool_call_event(
                    key=key,
                    line=line,
                    name=name,
                    arguments=block.get("input", block.get("arguments")),
                    call_id=block.get("id") if isinstance(block.get("id"), str) else None,
                    timestamp=timestamp,
                    model=model,
                )
                call.mutation = call.mutation or base_tool_name(name)[1].lower() in _MUTATING
                events.append(call)
                continue
            if _is_result(block):
                call_id = block.get("tool_use_id") or block.get("tool_call_id")
                event = ParsedEvent(key, line, EventType.TOOL_RESPONSE, _text(block.get("content")))
                event.call_id = call_id if isinstance(call_id, str) else None
                event.payload = {"is_error": bool(block.get("is_error"))}
            elif kind in ("reasoning", "thinking"):
                thought = block.get("text") or block.get("thinking")
                event = ParsedEvent(key, line, EventType.REASONING, _text(thought))
            elif kind == "text" and default is not EventType.UNKNOWN:
                event = ParsedEvent(key, line, default, _text(block.get("text")))
            else:
                event = ParsedEvent(key, line, EventType.UNKNOWN, f"{role} {kind} block")
                event.payload = block
            if event.text.strip():
                event.timestamp = timestamp
                event.model = model if role == "assistant" else None
                events.append(event)
        return events
