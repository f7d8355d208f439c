"""Whole envelopes for a small session, asserted as full JSON: a search hit, session opens
(summary-only and expanded) and the error envelope (spec: Response Envelope, Error Envelope,
Search Hit Shape, Opening A Session). Turn and event opens are in test_envelopes_open."""

from __future__ import annotations

from typing import Any

import jsonschema

from mcpd.runtime.clock import ManualClock
from mcpd.sessions.store import SessionStore
from services.query.sessions import OUTPUT_SCHEMAS, SessionTools
from services.query.tests.sessions.builders import PROJECT, event_id, session_id, turn_id
from services.query.tests.sessions.conftest import make_tools, run, seed
from services.query.tests.sessions.corpus import (
    MIGRATION_ANSWER,
    MIGRATION_USER,
    migration,
)
from services.query.tests.sessions.memory_store import MemorySessionStore

SESSION = session_id("mig")
TURN1, TURN2 = turn_id("mig", 1), turn_id("mig", 2)
# The final answer is longer than a summary line (120 characters): cut at a word, with "...".
ANSWER_SUMMARY = (
    "Updated the migration ordering and verified the ClickHouse schema applies cleanly. "
    "Validation: cargo test --workspace..."
)
SESSION_BRIEF = {
    "id": SESSION,
    "title": "Fix ClickHouse schema migration failure",
    "source": "codex",
}


async def envelope(tools: SessionTools, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    result = await run(tools, tool, arguments, PROJECT)
    jsonschema.validate(result.envelope, OUTPUT_SCHEMAS[tool])
    assert result.is_error is False, result.envelope
    return result.envelope


def hit(rank: int, score: float, ordinal: int, kind: str, at: str, text: str) -> dict[str, Any]:
    ident = event_id("mig", 1, ordinal)
    return {
        "rank": rank,
        "score": score,
        "id": ident,
        "event": {
            "id": ident,
            "type": kind,
            "timestamp": at,
            "ordinal": ordinal,
            "terminal": kind == "assistant_response",
        },
        "turn": {"id": TURN1, "ordinal": 1, "completed": True, "event_count": 4},
        "session": {
            "id": SESSION,
            "title": "Fix ClickHouse schema migration failure",
            "source": "codex",
            "harness": "codex",
            "started_at": "2026-04-29T18:41:56.000Z",
            "updated_at": "2026-04-29T18:42:01.000Z",
            "completed": True,
        },
        "snippet": {"text": text[:80], "truncated": True},
        "open": {"event_id": ident, "turn_id": TURN1, "session_id": SESSION},
    }


async def test_search_hit_envelope(memory: MemorySessionStore, clock: ManualClock) -> None:
    seed(memory, migration())
    # The store call takes 42 ms on the injected clock: elapsed_ms measures it.
    memory.after_search = lambda: clock.advance(0.042)
    tools = make_tools(memory, clock)
    got = await envelope(
        tools, "search_sessions", {"query": "  ClickHouse schema migration failure "}
    )
    assert got == {
        "schema_version": "moraine.mcp.search_sessions.v1",
        "tool": "search_sessions",
        "request": {
            "query": "ClickHouse schema migration failure",
            "within_id": None,
            "event_types": ["user_input", "assistant_response"],
            "harness": None,
            "source": None,
            "n_hits": 10,
        },
        "data": {
            "result_count": 2,
            "limit": 10,
            "truncated": False,
            "results": [
                # Equal scores: the later event ranks first (spec: Ranking Behavior).
                hit(1, 0.75, 4, "assistant_response", "2026-04-29T18:41:59.000Z", MIGRATION_ANSWER),
                hit(2, 0.75, 1, "user_input", "2026-04-29T18:41:56.000Z", MIGRATION_USER),
            ],
        },
        "warnings": [],
        "performance": {"elapsed_ms": 42},
    }


async def test_session_open_envelope(store: SessionStore, tools: SessionTools) -> None:
    seed(store, migration())
    got = await envelope(tools, "open", {"id": SESSION})
    assert got == {
        "schema_version": "moraine.mcp.open.v1",
        "tool": "open",
        "request": {"id": SESSION},
        "data": {
            "kind": "session",
            "session": {
                **SESSION_BRIEF,
                "started_at": "2026-04-29T18:41:56.000Z",
                "updated_at": "2026-04-29T18:42:01.000Z",
                "completed": True,
                "turn_count": 2,
                "event_count": 6,
            },
            "turns": [],
            "next_cursor": None,
            "traversal": {
                "previous_session_id": None,
                "next_session_id": None,
                "first_turn_id": TURN1,
                "last_turn_id": TURN2,
            },
        },
        "warnings": [],
        "performance": {"elapsed_ms": 0},
    }


async def test_session_open_with_limit_envelope(store: SessionStore, tools: SessionTools) -> None:
    seed(store, migration())
    got = await envelope(tools, "open", {"id": SESSION, "limit": 2})
    assert got["request"] == {"id": SESSION, "limit": 2}
    assert got["data"]["next_cursor"] is None
    assert got["data"]["turns"] == [
        {
            "id": TURN1,
            "ordinal": 1,
            "completed": True,
            "terminal_event_id": event_id("mig", 1, 4),
            "event_count": 4,
            "started_at": "2026-04-29T18:41:56.000Z",
            "updated_at": "2026-04-29T18:41:59.000Z",
            "user_input": {
                "event_id": event_id("mig", 1, 1),
                "text": MIGRATION_USER,
                "truncated": False,
            },
            "final_response": {
                "event_id": event_id("mig", 1, 4),
                "text": ANSWER_SUMMARY,
                "truncated": True,
            },
            "tools_called": ["exec_command"],
            "event_types": ["user_input", "tool_call", "tool_response", "assistant_response"],
            "open": {"turn_id": TURN1, "terminal_event_id": event_id("mig", 1, 4)},
        },
        {
            "id": TURN2,
            "ordinal": 2,
            "completed": True,
            "terminal_event_id": event_id("mig", 2, 2),
            "event_count": 2,
            "started_at": "2026-04-29T18:42:00.000Z",
            "updated_at": "2026-04-29T18:42:01.000Z",
            "user_input": {
                "event_id": event_id("mig", 2, 1),
                "text": "Can you summarize the validation?",
                "truncated": False,
            },
            "final_response": {
                "event_id": event_id("mig", 2, 2),
                "text": "Validation passed with make docs-build and cargo test for the affected "
                "crate.",
                "truncated": False,
            },
            "tools_called": [],
            "event_types": ["user_input", "assistant_response"],
            "open": {"turn_id": TURN2, "terminal_event_id": event_id("mig", 2, 2)},
        },
    ]


async def test_error_envelope_shape(tools: SessionTools) -> None:
    result = await run(tools, "open", {"id": "not-a-valid-id"}, PROJECT)
    jsonschema.validate(result.envelope, OUTPUT_SCHEMAS["open"])
    assert result.is_error is True
    assert result.envelope == {
        "schema_version": "moraine.mcp.error.v1",
        "tool": "open",
        "request": {"id": "not-a-valid-id"},
        "error": {
            "code": "invalid_id",
            "message": "id is not a valid Moraine MCP ID",
            "details": {"field": "id"},
        },
        "warnings": [],
        "performance": {"elapsed_ms": 0},
    }
    blank = await run(tools, "search_sessions", {"query": "   "}, PROJECT)
    assert blank.envelope["request"] == {"query": "   "}
    assert blank.envelope["error"] == {
        "code": "invalid_request",
        "message": "query must be a non-empty string",
        "details": {"field": "query"},
    }
