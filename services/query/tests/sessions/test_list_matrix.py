"""list_sessions: every row of the Input Permutation Matrix, then boundaries, keyset ties,
rank continuity and compactness."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, cast

import pytest

from mcpd.sessions.store import SessionStore
from services.query.sessions import SessionTools
from services.query.tests.sessions.builders import build, session_id, user
from services.query.tests.sessions.conftest import call, error_of, seed
from services.query.tests.sessions.corpus import seed_world

Check = Callable[[dict[str, Any]], None]
Row = Callable[[SessionTools], Awaitable[None]]
START, END = "2026-04-29T17:00:00Z", "2026-04-30T18:00:00Z"
RANGE = {"start_datetime": START, "end_datetime": END}
NEWEST_FIRST = [session_id(k) for k in ("cl1", "omp1", "pi1", "mon", "mig")]


def listed(envelope: dict[str, Any]) -> list[str]:
    assert "data" in envelope, envelope
    sessions = envelope["data"]["sessions"]
    assert envelope["data"]["result_count"] == len(sessions)
    for row in sessions:
        assert row["id"] == row["session"]["id"] == row["open"]["session_id"]
    return [row["id"] for row in sessions]


def ok_defaults(e: dict[str, Any]) -> None:
    assert e["request"] == {
        "start_datetime": "2026-04-29T17:00:00.000Z",
        "end_datetime": "2026-04-30T18:00:00.000Z",
        "limit": 20,
        "cursor": None,
        "mode": None,
        "harness": None,
        "source": None,
        "sort": "desc",
    }
    assert listed(e) == NEWEST_FIRST  # the other project's session is not listed
    assert e["data"]["truncated"] is False
    assert e["data"]["next_cursor"] is None


def ok_limit(e: dict[str, Any]) -> None:
    assert listed(e) == NEWEST_FIRST[:2]
    assert e["data"]["limit"] == 2
    assert e["data"]["truncated"] is True
    assert isinstance(e["data"]["next_cursor"], str)


def ok_ids(expected: list[str]) -> Check:
    def check(e: dict[str, Any]) -> None:
        assert listed(e) == expected

    return check


def ok_filtered(harness: str | None, source: str | None, expected: list[str]) -> Check:
    def check(e: dict[str, Any]) -> None:
        assert listed(e) == expected
        for row in e["data"]["sessions"]:
            assert harness is None or row["session"]["harness"] == harness
            assert source is None or row["session"]["source"] == source

    return check


def fails(field: str) -> Check:
    def check(e: dict[str, Any]) -> None:
        assert error_of(e) == ("invalid_request", field)

    return check


SINGLE_ROWS = [
    pytest.param(RANGE, ok_defaults, id="start_datetime + end_datetime"),
    pytest.param({**RANGE, "limit": 2}, ok_limit, id="range + limit"),
    pytest.param({**RANGE, "mode": "chat"}, ok_ids(NEWEST_FIRST[1:4]), id="range + mode"),
    pytest.param({**RANGE, "sort": "asc"}, ok_ids(NEWEST_FIRST[::-1]), id="range + sort=asc"),
    pytest.param(
        {**RANGE, "harness": "pi-coding-agent"},
        ok_filtered("pi-coding-agent", None, NEWEST_FIRST[1:3]),
        id="range + harness",
    ),
    pytest.param(
        {**RANGE, "source": "codex"},
        ok_filtered(None, "codex", [session_id("mon"), session_id("mig")]),
        id="range + source",
    ),
    pytest.param(
        {**RANGE, "harness": "pi-coding-agent", "source": "omp"},
        ok_filtered("pi-coding-agent", "omp", [session_id("omp1")]),
        id="range + harness + source",
    ),
    pytest.param({**RANGE, "harness": " "}, fails("harness"), id="blank harness"),
    pytest.param({**RANGE, "source": ""}, fails("source"), id="blank source"),
    pytest.param({"start_datetime": START}, fails("end_datetime"), id="missing datetime"),
    pytest.param(
        {"start_datetime": "2026-04-29T17:00:00", "end_datetime": END},
        fails("start_datetime"),
        id="datetime without timezone",
    ),
    pytest.param(
        {"start_datetime": END, "end_datetime": END}, fails("end_datetime"), id="end <= start"
    ),
    pytest.param({**RANGE, "page": 2}, fails("page"), id="unknown field"),
    pytest.param({**RANGE, "mode": "Chat"}, fails("mode"), id="invalid mode"),
    pytest.param({**RANGE, "sort": "newest"}, fails("sort"), id="invalid sort"),
]


def single(arguments: dict[str, Any], check: Check) -> Row:
    async def row(tools: SessionTools) -> None:
        check(await call(tools, "list_sessions", arguments))

    return row


async def range_plus_cursor(tools: SessionTools) -> None:
    seen: list[str] = []
    ranks: list[int] = []
    arguments: dict[str, Any] = {**RANGE, "limit": 2}
    while True:
        page = await call(tools, "list_sessions", arguments)
        seen += listed(page)
        ranks += [row["rank"] for row in page["data"]["sessions"]]
        cursor = page["data"]["next_cursor"]
        if cursor is None:
            break
        assert page["data"]["truncated"] is True
        arguments = {**RANGE, "limit": 2, "cursor": cursor}
        # Deterministic: the same cursor gives the same page.
        again = [await call(tools, "list_sessions", arguments) for _ in range(2)]
        assert again[0]["data"] == again[1]["data"]
    assert seen == NEWEST_FIRST
    assert ranks == [1, 2, 3, 4, 5]  # ranks continue across pages


CHANGES = [
    {"sort": "asc"},
    {"mode": "chat"},
    {"harness": "codex"},
    {"source": "codex"},
    {"start_datetime": "2026-04-29T16:00:00Z"},
    {"end_datetime": "2026-05-01T00:00:00Z"},
]


async def cursor_with_changed_filter_or_sort(tools: SessionTools) -> None:
    first = await call(tools, "list_sessions", {**RANGE, "limit": 1})
    cursor = first["data"]["next_cursor"]
    for change in CHANGES:
        got = await call(tools, "list_sessions", {**RANGE, "limit": 1, "cursor": cursor, **change})
        assert error_of(got) == ("invalid_request", "cursor"), change
        assert got["error"]["details"]["reason"] == "cursor_mismatch"
    # The page size may change between pages, and the same filter may be spelled with another
    # offset: the cursor continues.
    same = await call(
        tools,
        "list_sessions",
        {"start_datetime": "2026-04-29T13:00:00-04:00", "end_datetime": END, "cursor": cursor},
    )
    assert listed(same) == NEWEST_FIRST[1:]


ROWS = [
    *(pytest.param(single(*cast(Any, p.values)), id=p.id) for p in SINGLE_ROWS),
    pytest.param(range_plus_cursor, id="range + cursor"),
    pytest.param(cursor_with_changed_filter_or_sort, id="cursor with changed filter or sort"),
]


@pytest.mark.parametrize("row", ROWS)
async def test_list_permutation(store: SessionStore, tools: SessionTools, row: Row) -> None:
    seed_world(store)
    await row(tools)


async def test_cursor_of_another_project_or_tool(store: SessionStore, tools: SessionTools) -> None:
    seed_world(store)
    cursor = (await call(tools, "list_sessions", {**RANGE, "limit": 1}))["data"]["next_cursor"]
    elsewhere = await call(tools, "list_sessions", {**RANGE, "cursor": cursor}, project="proj-b")
    assert error_of(elsewhere) == ("invalid_request", "cursor")
    page = await call(tools, "open", {"id": session_id("mig"), "limit": 1})
    wrong = await call(tools, "list_sessions", {**RANGE, "cursor": page["data"]["next_cursor"]})
    assert error_of(wrong) == ("invalid_request", "cursor")
    tampered = await call(tools, "list_sessions", {**RANGE, "cursor": cursor[:-2] + "xx"})
    assert error_of(tampered) == ("invalid_request", "cursor")


async def test_boundaries_inclusive_start_exclusive_end(
    store: SessionStore, tools: SessionTools
) -> None:
    seed_world(store)
    # mig is updated at 18:42:01 and mon starts at 19:41:56.
    at_update = {"start_datetime": "2026-04-29T18:42:01Z", "end_datetime": "2026-04-29T19:41:56Z"}
    assert listed(await call(tools, "list_sessions", at_update)) == [session_id("mig")]
    after = {"start_datetime": "2026-04-29T18:42:01.001Z", "end_datetime": "2026-04-29T19:41:57Z"}
    assert listed(await call(tools, "list_sessions", after)) == [session_id("mon")]


async def test_keyset_ties_on_updated_at(store: SessionStore, tools: SessionTools) -> None:
    # Three sessions updated in the same instant: the id orders them, and pages of one
    # neither skip nor repeat any.
    seed(store, *(build(k, [[user("same time", at=10)]]) for k in ("b", "a", "c")))
    for sort, order in (("desc", ["c", "b", "a"]), ("asc", ["a", "b", "c"])):
        arguments: dict[str, Any] = {**RANGE, "limit": 1, "sort": sort}
        seen: list[str] = []
        while True:
            page = await call(tools, "list_sessions", arguments)
            seen += listed(page)
            if page["data"]["next_cursor"] is None:
                break
            arguments = {**RANGE, "sort": sort, "limit": 1, "cursor": page["data"]["next_cursor"]}
        assert seen == [session_id(k) for k in order]


async def test_listing_is_compact_metadata(store: SessionStore, tools: SessionTools) -> None:
    seed_world(store)
    got = await call(tools, "list_sessions", {**RANGE, "source": "codex", "limit": 1})
    assert got["data"]["sessions"][0] == {
        "rank": 1,
        "id": session_id("mon"),
        "session": {
            "id": session_id("mon"),
            "title": "Investigate monitor startup",
            "display_label": "Investigate monitor startup",
            "source": "codex",
            "harness": "codex",
            "started_at": "2026-04-29T19:41:56.000Z",
            "updated_at": "2026-04-29T19:41:57.000Z",
            "completed": False,
            "turn_count": 1,
            "event_count": 2,
            "mode": "chat",
            "session_slug": None,
            "session_summary": None,
        },
        "open": {"session_id": session_id("mon")},
    }


@pytest.mark.parametrize(
    ("arguments", "field"),
    [
        ({**RANGE, "limit": 0}, "limit"),
        ({**RANGE, "limit": 51}, "limit"),
        ({**RANGE, "limit": "5"}, "limit"),
        ({**RANGE, "cursor": ""}, "cursor"),
        ({**RANGE, "cursor": "garbage"}, "cursor"),
        ({"start_datetime": "2026-04-29", "end_datetime": END}, "start_datetime"),
        ({"start_datetime": "2026-02-30T00:00:00Z", "end_datetime": END}, "start_datetime"),
        ({"start_datetime": START, "end_datetime": "2026-04-30T18:00:00+25:00"}, "end_datetime"),
        ({"start_datetime": 1714410000, "end_datetime": END}, "start_datetime"),
        ({"start_datetime": START, "end_datetime": "2026-04-30T18:00:00.1234567Z"}, "end_datetime"),
    ],
)
async def test_list_strict_arguments(
    tools: SessionTools, arguments: dict[str, Any], field: str
) -> None:
    assert error_of(await call(tools, "list_sessions", arguments)) == ("invalid_request", field)
