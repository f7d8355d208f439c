"""search_sessions beyond the matrix: ranking and ties, exact n_hits, own tool calls, scope
isolation, the read-model refresh error, backend failures and strict argument types."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from typing import Any

import pytest
import sqlalchemy.exc

from mcpd.runtime import errors as mcpd_errors
from mcpd.runtime.clock import ManualClock
from mcpd.sessions.store import SearchQuery, SearchResult, SessionStore
from services.query.sessions import SessionTools
from services.query.tests.sessions.builders import (
    OTHER_PROJECT,
    PROJECT,
    T0,
    build,
    event_id,
    output,
    session_id,
    user,
)
from services.query.tests.sessions.builders import (
    call as tool_call,
)
from services.query.tests.sessions.conftest import call, error_of, make_tools, seed
from services.query.tests.sessions.corpus import migration, other_project, seed_world
from services.query.tests.sessions.memory_store import MemorySessionStore


def ids(envelope: dict[str, Any]) -> list[str]:
    return [hit["id"] for hit in envelope["data"]["results"]]


async def test_ties_rank_by_time_then_id(memory: MemorySessionStore, clock: ManualClock) -> None:
    # Same text (same score); two share a timestamp, so event id breaks that tie.
    seed(
        memory,
        build(
            "tie", [[user("alpha beta", at=5), user("alpha beta", at=5), user("alpha beta", at=9)]]
        ),
    )
    got = await call(make_tools(memory, clock), "search_sessions", {"query": "alpha beta"})
    assert ids(got) == [event_id("tie", 1, 3), event_id("tie", 1, 1), event_id("tie", 1, 2)]
    assert [hit["rank"] for hit in got["data"]["results"]] == [1, 2, 3]
    assert all(0.0 <= hit["score"] <= 1.0 for hit in got["data"]["results"])


async def test_store_order_is_normalized(
    memory: MemorySessionStore, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    seed(memory, build("ord", [[user("alpha"), user("alpha beta"), user("alpha")]]))
    real = memory.search

    def shuffled(query: SearchQuery) -> SearchResult:
        result = real(query)
        # A backend returning hits out of order, with a score rounding past 1.0.
        hits = [replace(h, score=h.score * 1.0000001) for h in reversed(result.hits)]
        return SearchResult(hits, result.truncated)

    monkeypatch.setattr(memory, "search", shuffled)
    got = await call(make_tools(memory, clock), "search_sessions", {"query": "alpha beta"})
    assert ids(got) == [event_id("ord", 1, 2), event_id("ord", 1, 3), event_id("ord", 1, 1)]
    assert got["data"]["results"][0]["score"] == 1.0


@pytest.mark.parametrize(
    ("matches", "n_hits", "truncated"),
    [(60, 50, True), (60, 7, True), (7, 7, False), (3, 7, False)],
)
async def test_n_hits_is_exact(
    store: SessionStore, tools: SessionTools, matches: int, n_hits: int, truncated: bool
) -> None:
    seed(store, build("many", [[user(f"needle number {i}") for i in range(matches)]]))
    got = await call(tools, "search_sessions", {"query": "needle", "n_hits": n_hits})
    assert got["data"]["result_count"] == min(matches, n_hits)
    assert got["data"]["limit"] == n_hits
    assert got["data"]["truncated"] is truncated


async def test_own_tool_calls_never_hit_and_n_hits_stays_exact(
    memory: MemorySessionStore, clock: ManualClock
) -> None:
    # Twelve newer own calls and responses outrank nothing but come first on time; five
    # foreign tool events must still fill n_hits=5.
    own = [tool_call("mcp__mcpd__search_sessions", "needle query") for _ in range(6)]
    own += [output("search_sessions", "needle results", payload={"self_tool": True})] * 6
    foreign = [tool_call("Bash", "grep needle") for _ in range(5)]
    seed(memory, build("own", [[user("start"), *foreign, *own]]))
    got = await call(
        make_tools(memory, clock),
        "search_sessions",
        {"query": "needle", "event_types": ["tool_call", "tool_response"], "n_hits": 5},
    )
    assert ids(got) == [event_id("own", 1, n) for n in (6, 5, 4, 3, 2)]
    assert got["data"]["truncated"] is False
    assert memory.search_limits == [5, 20]  # asked again for more after dropping own calls


async def test_scopes_never_leak(store: SessionStore, tools: SessionTools) -> None:
    seed_world(store)
    mine = await call(tools, "search_sessions", {"query": "ClickHouse migration", "n_hits": 50})
    assert mine["data"]["results"]
    assert all(h["session"]["id"] != other_project().session.id for h in mine["data"]["results"])
    theirs = await call(
        tools, "search_sessions", {"query": "ClickHouse migration"}, project=OTHER_PROJECT
    )
    assert {h["session"]["id"] for h in theirs["data"]["results"]} == {session_id("migx")}
    # Another project's session id is not found here, not searched.
    cross = await call(tools, "search_sessions", {"query": "x", "within_id": session_id("migx")})
    assert error_of(cross) == ("not_found", "within_id")
    within = await call(
        tools, "search_sessions", {"query": "migration", "within_id": session_id("mig")}
    )
    assert {h["session"]["id"] for h in within["data"]["results"]} == {session_id("mig")}


async def test_empty_scope_is_success(store: SessionStore, tools: SessionTools) -> None:
    seed_world(store)
    got = await call(
        tools,
        "search_sessions",
        {"query": "nonexistent exact phrase", "within_id": session_id("mig")},
    )
    assert got["data"] == {"result_count": 0, "limit": 10, "truncated": False, "results": []}


async def test_rows_vanishing_mid_search_is_a_retryable_refresh(
    memory: MemorySessionStore, clock: ManualClock
) -> None:
    seed(memory, migration())
    memory.after_search = lambda: memory.delete_session(PROJECT, session_id("mig"))
    got = await call(make_tools(memory, clock), "search_sessions", {"query": "migration"})
    assert got["error"]["code"] == "internal_error"
    details = got["error"]["details"]
    assert details["reason"] == "read_model_refresh"
    assert details["retryable"] is True
    assert details["retry_after_ms"] > 0


@pytest.mark.parametrize(
    ("failure", "code"),
    [
        (
            sqlalchemy.exc.OperationalError("SELECT", {}, Exception("disk I/O error")),
            "backend_failure",
        ),
        (mcpd_errors.Unavailable("index offline"), "backend_failure"),
        (OSError("index file missing"), "backend_failure"),
        (mcpd_errors.ResourceExhausted("row limit"), "resource_exhausted"),
        (RuntimeError("bug"), "internal_error"),
    ],
)
async def test_store_failures_map_to_codes(
    memory: MemorySessionStore, clock: ManualClock, failure: Exception, code: str
) -> None:
    memory.fail_with = failure
    got = await call(make_tools(memory, clock), "search_sessions", {"query": "x"})
    assert got["error"]["code"] == code
    # The caller never sees internals (SQL, paths, exception text).
    assert "SELECT" not in got["error"]["message"]
    assert "missing" not in got["error"]["message"]


@pytest.mark.parametrize(
    ("arguments", "field"),
    [
        ({"query": "x", "nhits": 3}, "nhits"),
        ({"query": "x", "n_hits": True}, "n_hits"),
        ({"query": "x", "n_hits": "10"}, "n_hits"),
        ({"query": 42}, "query"),
        ({}, "query"),
        ({"query": "x" * 4097}, "query"),
        ({"query": "x", "event_types": "user_input"}, "event_types"),
        ({"query": "x", "event_types": [1]}, "event_types"),
        ({"query": "x", "within_id": 7}, "within_id"),
        ({"query": "x", "harness": 3}, "harness"),
    ],
)
async def test_strict_types(tools: SessionTools, arguments: dict[str, Any], field: str) -> None:
    got = await call(tools, "search_sessions", arguments)
    assert error_of(got) == ("invalid_request", field)
    assert got["request"] == arguments  # the error echoes what was sent


async def test_unknown_is_not_searchable(tools: SessionTools) -> None:
    got = await call(tools, "search_sessions", {"query": "x", "event_types": ["unknown"]})
    assert got["error"]["code"] == "unsupported_event_type"
    assert "unknown" not in got["error"]["details"]["supported"]


async def test_nulls_and_struct_numbers(store: SessionStore, tools: SessionTools) -> None:
    seed_world(store)
    arguments = {
        "query": "migration",
        "within_id": None,
        "event_types": None,
        "harness": None,
        "source": None,
        "n_hits": 4.0,  # what a google.protobuf.Struct carries for 4
    }
    got = await call(tools, "search_sessions", arguments)
    assert got["request"]["n_hits"] == 4
    assert isinstance(got["request"]["n_hits"], int)
    long_query = await call(tools, "search_sessions", {"query": "x" * 4096})
    assert "data" in long_query


async def test_non_object_arguments(tools: SessionTools) -> None:
    got = await call(tools, "search_sessions", ["query"])
    assert error_of(got) == ("invalid_request", "arguments")
    assert got["request"] == {}


async def test_unknown_harness_warns(store: SessionStore, tools: SessionTools) -> None:
    seed_world(store)
    got = await call(tools, "search_sessions", {"query": "x", "harness": "Codex"})
    assert got["data"]["results"] == []
    assert [w["code"] for w in got["warnings"]] == ["unknown_harness"]


async def test_long_snippets_are_capped(memory: MemorySessionStore, clock: ManualClock) -> None:
    seed(memory, build("big", [[user("needle " + "word " * 5000)]], start=T0 - timedelta(days=1)))
    real = memory.search

    def verbose(query: SearchQuery) -> SearchResult:
        result = real(query)
        return SearchResult(
            [replace(h, snippet=h.event.text, snippet_truncated=False) for h in result.hits],
            result.truncated,
        )

    memory.search = verbose  # type: ignore[method-assign]
    got = await call(make_tools(memory, clock), "search_sessions", {"query": "needle"})
    snippet = got["data"]["results"][0]["snippet"]
    assert len(snippet["text"]) <= 300
    assert snippet["truncated"] is True
