"""Read-model records in the spec's JSON shapes (field names, order and nulls as specified).

Pure functions of records; the tool modules decide which records to load.
"""

from __future__ import annotations

import json
from typing import Any

from mcpd.sessions.model import EventRecord, EventType, SessionRecord, TurnRecord
from services.query.sessions.envelope import timestamp
from services.query.sessions.text import ENCRYPTED_REASONING, summarize

_UNKNOWN = EventType.UNKNOWN.value


def session_brief(session: SessionRecord) -> dict[str, Any]:
    """The short session block of open(turn) and open(event)."""
    return {"id": session.id, "title": session.title, "source": session.source}


def session_open(session: SessionRecord) -> dict[str, Any]:
    """The session block of open(session)."""
    return {
        "id": session.id,
        "title": session.title,
        "source": session.source,
        "started_at": timestamp(session.started_at),
        "updated_at": timestamp(session.updated_at),
        "completed": session.completed,
        "turn_count": session.turn_count,
        "event_count": session.event_count,
    }


def session_listed(session: SessionRecord) -> dict[str, Any]:
    """The session block of list_sessions: compact metadata, no transcript text."""
    return {
        "id": session.id,
        "title": session.title,
        "display_label": session.display_label,
        "source": session.source,
        "harness": session.harness,
        "started_at": timestamp(session.started_at),
        "updated_at": timestamp(session.updated_at),
        "completed": session.completed,
        "turn_count": session.turn_count,
        "event_count": session.event_count,
        "mode": session.mode,
        "session_slug": session.slug,
        "session_summary": session.summary,
    }


def unique(values: tuple[str, ...] | list[str], *, drop: str | None = None) -> list[str]:
    """Values without repeats, first-seen order kept (and `drop` left out)."""
    seen: dict[str, None] = {}
    for item in values:
        if item != drop:
            seen.setdefault(item, None)
    return list(seen)


def excerpt(event: EventRecord | None) -> dict[str, Any] | None:
    """`{event_id, text, truncated}` for a turn's user input or final response."""
    if event is None:
        return None
    text, truncated = event_summary_text(event)
    return {"event_id": event.id, "text": text, "truncated": truncated}


def turn_summary(
    turn: TurnRecord, user_input: EventRecord | None, final: EventRecord | None
) -> dict[str, Any]:
    """One compact turn in an expanded open(session) page."""
    return {
        "id": turn.id,
        "ordinal": turn.ordinal,
        "completed": turn.completed,
        "terminal_event_id": turn.terminal_event_id,
        "event_count": turn.event_count,
        "started_at": timestamp(turn.started_at),
        "updated_at": timestamp(turn.updated_at),
        "user_input": excerpt(user_input),
        "final_response": excerpt(final),
        "tools_called": unique(turn.tools_called),
        "event_types": unique(turn.event_types, drop=_UNKNOWN),
        "open": {"turn_id": turn.id, "terminal_event_id": turn.terminal_event_id},
    }


def turn_block(turn: TurnRecord) -> dict[str, Any]:
    """The turn block of open(turn)."""
    return {
        "id": turn.id,
        "session_id": turn.session_id,
        "ordinal": turn.ordinal,
        "completed": turn.completed,
        "terminal_event_id": turn.terminal_event_id,
        "event_count": turn.event_count,
        "started_at": timestamp(turn.started_at),
        "updated_at": timestamp(turn.updated_at),
    }


def turn_digest(
    turn: TurnRecord, user_input: EventRecord | None, final: EventRecord | None
) -> dict[str, Any]:
    """The `summary` block of open(turn)."""
    return {
        "user_input": excerpt(user_input),
        "final_response": excerpt(final),
        "tools_called": unique(turn.tools_called),
        "event_types": unique(turn.event_types, drop=_UNKNOWN),
    }


def event_summary_text(event: EventRecord) -> tuple[str, bool]:
    """The compact text of an event; encrypted reasoning shows a placeholder, not ciphertext."""
    if event.type is EventType.REASONING and _encrypted(event) and not event.text.strip():
        return ENCRYPTED_REASONING, False
    return summarize(event.text)


def event_summary(event: EventRecord) -> dict[str, Any]:
    """One compact event in an expanded open(turn) page."""
    text, truncated = event_summary_text(event)
    return {
        "id": event.id,
        "ordinal": event.ordinal,
        "type": event.type.value,
        "timestamp": timestamp(event.timestamp),
        "terminal": event.terminal,
        "tool_name": event.tool_name,
        "model": event.model,
        "summary": text,
        "truncated": truncated,
    }


def event_block(event: EventRecord) -> dict[str, Any]:
    """The event block of open(event)."""
    return {
        "id": event.id,
        "session_id": event.session_id,
        "turn_id": event.turn_id,
        "ordinal": event.ordinal,
        "type": event.type.value,
        "timestamp": timestamp(event.timestamp),
        "terminal": event.terminal,
        "model": event.model,
        "originating_model": event.originating_model,
        "tool_name": event.tool_name,
    }


def event_content(event: EventRecord) -> dict[str, Any]:
    """The full content of an event (never truncated): text, plus tool arguments or exit
    status for tool events and the opaque payload of encrypted reasoning."""
    payload = event.payload or {}
    if event.type is EventType.TOOL_CALL:
        return {
            "format": "tool_call",
            "tool_name": event.tool_name,
            "arguments": tool_arguments(event),
            "text": event.text,
            "truncated": False,
        }
    if event.type is EventType.TOOL_RESPONSE:
        exit_code = payload.get("exit_code")
        return {
            "format": "tool_response",
            "tool_name": event.tool_name,
            "exit_code": exit_code if isinstance(exit_code, int) else None,
            "text": event.text,
            "truncated": False,
        }
    content: dict[str, Any] = {"format": "text", "text": event.text, "truncated": False}
    if event.type is EventType.REASONING and _encrypted(event):
        content["encrypted_content"] = payload.get("encrypted_content")
    return content


def tool_arguments(event: EventRecord) -> Any:
    """A tool call's arguments from its payload (`arguments` or `input`); harnesses that
    record them as a JSON string get them decoded when it is one."""
    payload = event.payload or {}
    raw = payload.get("arguments", payload.get("input"))
    if isinstance(raw, str):
        try:
            return json.loads(raw)
        except ValueError:
            return raw
    return raw


def _encrypted(event: EventRecord) -> bool:
    return bool(event.payload and event.payload.get("encrypted_content"))
