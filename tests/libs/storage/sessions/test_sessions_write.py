"""write_session: round trips, atomic replacement, idempotent re-writes and the snapshot."""

from __future__ import annotations

from dataclasses import replace

import pytest
from sqlalchemy import func, select

from mcpd.sessions.model import EventType
from mcpd.sessions.store import TouchQuery
from mcpd.storage.sql.schema.sessions import event_search, events, file_touches, turns
from mcpd.storage.sql.sessions import SqlSessionStore
from tests.libs.storage.sessions.builders import (
    ASSISTANT,
    T0,
    TOOL_CALL,
    USER,
    assemble,
    event_id,
    session_id,
    turn_id,
    with_session,
)
from tests.libs.storage.sessions.conftest import AnySessionStore


def test_round_trip(store: AnySessionStore) -> None:
    assembled = assemble(
        "s1",
        [
            [(USER, "Fix the migration"), (TOOL_CALL, "alembic upgrade", {"tool_name": "Bash"})],
            [
                (USER, "again"),
                (
                    ASSISTANT,
                    "Done: the migration ran.",
                    {
                        "model": "gpt-5",
                        "originating_model": "gpt-5-mini",
                        "call_id": "c1",
                        "payload": {"k": [1, "é", None]},
                        "line": 42,
                    },
                ),
            ],
        ],
        title="Migration",
        mode="tool_calling",
        touches=[{"tail": "src/app.py"}, {"tail": "README.md", "mutation": False}],
    )
    store.write_session("p", assembled)

    assert store.get_session("p", session_id("s1")) == assembled.session
    for turn in assembled.turns:
        assert store.get_turn("p", turn.id) == turn
    for event in assembled.events:
        assert store.get_event("p", event.id) == event
    assert store.list_turns("p", session_id("s1"), after_ordinal=0, limit=10) == assembled.turns
    # Microsecond timestamps survive the nanosecond columns.
    assert store.get_event("p", event_id("s1", 1, 1)).timestamp == T0  # type: ignore[union-attr]
    assert store.get_session("p", "session:nope") is None
    assert store.get_turn("p", "turn:nope") is None
    assert store.get_event("p", "event:nope") is None


def test_every_read_is_scoped_to_the_project(store: AnySessionStore) -> None:
    store.write_session("p", assemble("s1", [[(USER, "hello")]]))
    assert store.get_session("other", session_id("s1")) is None
    assert store.get_event("other", event_id("s1", 1, 1)) is None
    assert store.snapshot("other") == 0


def test_identical_rewrite_changes_nothing(store: AnySessionStore) -> None:
    assembled = assemble("s1", [[(USER, "hello"), (ASSISTANT, "hi")]])
    assert store.snapshot("p") == 0
    store.write_session("p", assembled)
    version = store.snapshot("p")
    assert version == 1

    store.write_session("p", assemble("s1", [[(USER, "hello"), (ASSISTANT, "hi")]]))

    assert store.snapshot("p") == version
    assert store.get_event("p", event_id("s1", 1, 2)) == assembled.events[1]


def test_a_changed_session_replaces_its_rows_and_bumps_the_snapshot(
    store: AnySessionStore,
) -> None:
    store.write_session(
        "p",
        assemble(
            "s1",
            [[(USER, "hello"), (ASSISTANT, "hi")], [(USER, "bye")]],
            touches=[{"tail": "a.py"}, {"tail": "b.py"}],
        ),
    )
    # The second turn disappears, an event changes and one is appended; one touch remains.
    changed = assemble(
        "s1",
        [[(USER, "hello"), (ASSISTANT, "hi there"), (ASSISTANT, "more")]],
        touches=[{"tail": "b.py"}],
    )
    store.write_session("p", changed)

    assert store.snapshot("p") == 2
    assert store.get_turn("p", turn_id("s1", 2)) is None
    assert store.get_event("p", event_id("s1", 2, 1)) is None
    assert store.list_events("p", turn_id("s1", 1), after_ordinal=0, limit=10) == changed.events
    touches, capped = store.touches(_touch_query("a.py"))
    assert (touches, capped) == ([], False)
    assert [t.tail for t in store.touches(_touch_query("b.py"))[0]] == ["b.py"]
    assert store.get_session("p", session_id("s1")) == changed.session


def test_session_metadata_change_reaches_denormalised_columns(store: AnySessionStore) -> None:
    assembled = assemble("s1", [[(USER, "hello")]], touches=[{"tail": "a.py"}])
    store.write_session("p", assembled)
    store.write_session("p", with_session(assembled, source="codex-2"))

    assert store.get_session("p", session_id("s1")).source == "codex-2"  # type: ignore[union-attr]
    assert len(store.touches(_touch_query("a.py", source="codex-2"))[0]) == 1
    assert store.touches(_touch_query("a.py", source="codex"))[0] == []


