"""Whole open envelopes for a turn page (with its continuation) and for events of each
format, asserted as full JSON (spec: Opening A Turn, Opening An Event)."""

from __future__ import annotations

from typing import Any

from mcpd.sessions.store import SessionStore
from services.query.sessions import SessionTools
from services.query.tests.sessions.builders import event_id
from services.query.tests.sessions.conftest import seed
from services.query.tests.sessions.corpus import (
    MIGRATION_ANSWER,
    MIGRATION_OUTPUT,
    MIGRATION_USER,
    migration,
)
from services.query.tests.sessions.test_envelopes import (
    ANSWER_SUMMARY,
    SESSION,
    SESSION_BRIEF,
    TURN1,
    TURN2,
    envelope,
)


async def test_turn_open_with_limit_envelope(store: SessionStore, tools: SessionTools) -> None:
    seed(store, migration())
    got = await envelope(tools, "open", {"id": TURN1, "limit": 2})
    cursor = got["data"]["next_cursor"]
    assert isinstance(cursor, str)
    assert cursor
    got["data"]["next_cursor"] = "<cursor>"
    user_excerpt = {"event_id": event_id("mig", 1, 1), "text": MIGRATION_USER, "truncated": False}
    assert got == {
        "schema_version": "moraine.mcp.open.v1",
        "tool": "open",
        "request": {"id": TURN1, "limit": 2},
        "data": {
            "kind": "turn",
            "turn": {
                "id": TURN1,
                "session_id": SESSION,
                "ordinal": 1,
                "completed": True,
                "terminal_event_id": event_id("mig", 1, 4),
                "event_count": 4,
                "started_at": "2026-04-29T18:41:56.000Z",
                "updated_at": "2026-04-29T18:41:59.000Z",
            },
            "session": SESSION_BRIEF,
            "summary": {
                "user_input": user_excerpt,
                "final_response": {
                    "event_id": event_id("mig", 1, 4),
                    "text": ANSWER_SUMMARY,
                    "truncated": True,
                },
                "tools_called": ["exec_command"],
                "event_types": ["user_input", "tool_call", "tool_response", "assistant_response"],
            },
            "events": [
                {
                    "id": event_id("mig", 1, 1),
                    "ordinal": 1,
                    "type": "user_input",
                    "timestamp": "2026-04-29T18:41:56.000Z",
                    "terminal": False,
                    "tool_name": None,
                    "model": None,
                    "summary": MIGRATION_USER,
                    "truncated": False,
                },
                {
                    "id": event_id("mig", 1, 2),
                    "ordinal": 2,
                    "type": "tool_call",
                    "timestamp": "2026-04-29T18:41:57.000Z",
                    "terminal": False,
                    "tool_name": "exec_command",
                    "model": "gpt-5",
                    "summary": 'exec_command(cmd="cargo test --workspace --locked", '
                    'workdir="/Users/eric/src/moraine")',
                    "truncated": False,
                },
            ],
            "next_cursor": "<cursor>",
            "traversal": {
                "session_id": SESSION,
                "previous_turn_id": None,
                "next_turn_id": TURN2,
                "first_event_id": event_id("mig", 1, 1),
                "last_event_id": event_id("mig", 1, 4),
            },
        },
        "warnings": [],
        "performance": {"elapsed_ms": 0},
    }
    rest = await envelope(tools, "open", {"cursor": cursor})
    assert rest["request"] == {"cursor": cursor}
    assert [e["ordinal"] for e in rest["data"]["events"]] == [3, 4]
    assert rest["data"]["events"][0]["summary"] == (
        "cargo test --workspace --locked failed in moraine-clickhouse-client..."
    )
    assert rest["data"]["events"][0]["truncated"] is True
    assert rest["data"]["next_cursor"] is None


def event_traversal(ordinal: int) -> dict[str, Any]:
    return {
        "session_id": SESSION,
        "turn_id": TURN1,
        "previous_event_id": event_id("mig", 1, ordinal - 1) if ordinal > 1 else None,
        # The turn's last event has no next event: the next turn is reached by next_turn_id.
        "next_event_id": event_id("mig", 1, ordinal + 1) if ordinal < 4 else None,
        "previous_turn_id": None,
        "next_turn_id": TURN2,
    }


def event_data(
    ordinal: int, kind: str, at: str, model: str | None, tool: str | None
) -> dict[str, Any]:
    return {
        "id": event_id("mig", 1, ordinal),
        "session_id": SESSION,
        "turn_id": TURN1,
        "ordinal": ordinal,
        "type": kind,
        "timestamp": at,
        "terminal": kind == "assistant_response",
        "model": model,
        "originating_model": model,
        "tool_name": tool,
    }


async def test_event_open_envelopes(store: SessionStore, tools: SessionTools) -> None:
    seed(store, migration())
    turn_block = {"id": TURN1, "ordinal": 1, "completed": True}
    cases = [
        (
            1,
            event_data(1, "user_input", "2026-04-29T18:41:56.000Z", None, None),
            {"format": "text", "text": MIGRATION_USER, "truncated": False},
        ),
        (
            2,
            event_data(2, "tool_call", "2026-04-29T18:41:57.000Z", "gpt-5", "exec_command"),
            {
                "format": "tool_call",
                "tool_name": "exec_command",
                "arguments": {
                    "cmd": "cargo test --workspace --locked",
                    "workdir": "/Users/eric/src/moraine",
                },
                "text": 'exec_command(cmd="cargo test --workspace --locked", '
                'workdir="/Users/eric/src/moraine")',
                "truncated": False,
            },
        ),
        (
            3,
            event_data(3, "tool_response", "2026-04-29T18:41:58.000Z", "gpt-5", "exec_command"),
            {
                "format": "tool_response",
                "tool_name": "exec_command",
                "exit_code": 101,
                "text": MIGRATION_OUTPUT,
                "truncated": False,
            },
        ),
        (
            4,
            event_data(4, "assistant_response", "2026-04-29T18:41:59.000Z", "gpt-5", None),
            {"format": "text", "text": MIGRATION_ANSWER, "truncated": False},
        ),
    ]
    for ordinal, event, content in cases:
        ident = event_id("mig", 1, ordinal)
        got = await envelope(tools, "open", {"id": ident})
        assert got == {
            "schema_version": "moraine.mcp.open.v1",
            "tool": "open",
            "request": {"id": ident},
            "data": {
                "kind": "event",
                "event": event,
                "content": content,
                "session": SESSION_BRIEF,
                "turn": turn_block,
                "traversal": event_traversal(ordinal),
            },
            "warnings": [],
            "performance": {"elapsed_ms": 0},
        }
