"""open: every row of the Input Permutation Matrix, then incomplete turns, encrypted
reasoning, neighbours across sessions, and argument rules."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import Any

import pytest

from mcpd.sessions.model import EventType
from mcpd.sessions.store import SessionStore
from services.query.sessions import SessionTools
from services.query.tests.sessions.builders import T0, E, build, event_id, session_id, turn_id, user
from services.query.tests.sessions.conftest import call, error_of, seed
from services.query.tests.sessions.corpus import incomplete, migration, seed_world

MIG = session_id("mig")
T1, T2 = turn_id("mig", 1), turn_id("mig", 2)
Row = Callable[[SessionTools, SessionStore], Awaitable[None]]


async def id_session(tools: SessionTools, store: SessionStore) -> None:
    got = await call(tools, "open", {"id": MIG})
    data = got["data"]
    assert data["kind"] == "session"
    assert data["turns"] == []
    assert data["next_cursor"] is None
    assert data["session"]["turn_count"] == 2
    assert data["session"]["event_count"] == 6
    assert data["traversal"]["first_turn_id"] == T1
    assert data["traversal"]["last_turn_id"] == T2
    # mon is the next codex session by start time; cl1/pi1/omp1 are other sources.
    assert data["traversal"]["previous_session_id"] is None
    assert data["traversal"]["next_session_id"] == session_id("mon")


async def id_session_limit(tools: SessionTools, store: SessionStore) -> None:
    got = await call(tools, "open", {"id": MIG, "limit": 1})
    data = got["data"]
    assert [t["id"] for t in data["turns"]] == [T1]
    assert isinstance(data["next_cursor"], str)


async def id_turn(tools: SessionTools, store: SessionStore) -> None:
    data = (await call(tools, "open", {"id": T2}))["data"]
    assert data["kind"] == "turn"
    assert data["events"] == []
    assert data["next_cursor"] is None
    assert data["turn"]["session_id"] == MIG
    assert data["turn"]["ordinal"] == 2
    assert data["traversal"] == {
        "session_id": MIG,
        "previous_turn_id": T1,
        "next_turn_id": None,
        "first_event_id": event_id("mig", 2, 1),
        "last_event_id": event_id("mig", 2, 2),
    }
    assert data["summary"]["user_input"]["event_id"] == event_id("mig", 2, 1)


async def id_turn_limit(tools: SessionTools, store: SessionStore) -> None:
    data = (await call(tools, "open", {"id": T1, "limit": 3}))["data"]
    assert [e["ordinal"] for e in data["events"]] == [1, 2, 3]
    assert isinstance(data["next_cursor"], str)


async def cursor_only(tools: SessionTools, store: SessionStore) -> None:
    first = (await call(tools, "open", {"id": T1, "limit": 3}))["data"]
    got = await call(tools, "open", {"cursor": first["next_cursor"]})
    assert got["request"] == {"cursor": first["next_cursor"]}
    assert [e["ordinal"] for e in got["data"]["events"]] == [4]  # the embedded limit (3) holds
    assert got["data"]["next_cursor"] is None
    assert got["data"]["turn"]["id"] == T1


async def id_event(tools: SessionTools, store: SessionStore) -> None:
    data = (await call(tools, "open", {"id": event_id("mig", 1, 3)}))["data"]
    assert data["kind"] == "event"
    assert data["content"]["text"].endswith("migrations_apply_in_order\n")  # full, not a summary
    assert data["content"]["truncated"] is False
    assert data["content"]["exit_code"] == 101
    assert data["traversal"]["turn_id"] == T1
    assert data["traversal"]["session_id"] == MIG


def rejected(arguments: dict[str, Any], code: str, field: str | None) -> Row:
    async def row(tools: SessionTools, store: SessionStore) -> None:
        assert error_of(await call(tools, "open", arguments)) == (code, field)

    return row


async def id_or_limit_with_cursor(tools: SessionTools, store: SessionStore) -> None:
    cursor = (await call(tools, "open", {"id": T1, "limit": 1}))["data"]["next_cursor"]
    with_id = await call(tools, "open", {"id": T1, "cursor": cursor})
    assert error_of(with_id) == ("invalid_request", "cursor")
    with_limit = await call(tools, "open", {"limit": 2, "cursor": cursor})
    assert error_of(with_limit) == ("invalid_request", "limit")


async def stale_or_wrong_kind_cursor(tools: SessionTools, store: SessionStore) -> None:
    page = await call(tools, "open", {"id": MIG, "limit": 1})
    # Another session changing leaves the walk alone; the walked session changing makes it stale.
    seed(store, build("late", [[user("written after the cursor was issued")]]))
    assert "data" in await call(tools, "open", {"cursor": page["data"]["next_cursor"]})
    seed(store, migration(start=T0 + timedelta(minutes=1)))
    stale = await call(tools, "open", {"cursor": page["data"]["next_cursor"]})
    assert error_of(stale) == ("invalid_request", "cursor")
    assert stale["error"]["details"]["reopen"] == MIG
    assert stale["error"]["details"]["reason"] == "stale_cursor"
    assert f"reopen {MIG}" in stale["error"]["message"]
    listing = await call(
        tools,
        "list_sessions",
        {
            "start_datetime": "2026-04-29T00:00:00Z",
            "end_datetime": "2026-05-01T00:00:00Z",
            "limit": 1,
        },
    )
    wrong = await call(tools, "open", {"cursor": listing["data"]["next_cursor"]})
    assert error_of(wrong) == ("invalid_request", "cursor")
    assert "open a session or turn id with limit" in wrong["error"]["message"]


ROWS = [
    pytest.param(id_session, id="id=session"),
    pytest.param(id_session_limit, id="id=session, limit=N"),
    pytest.param(id_turn, id="id=turn"),
    pytest.param(id_turn_limit, id="id=turn, limit=N"),
    pytest.param(cursor_only, id="cursor=..."),
    pytest.param(id_event, id="id=event"),
    pytest.param(rejected({}, "invalid_request", "id"), id="missing both id and cursor"),
    pytest.param(rejected({"id": "  "}, "invalid_request", "id"), id="blank id"),
    pytest.param(rejected({"id": "ses_01J9"}, "invalid_id", "id"), id="malformed id"),
    pytest.param(
        rejected({"id": "event:evt_01J9DOESNOTEXIST000000000000"}, "not_found", "id"),
        id="well-formed unknown id",
    ),
    pytest.param(id_or_limit_with_cursor, id="id or limit combined with cursor"),
    pytest.param(
        rejected({"id": event_id("mig", 1, 1), "limit": 5}, "invalid_request", "limit"),
        id="pagination argument with id=event",
    ),
    pytest.param(stale_or_wrong_kind_cursor, id="stale or wrong-kind cursor"),
]


@pytest.mark.parametrize("row", ROWS)
async def test_open_permutation(store: SessionStore, tools: SessionTools, row: Row) -> None:
    seed_world(store)
    await row(tools, store)


async def test_not_found_names_the_id(store: SessionStore, tools: SessionTools) -> None:
    seed_world(store)
    for ident, kind in (
        ("session:ses_missing", "session"),
        ("turn:turn_missing", "turn"),
        ("event:evt_01J9DOESNOTEXIST000000000000", "event"),
        (session_id("migx"), "session"),  # another project's session is not found here
    ):
        got = await call(tools, "open", {"id": ident})
        assert got["error"] == {
            "code": "not_found",
            "message": f"{kind} not found",
            "details": {"field": "id", "id": ident},
        }


async def test_incomplete_turn_invents_no_final_response(
    store: SessionStore, tools: SessionTools
) -> None:
    seed(store, incomplete())
    data = (await call(tools, "open", {"id": turn_id("mon", 1), "limit": 2}))["data"]
    assert data["turn"]["completed"] is False
    assert data["turn"]["terminal_event_id"] is None
    assert data["summary"]["final_response"] is None
    assert data["summary"]["tools_called"] == ["exec_command"]
    assert data["summary"]["event_types"] == ["user_input", "tool_call"]
    assert data["traversal"]["next_turn_id"] is None
    session = (await call(tools, "open", {"id": session_id("mon"), "limit": 5}))["data"]
    assert session["session"]["completed"] is False
    assert session["turns"][0]["final_response"] is None
    assert session["turns"][0]["open"] == {"turn_id": turn_id("mon", 1), "terminal_event_id": None}


async def test_encrypted_reasoning_and_unknown_events(
    store: SessionStore, tools: SessionTools
) -> None:
    secret = {"encrypted_content": "gAAAAB-opaque"}
    seed(
        store,
        build(
            "enc",
            [[user("hi"), E(EventType.REASONING, "", payload=secret), E(EventType.UNKNOWN, "?")]],
        ),
    )
    data = (await call(tools, "open", {"id": turn_id("enc", 1), "limit": 5}))["data"]
    reasoning = data["events"][1]
    assert reasoning["summary"] == "[encrypted reasoning omitted]"
    assert data["events"][2]["type"] == "unknown"  # valid on event summaries...
    assert "unknown" not in data["summary"]["event_types"]  # ...left out of the compact list
    opened = (await call(tools, "open", {"id": event_id("enc", 1, 2)}))["data"]
    assert opened["content"]["encrypted_content"] == "gAAAAB-opaque"


@pytest.mark.parametrize(
    ("arguments", "code", "field"),
    [
        ({"id": 5}, "invalid_request", "id"),
        ({"id": MIG, "limit": 0}, "invalid_request", "limit"),
        ({"id": MIG, "limit": 51}, "invalid_request", "limit"),
        ({"id": MIG, "limit": True}, "invalid_request", "limit"),
        ({"id": MIG, "limit": 1.5}, "invalid_request", "limit"),
        ({"limit": 3}, "invalid_request", "id"),
        ({"id": MIG, "depth": 1}, "invalid_request", "depth"),
        ({"cursor": ""}, "invalid_request", "cursor"),
        ({"cursor": 12}, "invalid_request", "cursor"),
        ({"id": "thread:abc"}, "invalid_id", "id"),
        ({"id": "session:"}, "invalid_id", "id"),
        ({"id": " session:ses_mig"}, "invalid_id", "id"),
    ],
)
async def test_open_arguments(
    store: SessionStore, tools: SessionTools, arguments: dict[str, Any], code: str, field: str
) -> None:
    seed_world(store)
    assert error_of(await call(tools, "open", arguments)) == (code, field)


async def test_limit_bound_is_configured(store: SessionStore, clock: Any) -> None:
    from services.query.tests.sessions.conftest import make_tools

    seed_world(store)
    tools = make_tools(store, clock, max_results=5)
    assert "data" in await call(tools, "open", {"id": MIG, "limit": 5.0})
    assert error_of(await call(tools, "open", {"id": MIG, "limit": 6})) == (
        "invalid_request",
        "limit",
    )


async def test_ids_from_every_tool_open(store: SessionStore, tools: SessionTools) -> None:
    seed_world(store)
    search = await call(tools, "search_sessions", {"query": "migration", "n_hits": 50})
    listing = await call(
        tools,
        "list_sessions",
        {"start_datetime": "2026-04-29T00:00:00Z", "end_datetime": "2026-05-01T00:00:00Z"},
    )
    handles = {h for hit in search["data"]["results"] for h in hit["open"].values()}
    handles |= {row["open"]["session_id"] for row in listing["data"]["sessions"]}
    assert len(handles) > 10
    for handle in handles:
        assert "data" in await call(tools, "open", {"id": handle}), handle


async def test_empty_turn_list_session(store: SessionStore, tools: SessionTools) -> None:
    seed(store, build("one", [[user("only")]]))
    data = (await call(tools, "open", {"id": session_id("one"), "limit": 50}))["data"]
    assert len(data["turns"]) == 1
    assert data["next_cursor"] is None
    assert data["traversal"]["first_turn_id"] == data["traversal"]["last_turn_id"]