def test_rewrite_keeps_untouched_rows(sql_store: SqlSessionStore) -> None:
    store = sql_store
    first = assemble("s1", [[(USER, "hello"), (ASSISTANT, "hi")]])
    store.write_session("p", first)
    longer = assemble("s1", [[(USER, "hello"), (ASSISTANT, "hi"), (ASSISTANT, "more")]])
    # The earlier events keep their row hashes (terminal flag moved, so event 2 changes).
    store.write_session("p", longer)
    with store.engine.connect() as conn:
        count = conn.execute(select(func.count()).select_from(events)).scalar_one()
    assert count == 3
    assert store.get_event("p", event_id("s1", 1, 1)) == first.events[0]


def test_write_rejects_a_session_of_another_project(store: AnySessionStore) -> None:
    with pytest.raises(ValueError, match="another project"):
        store.write_session("other", assemble("s1", [[(USER, "hello")]]))
    assert store.snapshot("other") == 0


def test_write_rejects_repeated_ids(store: AnySessionStore) -> None:
    broken = assemble("s1", [[(USER, "hello")]])
    with pytest.raises(ValueError, match="repeats a event id"):
        store.write_session("p", replace(broken, events=[*broken.events, broken.events[0]]))
    assert store.snapshot("p") == 0


def test_failed_write_leaves_nothing(
    sql_store: SqlSessionStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    # SQL only: ClickHouse has no transaction (test_sessions_clickhouse covers its behaviour).
    store = sql_store
    good = assemble("s1", [[(USER, "hello")]], touches=[{"tail": "a.py"}])
    store.write_session("p", good)

    def fail(*_args: object) -> None:
        raise RuntimeError("disk full")

    # The search side runs last inside the transaction: everything before it rolls back.
    monkeypatch.setattr(store._search, "in_transaction", fail)
    with pytest.raises(RuntimeError, match="disk full"):
        store.write_session("p", assemble("s1", [[(USER, "changed"), (ASSISTANT, "new")]]))

    assert store.snapshot("p") == 1
    assert store.get_session("p", session_id("s1")) == good.session
    assert store.list_events("p", turn_id("s1", 1), after_ordinal=0, limit=9) == good.events
    assert len(store.touches(_touch_query("a.py"))[0]) == 1


def test_nul_characters_are_stored_as_replacement_characters(store: AnySessionStore) -> None:
    store.write_session(
        "p",
        assemble("s1", [[(USER, "a\x00b", {"payload": {"out": ["x\x00"], "k\x00": 1}})]]),
    )
    event = store.get_event("p", event_id("s1", 1, 1))
    assert event is not None
    assert event.text == "a\ufffdb"
    assert event.payload == {"out": ["x\ufffd"], "k\ufffd": 1}


def test_sessions_are_independent(store: AnySessionStore) -> None:
    store.write_session("p", assemble("s1", [[(USER, "one")]], touches=[{"tail": "x.py"}]))
    store.write_session("p", assemble("s2", [[(USER, "two")]], touches=[{"tail": "x.py"}]))
    store.write_session("p", assemble("s1", [[(USER, "one!")]], touches=[{"tail": "x.py"}]))

    assert store.get_event("p", event_id("s2", 1, 1)).text == "two"  # type: ignore[union-attr]
    assert len(store.touches(_touch_query("x.py"))[0]) == 2
    assert store.snapshot("p") == 3


def test_search_rows_follow_the_backend(sql_store: SqlSessionStore) -> None:
    store = sql_store
    store.write_session(
        "p",
        assemble(
            "s1",
            [
                [
                    (USER, "hello"),
                    (EventType.UNKNOWN, "mystery"),
                    (TOOL_CALL, "search", {"payload": {"self_tool": True}}),
                    (ASSISTANT, ""),
                ]
            ],
        ),
    )
    with store.engine.connect() as conn:
        rows = conn.execute(select(event_search.c.event_id)).scalars().all()
        assert conn.execute(select(func.count()).select_from(turns)).scalar_one() == 1
        assert conn.execute(select(func.count()).select_from(file_touches)).scalar_one() == 0
    # PostgreSQL keeps a vector per searchable event; SQLite leaves the table to tantivy.
    expected = [event_id("s1", 1, 1)] if store.backend == "postgres" else []
    assert rows == expected


def _touch_query(tail: str, source: str | None = None) -> TouchQuery:
    return TouchQuery(project="p", tail=tail, limit=10, source=source)


def test_a_sessions_version_moves_only_when_that_session_changes(store: AnySessionStore) -> None:
    assert store.session_version("p", session_id("s1")) is None
    store.write_session("p", assemble("s1", [[(USER, "hello")]]))
    first = store.session_version("p", session_id("s1"))
    assert first == store.snapshot("p")

    store.write_session("p", assemble("s2", [[(USER, "elsewhere")]]))
    store.write_session("p", assemble("s1", [[(USER, "hello")]]))  # identical: no change
    assert store.session_version("p", session_id("s1")) == first
    assert store.snapshot("p") == first + 1

    store.write_session("p", assemble("s1", [[(USER, "hello"), (ASSISTANT, "hi")]]))
    assert store.session_version("p", session_id("s1")) == store.snapshot("p") == first + 2
    assert store.session_version("other", session_id("s1")) is None
