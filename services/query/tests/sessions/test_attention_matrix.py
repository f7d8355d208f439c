"""file_attention: the matrix rows, unification by tail across roots, row and rollup shapes,
and project scope."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from mcpd.sessions.store import SessionStore
from services.query.sessions import (
    LaunchContext,
    SessionTools,
)
from services.query.tests.sessions.attention_world import (
    AGENT,
    BASE,
    LAUNCH,
    MAIN,
    OTHER_REPO,
    SIBLING,
    TAIL,
    attention,
    event_ids,
    world,
)
from services.query.tests.sessions.builders import (
    event_id,
    session_id,
    turn_id,
)
from services.query.tests.sessions.conftest import call, error_of, seed

Check = Callable[[dict[str, Any]], None]


def rows_from(harness: str | None, source: str | None, sessions: set[str]) -> Check:
    def check(e: dict[str, Any]) -> None:
        rows = e["data"]["events"]
        assert {r["event"]["session_id"] for r in rows} == sessions
        for row in rows:
            assert harness is None or row["event"]["harness"] == harness
            assert source is None or row["event"]["source"] == source

    return check


def rejects(field: str) -> Check:
    def check(e: dict[str, Any]) -> None:
        assert error_of(e) == ("invalid_request", field)

    return check


ROWS = [
    pytest.param(
        {**BASE, "harness": "pi-coding-agent"},
        rows_from("pi-coding-agent", None, {session_id("agent"), session_id("lost")}),
        id="path + harness",
    ),
    pytest.param(
        {**BASE, "source": "claude"},
        rows_from(None, "claude", {session_id("sib")}),
        id="path + source",
    ),
    pytest.param(
        {**BASE, "harness": "pi-coding-agent", "source": "omp"},
        rows_from("pi-coding-agent", "omp", {session_id("lost")}),
        id="path + harness + source",
    ),
    pytest.param({**BASE, "harness": "\t"}, rejects("harness"), id="blank harness"),
    pytest.param({**BASE, "source": " "}, rejects("source"), id="blank source"),
]


@pytest.mark.parametrize(("arguments", "check"), ROWS)
async def test_attention_permutation(
    store: SessionStore, tools: SessionTools, arguments: dict[str, Any], check: Check
) -> None:
    seed(store, *world())
    check(await attention(tools, arguments))


async def test_unified_by_tail_across_roots(store: SessionStore, tools: SessionTools) -> None:
    seed(store, *world())
    got = await attention(tools, {"path": TAIL, "scope": "all", "granularity": "events"})
    data = got["data"]
    assert data["tail"] == TAIL
    assert data["tail_is_absolute"] is False
    assert data["stripped_root"] is None  # a relative path with no launch directory
    # Newest first; the server's own file_attention call is not a touch; unknown time last.
    assert event_ids(got) == [
        event_id("other", 1, 2),
        event_id("lost", 1, 2),
        event_id("sib", 1, 2),
        event_id("main", 1, 3),
        event_id("main", 1, 2),
        event_id("agent", 1, 2),
    ]
    assert data["summary"] == {
        "total_touches": 6,
        "distinct_sessions": 5,
        "distinct_roots": 5,
        "distinct_known_roots": 4,
        "unknown_root_touches": 1,
        "first_touch": "2026-04-29T18:41:57.000Z",
        "last_touch": "2026-04-29T22:41:57.000Z",
        "ambiguous": True,
        "scan_truncated": False,
    }
    assert data["roots"] == [
        {"root": MAIN, "touch_count": 2, "session_count": 1},
        {"root": SIBLING, "touch_count": 1, "session_count": 1},
        {"root": AGENT, "touch_count": 1, "session_count": 1},
        {"root": OTHER_REPO, "touch_count": 1, "session_count": 1},
        {"root": None, "touch_count": 1, "session_count": 1},
    ]
    assert [w["code"] for w in got["warnings"]] == ["unknown_worktree_root", "ambiguous_tail"]


async def test_event_rows_shape(store: SessionStore, tools: SessionTools) -> None:
    seed(store, *world())
    got = await attention(tools, {**BASE, "source": "codex", "limit": 3})
    rows = got["data"]["events"]
    assert rows[2] == {
        "rank": 3,
        "id": event_id("main", 1, 2),
        "event": {
            "id": event_id("main", 1, 2),
            "session_id": session_id("main"),
            "harness": "codex",
            "source": "codex",
            "timestamp": "2026-04-29T18:41:57.000Z",
            "tool_name": "Edit",
            "phase": "request",
            "turn": 1,
            "match_kind": "tail",
            "worktree_root": MAIN,
            "action_preview": '{"file_path":"crates/core/src/lib.rs"}',
        },
        "open": {
            "event_id": event_id("main", 1, 2),
            "session_id": session_id("main"),
            "turn_id": turn_id("main", 1),
        },
    }
    assert got["data"]["result_count"] == 3
    assert got["data"]["truncated"] is False
    # A touch without a trace join: null time, no turn handle, never an epoch sentinel.
    unjoined = await attention(tools, {**BASE, "source": "pi"})
    row = unjoined["data"]["events"][0]
    assert row["event"]["timestamp"] is None
    assert row["event"]["turn"] is None
    assert row["open"] == {"event_id": event_id("agent", 1, 2), "session_id": session_id("agent")}
    for handle in (*row["open"].values(), *rows[2]["open"].values()):
        assert "data" in await call(tools, "open", {"id": handle})


async def test_session_rollups(store: SessionStore, tools: SessionTools) -> None:
    seed(store, *world())
    got = await attention(tools, {"path": TAIL, "scope": "all", "limit": 2})
    data = got["data"]
    assert got["request"]["granularity"] == "sessions"
    assert data["granularity"] == "sessions"
    assert data["result_count"] == 2
    assert data["truncated"] is True
    assert [r["id"] for r in data["sessions"]] == [session_id("other"), session_id("lost")]
    main = await attention(tools, {"path": TAIL, "scope": "all", "source": "codex"})
    rollup = main["data"]["sessions"][1]
    assert rollup == {
        "rank": 2,
        "id": session_id("main"),
        "session": {
            "id": session_id("main"),
            "title": None,
            "harness": "codex",
            "source": "codex",
            "started_at": "2026-04-29T18:41:56.000Z",
            "updated_at": "2026-04-29T18:41:59.000Z",
        },
        "touch_count": 2,
        "mutation_count": 1,
        "first_touch": "2026-04-29T18:41:57.000Z",
        "last_touch": "2026-04-29T18:41:58.000Z",
        "tools": ["Edit", "Read"],
        "roots": [MAIN],
        "unknown_root_touches": 0,
        "open": {
            "event_id": event_id("main", 1, 3),
            "session_id": session_id("main"),
            "turn_id": turn_id("main", 1),
        },
    }


async def test_project_scope_uses_the_launch_identity(
    store: SessionStore, tools: SessionTools
) -> None:
    seed(store, *world())
    got = await attention(tools, {"path": TAIL, "granularity": "events"}, launch=LAUNCH)
    assert got["request"]["scope"] == "project"
    # Main checkout, sibling and agent worktrees share the Git common directory; the other
    # repository and the unknown root do not.
    assert {r["event"]["session_id"] for r in got["data"]["events"]} == {
        session_id("main"),
        session_id("sib"),
        session_id("agent"),
    }
    assert got["data"]["summary"]["unknown_root_touches"] == 0
    assert got["data"]["stripped_root"] == MAIN
    # Without a launch project, project scope fails closed.
    closed = await attention(tools, {"path": TAIL})
    assert error_of(closed) == ("invalid_request", "scope")
    # A non-Git launch directory is the identity: only touches recorded exactly there.
    plain = LaunchContext(cwd=OTHER_REPO)
    narrow = await attention(tools, {"path": TAIL, "granularity": "events"}, launch=plain)
    assert event_ids(narrow) == []
