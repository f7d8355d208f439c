"""Batch reads (`turns_by_id`, `sessions_by_id`): the same records as the point reads, only the
asked project's, unknown and vanished ids absent, and more ids than one query's IN list."""

from __future__ import annotations

from mcpd.storage.sql.sessions.writes import CHUNK
from tests.libs.storage.sessions.builders import ASSISTANT, USER, assemble, session_id, turn_id
from tests.libs.storage.sessions.conftest import AnySessionStore


def _write_two_projects(store: AnySessionStore) -> None:
    # The ids are derived from the keys alone, so project q holds rows with p's very ids.
    store.write_session("p", assemble("s1", [[(USER, "a"), (ASSISTANT, "b")], [(USER, "c")]]))
    store.write_session("p", assemble("s2", [[(USER, "d")]], source="claude", title="two"))
    store.write_session(
        "q", assemble("s1", [[(USER, "x")], [(USER, "y")], [(USER, "z")]], project="q")
    )
    store.write_session("q", assemble("s3", [[(USER, "w")]], project="q"))


def test_batch_reads_equal_the_point_reads(store: AnySessionStore) -> None:
    _write_two_projects(store)
    turns = [turn_id("s1", 1), turn_id("s1", 2), turn_id("s2", 1)]
    sessions = [session_id("s2"), session_id("s1")]
    assert store.turns_by_id("p", turns) == {i: store.get_turn("p", i) for i in turns}
    assert store.sessions_by_id("p", sessions) == {i: store.get_session("p", i) for i in sessions}


def test_batch_reads_never_cross_projects(store: AnySessionStore) -> None:
    _write_two_projects(store)
    # s1's session and turns 1-2 exist in both projects: each project gets its own rows.
    for project, turn_count in (("p", 2), ("q", 3)):
        found = store.sessions_by_id(project, [session_id("s1")])[session_id("s1")]
        assert (found.project, found.turn_count) == (project, turn_count)
    q_turn = store.turns_by_id("q", [turn_id("s1", 1)])[turn_id("s1", 1)]
    assert q_turn == store.get_turn("q", turn_id("s1", 1))
    assert q_turn != store.get_turn("p", turn_id("s1", 1))
    # Ids only q holds are unknown to p, and to a project with no rows at all.
    assert store.turns_by_id("p", [turn_id("s1", 3), turn_id("s3", 1)]) == {}
    assert store.sessions_by_id("p", [session_id("s3")]) == {}
    assert store.sessions_by_id("r", [session_id("s1"), session_id("s2")]) == {}


def test_unknown_and_vanished_ids_are_absent(store: AnySessionStore) -> None:
    _write_two_projects(store)
    store.write_session("p", assemble("s1", [[(USER, "a"), (ASSISTANT, "b")]]))  # turn 2 gone
    asked = [turn_id("s1", 1), turn_id("s1", 2), "turn:none", turn_id("s2", 1)]
    assert sorted(store.turns_by_id("p", asked)) == [turn_id("s1", 1), turn_id("s2", 1)]
    found = store.sessions_by_id("p", ["session:none", session_id("s1")])
    assert list(found) == [session_id("s1")]
    assert found[session_id("s1")].turn_count == 1  # the rewrite, not the first version
    assert store.turns_by_id("p", []) == {}
    assert store.sessions_by_id("p", []) == {}


def test_more_ids_than_one_in_list(store: AnySessionStore) -> None:
    count = CHUNK + 3
    store.write_session("p", assemble("long", [[(USER, f"u{i}")] for i in range(count)]))
    asked = [turn_id("long", ordinal) for ordinal in range(count, 0, -1)]
    found = store.turns_by_id("p", [*asked, "turn:none"])
    assert sorted(found) == sorted(asked)
    assert all(found[i].ordinal == int(i.rsplit(":", 1)[1]) for i in asked)
