"""The Traversal Contract: from search hits, every event of a session is reached exactly once
and in order by open + next_cursor alone; adjacency references walk the same order."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from mcpd.sessions.model import AssembledSession
from mcpd.sessions.store import SessionStore
from services.query.sessions import SessionTools
from services.query.tests.sessions.builders import (
    T0,
    answer,
    build,
    output,
    user,
)
from services.query.tests.sessions.builders import (
    call as tool_call,
)
from services.query.tests.sessions.conftest import call, seed


def long_session(key: str = "long", start: Any = T0) -> AssembledSession:
    """Seven turns of two to seven events, even turns left incomplete; the tool events of a
    turn share one timestamp (order must come from ordinals, not times)."""
    turns = []
    for t in range(1, 8):
        events = [user(f"turn {t} question about the traversal needle", at=100.0 * t)]
        for n in range(1, t % 4 + 1):
            events.append(tool_call("exec_command", f"step {n} of turn {t}", at=100.0 * t + 1))
            events.append(output("exec_command", f"ok {n}", at=100.0 * t + 1))
        if t % 2:
            events.append(answer(f"turn {t} done", at=100.0 * t + 2))
        turns.append(events)
    return build(key, turns, start=start)


async def expand(tools: SessionTools, ident: str, limit: int, child: str) -> list[dict[str, Any]]:
    """Every child of a session or turn, by open(id, limit) then cursor-only opens."""
    page = (await call(tools, "open", {"id": ident, "limit": limit}))["data"]
    children = list(page[child])
    seen_cursors = set()
    while page["next_cursor"] is not None:
        assert page["next_cursor"] not in seen_cursors
        seen_cursors.add(page["next_cursor"])
        assert len(page[child]) == limit  # a full page before every continuation
        page = (await call(tools, "open", {"cursor": page["next_cursor"]}))["data"]
        children += page[child]
    return children


@pytest.mark.parametrize("limit", [1, 2, 3, 50])
async def test_every_event_exactly_once_in_order_from_search(
    store: SessionStore, tools: SessionTools, limit: int
) -> None:
    session = long_session()
    seed(store, session, long_session("decoy", T0 + timedelta(days=1)))
    hits = await call(
        tools,
        "search_sessions",
        {"query": "traversal needle", "within_id": session.session.id, "n_hits": 1},
    )
    start = hits["data"]["results"][0]["open"]["session_id"]
    assert start == session.session.id
    turns = await expand(tools, start, limit, "turns")
    assert [t["ordinal"] for t in turns] == list(range(1, len(session.turns) + 1))
    reached: list[str] = []
    for turn in turns:
        events = await expand(tools, turn["id"], limit, "events")
        assert [e["ordinal"] for e in events] == list(range(1, turn["event_count"] + 1))
        reached += [e["id"] for e in events]
    assert reached == [e.id for e in session.events]  # all, once, in session order


async def test_adjacency_references_walk_the_session(
    store: SessionStore, tools: SessionTools
) -> None:
    session = long_session()
    seed(store, session)
    hit = (
        await call(tools, "search_sessions", {"query": "turn 3 question traversal", "n_hits": 1})
    )["data"]["results"][0]
    # Back to the session's first turn through previous_turn_id, then forward through every
    # event with next_event_id, crossing turns with next_turn_id and first_event_id.
    turn = (await call(tools, "open", {"id": hit["open"]["turn_id"]}))["data"]
    while turn["traversal"]["previous_turn_id"] is not None:
        turn = (await call(tools, "open", {"id": turn["traversal"]["previous_turn_id"]}))["data"]
    session_view = (await call(tools, "open", {"id": turn["traversal"]["session_id"]}))["data"]
    assert session_view["traversal"]["first_turn_id"] == turn["turn"]["id"]
    walked: list[str] = []
    event_id: str | None = turn["traversal"]["first_event_id"]
    while event_id is not None:
        event = (await call(tools, "open", {"id": event_id}))["data"]
        walked.append(event_id)
        assert event["traversal"]["turn_id"] == event["event"]["turn_id"]
        following = event["traversal"]["next_event_id"]
        if following is None:
            next_turn = event["traversal"]["next_turn_id"]
            if next_turn is None:
                assert session_view["traversal"]["last_turn_id"] == event["turn"]["id"]
                break
            following = (await call(tools, "open", {"id": next_turn}))["data"]["traversal"][
                "first_event_id"
            ]
        event_id = following
    assert walked == [e.id for e in session.events]
    # And backwards within a turn.
    last = (await call(tools, "open", {"id": walked[-1]}))["data"]
    back: list[str] = [walked[-1]]
    while last["traversal"]["previous_event_id"] is not None:
        back.append(last["traversal"]["previous_event_id"])
        last = (await call(tools, "open", {"id": back[-1]}))["data"]
    last_turn = [e.id for e in session.events if e.turn_id == session.turns[-1].id]
    assert back == last_turn[::-1]


async def test_session_neighbours_by_start_within_source(
    store: SessionStore, tools: SessionTools
) -> None:
    a, b, c = (long_session(k, T0 + timedelta(days=i)) for i, k in enumerate(("a", "b", "c")))
    seed(store, a, b, c, build("x", [[user("other source")]], source="claude"))
    middle = (await call(tools, "open", {"id": b.session.id}))["data"]["traversal"]
    assert middle["previous_session_id"] == a.session.id
    assert middle["next_session_id"] == c.session.id
