"""Traversal reads, list_sessions (range rule, order, keyset pages, filters) and touches."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest

from mcpd.sessions.model import SessionRecord
from mcpd.sessions.store import SessionListQuery, TouchQuery
from tests.libs.storage.sessions.builders import (
    ASSISTANT,
    T0,
    USER,
    assemble,
    event_id,
    session_id,
    turn_id,
)
from tests.libs.storage.sessions.conftest import AnySessionStore

HOUR = timedelta(hours=1)


def test_turn_and_event_pages(store: AnySessionStore) -> None:
    store.write_session(
        "p", assemble("s1", [[(USER, f"u{i}"), (ASSISTANT, f"a{i}")] for i in range(1, 6)])
    )
    sid = session_id("s1")
    first = store.list_turns("p", sid, after_ordinal=0, limit=2)
    assert [t.ordinal for t in first] == [1, 2]
    rest = store.list_turns("p", sid, after_ordinal=first[-1].ordinal, limit=10)
    assert [t.ordinal for t in rest] == [3, 4, 5]
    assert store.list_turns("p", sid, after_ordinal=5, limit=10) == []

    tid = turn_id("s1", 3)
    assert [e.text for e in store.list_events("p", tid, after_ordinal=0, limit=1)] == ["u3"]
    assert [e.text for e in store.list_events("p", tid, after_ordinal=1, limit=5)] == ["a3"]


def test_neighbours_and_edges(store: AnySessionStore) -> None:
    store.write_session("p", assemble("s1", [[(USER, "u1"), (ASSISTANT, "a1")], [(USER, "u2")]]))
    sid = session_id("s1")
    turns = store.list_turns("p", sid, after_ordinal=0, limit=10)
    assert store.neighbour_turns("p", turns[0]) == (None, turn_id("s1", 2))
    assert store.neighbour_turns("p", turns[1]) == (turn_id("s1", 1), None)
    assert store.edge_turns("p", sid) == (turn_id("s1", 1), turn_id("s1", 2))
    assert store.edge_turns("p", "session:none") == (None, None)

    # Event neighbours follow session order (seq), across turn boundaries.
    events = [
        store.get_event("p", event_id("s1", 1, 1)),
        store.get_event("p", event_id("s1", 1, 2)),
        store.get_event("p", event_id("s1", 2, 1)),
    ]
    assert store.neighbour_events("p", events[0]) == (None, event_id("s1", 1, 2))  # type: ignore[arg-type]
    assert store.neighbour_events("p", events[1]) == (event_id("s1", 1, 1), event_id("s1", 2, 1))  # type: ignore[arg-type]
    assert store.neighbour_events("p", events[2]) == (event_id("s1", 1, 2), None)  # type: ignore[arg-type]
    assert store.edge_events("p", turn_id("s1", 1)) == (event_id("s1", 1, 1), event_id("s1", 1, 2))
    assert store.edge_events("p", turn_id("s1", 2)) == (event_id("s1", 2, 1),) * 2


def test_neighbour_sessions_stay_in_their_source(store: AnySessionStore) -> None:
    for key, source, start in [
        ("a", "codex", T0),
        ("b", "claude", T0 + HOUR),
        ("c", "codex", T0 + 2 * HOUR),
        ("d", "codex", T0 + 2 * HOUR),  # same start as c: the id breaks the tie
    ]:
        store.write_session("p", assemble(key, [[(USER, key)]], source=source, start=start))
    c = _session(store, "c")
    assert store.neighbour_sessions("p", c) == (session_id("a"), session_id("d"))
    assert store.neighbour_sessions("p", _session(store, "a")) == (None, session_id("c"))
    assert store.neighbour_sessions("p", _session(store, "d")) == (session_id("c"), None)
    assert store.neighbour_sessions("p", _session(store, "b")) == (None, None)


def test_session_of_key(store: AnySessionStore) -> None:
    store.write_session("p", assemble("k1", [[(USER, "x")]], source="claude"))
    found = store.session_of_key("p", "claude", "k1")
    assert found is not None
    assert found.id == session_id("k1")
    assert store.session_of_key("p", "codex", "k1") is None
    assert store.session_of_key("q", "claude", "k1") is None


def _write_timeline(store: AnySessionStore) -> None:
    # Sessions of 1..3 events, one minute apart, starting an hour apart.
    specs = [
        ("s1", T0, 1, "codex", "codex", "chat"),
        ("s2", T0 + HOUR, 3, "codex", "codex", "tool_calling"),
        ("s3", T0 + 2 * HOUR, 2, "claude", "claude-code", "tool_calling"),
        ("s4", T0 + 3 * HOUR, 1, "pi", "pi-coding-agent", None),
        ("s5", T0 + 3 * HOUR, 1, "omp", "pi-coding-agent", None),
    ]
    for key, start, count, source, harness, mode in specs:
        store.write_session(
            "p",
            assemble(
                key,
                [[(USER, key)] * count],
                start=start,
                step=timedelta(minutes=1),
                source=source,
                harness=harness,
                mode=mode,
            ),
        )
    store.write_session("q", assemble("other", [[(USER, "x")]], project="q", start=T0))


def _list(store: AnySessionStore, start: datetime, end: datetime, **options: object) -> list[str]:
    query = SessionListQuery(project="p", start=start, end=end, limit=50, **options)  # type: ignore[arg-type]
    return [s.session_key for s in store.list_sessions(query)]


def test_list_sessions_range_rule(store: AnySessionStore) -> None:
    _write_timeline(store)
    # s2 runs T0+1h .. T0+1h+2min: it overlaps a range starting inside it (updated_at >= start).
    assert _list(store, T0 + HOUR + timedelta(minutes=2), T0 + 2 * HOUR) == ["s2"]
    # started_at < end is exclusive: s3 starts exactly at the end.
    assert _list(store, T0 + HOUR, T0 + 2 * HOUR, descending=False) == ["s2"]
    # updated_at >= start is inclusive: s1 ends (and starts) exactly at T0.
    assert _list(store, T0, T0 + timedelta(seconds=1)) == ["s1"]
    assert _list(store, T0 + HOUR * 10, T0 + HOUR * 11) == []


def test_list_sessions_order_and_filters(store: AnySessionStore) -> None:
    _write_timeline(store)
    start, end = T0 - HOUR, T0 + 10 * HOUR
    assert _list(store, start, end) == ["s5", "s4", "s3", "s2", "s1"]  # updated_at, id desc
    assert _list(store, start, end, descending=False) == ["s1", "s2", "s3", "s4", "s5"]
    assert _list(store, start, end, mode="tool_calling") == ["s3", "s2"]
    assert _list(store, start, end, harness="pi-coding-agent") == ["s5", "s4"]
    assert _list(store, start, end, harness="pi-coding-agent", source="omp") == ["s5"]
    assert _list(store, start, end, harness="codex", source="omp") == []
    assert _list(store, start, end, source="Codex") == []  # exact, case-sensitive


@pytest.mark.parametrize("descending", [True, False])
def test_list_sessions_keyset_pages(store: AnySessionStore, descending: bool) -> None:
    _write_timeline(store)
    seen: list[str] = []
    after: tuple[datetime, str] | None = None
    while True:
        page = store.list_sessions(
            SessionListQuery(
                project="p",
                start=T0 - HOUR,
                end=T0 + 10 * HOUR,
                limit=2,
                descending=descending,
                after=after,
            )
        )
        if not page:
            break
        assert len(page) <= 2
        seen += [s.session_key for s in page]
        after = (page[-1].updated_at, page[-1].id)
    expected = ["s1", "s2", "s3", "s4", "s5"]
    assert seen == (expected[::-1] if descending else expected)


def test_touches(store: AnySessionStore) -> None:
    later = T0 + HOUR
    store.write_session(
        "p",
        assemble(
            "s1",
            [[(USER, "edit"), (ASSISTANT, "read")]],
            touches=[
                {"tail": "src/app.py", "timestamp": T0},
                {"tail": "src/app.py", "timestamp": later, "tool_name": "Read", "mutation": False},
                {"tail": "lib/src/app.py", "timestamp": T0 + 2 * HOUR},  # a path suffix
                {"tail": "src/xapp.py", "timestamp": T0},  # not the file
                {"tail": "src/app.py", "timestamp": None, "turn_id": None},
                {"tail": "src/app.py", "git_common_dir": "/other/.git"},
            ],
        ),
    )
    store.write_session(
        "p", assemble("s2", [[(USER, "x")]], source="claude", touches=[{"tail": "src/app.py"}])
    )
    store.write_session(
        "q", assemble("s9", [[(USER, "x")]], project="q", touches=[{"tail": "src/app.py"}])
    )

    def query(**options: object) -> tuple[list[tuple[str, datetime | None]], bool]:
        found, capped = store.touches(
            TouchQuery(project="p", tail="src/app.py", limit=options.pop("limit", 20), **options)  # type: ignore[arg-type]
        )
        return [(t.tail, t.timestamp) for t in found], capped

    found, capped = query()
    assert not capped
    # Newest first; unknown times last.
    assert [stamp for _, stamp in found] == [T0 + 2 * HOUR, later, T0, T0, T0, None]
    assert found[0][0] == "lib/src/app.py"
    assert query(limit=2) == (found[:2], True)
    assert query(tool="read") == ([("src/app.py", later)], False)  # case-insensitive
    assert len(query(mutations_only=True)[0]) == 5
    assert len(query(start=later)[0]) == 2
    assert len(query(start=later, end=T0 + 2 * HOUR)[0]) == 1
    assert len(query(source="claude")[0]) == 1
    assert len(query(git_common_dir="/other/.git")[0]) == 1
    # A shorter tail matches by path suffix too (but never `xapp.py`).
    short = store.touches(TouchQuery(project="p", tail="app.py", limit=50))[0]
    assert [t.tail for t in short] == ["lib/src/app.py"] + ["src/app.py"] * 5
    assert short[-1].timestamp is None
    assert short[-1].turn_id is None


def test_touch_tails_match_literally(store: AnySessionStore) -> None:
    store.write_session(
        "p", assemble("s1", [[(USER, "x")]], touches=[{"tail": "a_b.py"}, {"tail": "a%b.py"}])
    )
    assert [t.tail for t in store.touches(TouchQuery(project="p", tail="a_b.py", limit=9))[0]] == [
        "a_b.py"
    ]


def _session(store: AnySessionStore, key: str) -> SessionRecord:
    found = store.get_session("p", session_id(key))
    assert found is not None
    return found
