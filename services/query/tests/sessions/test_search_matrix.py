"""search_sessions: every row of the spec's Input Permutation Matrix, one test each."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from mcpd.sessions.store import SessionStore
from services.query.sessions import SessionTools
from services.query.tests.sessions.builders import event_id, session_id, turn_id
from services.query.tests.sessions.conftest import call, error_of
from services.query.tests.sessions.corpus import seed_world

Check = Callable[[dict[str, Any]], None]
DEFAULT_TYPES = ["user_input", "assistant_response"]
WORLD_SESSIONS = {session_id(k) for k in ("mig", "mon", "pi1", "omp1", "cl1")}


def results(envelope: dict[str, Any]) -> list[dict[str, Any]]:
    assert "data" in envelope, envelope
    found: list[dict[str, Any]] = envelope["data"]["results"]
    assert envelope["data"]["result_count"] == len(found)
    return found


def ok_query_only(e: dict[str, Any]) -> None:
    assert e["request"]["event_types"] == DEFAULT_TYPES
    assert e["request"]["n_hits"] == 10
    hits = results(e)
    assert {h["event"]["type"] for h in hits} <= set(DEFAULT_TYPES)
    sessions = {h["session"]["id"] for h in hits}
    assert len(sessions) > 1
    assert sessions <= WORLD_SESSIONS


def ok_n_hits(e: dict[str, Any]) -> None:
    assert e["request"]["n_hits"] == 3
    assert e["data"]["limit"] == 3
    assert len(results(e)) == 3
    assert e["data"]["truncated"] is True
    assert e["request"]["event_types"] == DEFAULT_TYPES


def ok_event_types(e: dict[str, Any]) -> None:
    # De-duplicated and in the vocabulary's order, whatever the caller's order.
    assert e["request"]["event_types"] == ["reasoning", "tool_response"]
    hits = results(e)
    assert hits
    assert {h["event"]["type"] for h in hits} <= {"reasoning", "tool_response"}
    # The server's own search_sessions response (ordinal 4) is not a hit; Bash's (6) is.
    assert {h["id"] for h in hits} == {event_id("cl1", 1, 2), event_id("cl1", 1, 6)}


def ok_within(scope: str, types: set[str]) -> Check:
    def check(e: dict[str, Any]) -> None:
        hits = results(e)
        assert hits
        for h in hits:
            assert h["event"]["type"] in types
            assert scope in (h["session"]["id"], h["turn"]["id"])

    return check


def ok_filter(harness: str | None, source: str | None, sessions: set[str]) -> Check:
    def check(e: dict[str, Any]) -> None:
        hits = results(e)
        assert {h["session"]["id"] for h in hits} == sessions
        for h in hits:
            assert harness is None or h["session"]["harness"] == harness
            assert source is None or h["session"]["source"] == source
        assert e["request"]["harness"] == harness
        assert e["request"]["source"] == source

    return check


def fails(code: str, field: str | None, message: str | None = None) -> Check:
    def check(e: dict[str, Any]) -> None:
        assert error_of(e) == (code, field)
        if message is not None:
            assert e["error"]["message"] == message

    return check


MIG, CL1, PI1, OMP1 = (session_id(k) for k in ("mig", "cl1", "pi1", "omp1"))
Q = "schema migration"
ROWS = [
    pytest.param({"query": Q}, ok_query_only, id="query only"),
    pytest.param({"query": Q, "n_hits": 3}, ok_n_hits, id="query + n_hits"),
    pytest.param(
        {"query": Q, "event_types": ["tool_response", "reasoning", "tool_response"]},
        ok_event_types,
        id="query + event_types",
    ),
    pytest.param(
        {"query": Q, "within_id": MIG},
        ok_within(MIG, set(DEFAULT_TYPES)),
        id="query + within_id=session",
    ),
    pytest.param(
        {"query": "migration", "within_id": turn_id("mig", 1)},
        ok_within(turn_id("mig", 1), set(DEFAULT_TYPES)),
        id="query + within_id=turn",
    ),
    pytest.param(
        {"query": Q, "within_id": CL1, "event_types": ["reasoning", "tool_response"]},
        ok_within(CL1, {"reasoning", "tool_response"}),
        id="query + within_id=session + event_types",
    ),
    pytest.param(
        {"query": "cargo test", "within_id": turn_id("mig", 1), "event_types": ["tool_response"]},
        ok_within(turn_id("mig", 1), {"tool_response"}),
        id="query + within_id=turn + event_types",
    ),
    pytest.param(
        {"query": Q, "harness": "pi-coding-agent"},
        ok_filter("pi-coding-agent", None, {PI1, OMP1}),
        id="query + harness",
    ),
    pytest.param(
        {"query": Q, "source": "omp"}, ok_filter(None, "omp", {OMP1}), id="query + source"
    ),
    pytest.param(
        {"query": Q, "harness": "pi-coding-agent", "source": "pi"},
        ok_filter("pi-coding-agent", "pi", {PI1}),
        id="query + harness + source",
    ),
    pytest.param(
        {"query": Q, "harness": "  "}, fails("invalid_request", "harness"), id="blank harness"
    ),
    pytest.param({"query": Q, "source": ""}, fails("invalid_request", "source"), id="blank source"),
    pytest.param(
        {"query": Q, "within_id": event_id("mig", 1, 1)},
        fails(
            "invalid_request", "within_id", "within_id accepts session and turn IDs, not event IDs"
        ),
        id="query + within_id=event",
    ),
    pytest.param(
        {"query": " \t\n"},
        fails("invalid_request", "query", "query must be a non-empty string"),
        id="blank query",
    ),
    pytest.param(
        {"query": Q, "within_id": "session:ses_doesnotexist"},
        fails("not_found", "within_id"),
        id="unknown within_id",
    ),
    pytest.param(
        {"query": Q, "within_id": "ses_01J9 nope"},
        fails("invalid_id", "within_id"),
        id="malformed within_id",
    ),
    pytest.param(
        {"query": Q, "event_types": []},
        fails("invalid_request", "event_types"),
        id="empty event_types",
    ),
    pytest.param(
        {"query": Q, "event_types": ["user_input", "debug_trace"]},
        fails("unsupported_event_type", "event_types", "unsupported event type: debug_trace"),
        id="unsupported event_types value",
    ),
    pytest.param({"query": Q, "n_hits": 0}, fails("invalid_request", "n_hits"), id="n_hits < 1"),
    pytest.param({"query": Q, "n_hits": 51}, fails("invalid_request", "n_hits"), id="n_hits > 50"),
    pytest.param(
        {"query": Q, "n_hits": 2.5}, fails("invalid_request", "n_hits"), id="non-integer n_hits"
    ),
]


@pytest.mark.parametrize(("arguments", "check"), ROWS)
async def test_search_permutation(
    store: SessionStore, tools: SessionTools, arguments: dict[str, Any], check: Check
) -> None:
    seed_world(store)
    check(await call(tools, "search_sessions", arguments))
