"""Definitions in the run store on SQLite and PostgreSQL: the versioning rule, immutable
versions, all-or-nothing placement, concurrent posts, reads and the listing, per project."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from sqlalchemy import insert

from mcpd.runtime.errors import Conflict
from mcpd.storage.run_records import NewDefinition, PlacedDefinition
from mcpd.storage.sql.schema import run as schema
from mcpd.storage.sql.stores import SqlRunStore

T = 1_767_225_600_000_000_000
ONE = {"steps": [{"id": "a", "kind": "task"}]}
TWO = {"steps": [{"id": "a", "kind": "task"}, {"id": "b", "kind": "task"}]}


def put(
    run_store: SqlRunStore,
    body: dict[str, Any],
    *,
    version: int | None = None,
    project: str = "p",
    definition_id: str = "flow",
    now: int = T,
) -> PlacedDefinition:
    (placed,) = run_store.put_definitions(
        project, [NewDefinition(definition_id, "workflow", body, version)], now=now
    )
    return placed


def test_a_new_body_gets_the_next_version_and_an_identical_one_the_same(
    run_store: SqlRunStore,
) -> None:
    assert put(run_store, ONE) == PlacedDefinition("flow", 1, assigned=True)
    assert put(run_store, ONE) == PlacedDefinition("flow", 1, assigned=False)
    assert put(run_store, TWO) == PlacedDefinition("flow", 2, assigned=True)
    # Identity ignores key order: the same document written another way is the same body.
    reordered = {"steps": [{"kind": "task", "id": "a"}, {"kind": "task", "id": "b"}]}
    assert put(run_store, reordered) == PlacedDefinition("flow", 2, assigned=False)
    assert put(run_store, ONE) == PlacedDefinition("flow", 1, assigned=False)


def test_a_named_version_is_taken_when_free_confirmed_when_identical_refused_when_different(
    run_store: SqlRunStore,
) -> None:
    assert put(run_store, ONE, version=5) == PlacedDefinition("flow", 5, assigned=False)
    assert put(run_store, ONE, version=5) == PlacedDefinition("flow", 5, assigned=False)
    with pytest.raises(Conflict) as caught:
        put(run_store, TWO, version=5)
    assert caught.value.field == "version"
    assert caught.value.reason == "DEFINITION_VERSION_HELD"
    assert "version 5 holds a different body" in caught.value.message
    # The stored version never changed, and a chosen number goes past the highest held.
    found = run_store.definition("p", "flow", 5)
    assert found is not None
    assert found.body == ONE
    assert put(run_store, TWO) == PlacedDefinition("flow", 6, assigned=True)


def test_an_identical_body_at_several_versions_answers_the_highest(run_store: SqlRunStore) -> None:
    put(run_store, ONE, version=1)
    put(run_store, ONE, version=3)
    assert put(run_store, ONE) == PlacedDefinition("flow", 3, assigned=False)


def test_placement_is_all_or_nothing(run_store: SqlRunStore) -> None:
    put(run_store, ONE, definition_id="held", version=1)
    documents = [
        NewDefinition("fresh", "workflow", ONE, None),
        NewDefinition("held", "workflow", TWO, 1),
    ]
    with pytest.raises(Conflict) as caught:
        run_store.put_definitions("p", documents, now=T)
    assert caught.value.metadata == {"index": "1"}
    assert run_store.definition("p", "fresh") is None


def test_a_batch_answers_in_the_order_posted(run_store: SqlRunStore) -> None:
    documents = [
        NewDefinition("zeta", "workflow", ONE, None),
        NewDefinition("alpha", "workflow", ONE, None),
        NewDefinition("zeta", "workflow", TWO, None),
    ]
    assert run_store.put_definitions("p", documents, now=T) == [
        PlacedDefinition("zeta", 1, assigned=True),
        PlacedDefinition("alpha", 1, assigned=True),
        PlacedDefinition("zeta", 2, assigned=True),
    ]


def test_reads_give_a_version_or_the_highest_and_stay_in_their_project(
    run_store: SqlRunStore,
) -> None:
    put(run_store, ONE, now=T)
    put(run_store, TWO, now=T + 1)
    put(run_store, TWO, project="q", definition_id="flow")
    first, latest = run_store.definition("p", "flow", 1), run_store.definition("p", "flow")
    assert first is not None
    assert (first.version, first.body, first.created_at) == (1, ONE, T)
    assert latest is not None
    assert (latest.version, latest.body, latest.kind) == (2, TWO, "workflow")
    assert run_store.definition("p", "flow", 3) is None
    assert run_store.definition("p", "other") is None
    only_q = run_store.definition("q", "flow")
    assert only_q is not None
    assert (only_q.project, only_q.version) == ("q", 1)


def test_the_listing_gives_the_highest_version_of_each_in_id_order(run_store: SqlRunStore) -> None:
    for definition_id in ("gamma", "alpha", "beta"):
        put(run_store, ONE, definition_id=definition_id)
    put(run_store, TWO, definition_id="beta")
    put(run_store, ONE, project="q", definition_id="aardvark")
    listed = run_store.list_definitions("p", after=None, limit=10)
    assert [(d.id, d.version) for d in listed] == [("alpha", 1), ("beta", 2), ("gamma", 1)]
    page = run_store.list_definitions("p", after=None, limit=2)
    assert [d.id for d in page] == ["alpha", "beta"]
    rest = run_store.list_definitions("p", after="beta", limit=2)
    assert [d.id for d in rest] == ["gamma"]
    assert run_store.list_definitions("empty", after=None, limit=10) == []


def test_a_version_stored_without_a_digest_is_compared_by_its_body(run_store: SqlRunStore) -> None:
    with run_store.engine.begin() as conn:
        conn.execute(
            insert(schema.definitions),
            [
                {
                    "project": "p",
                    "id": "flow",
                    "version": 1,
                    "kind": "workflow",
                    "body": ONE,
                    "created_at": T,
                }
            ],
        )
    assert put(run_store, ONE) == PlacedDefinition("flow", 1, assigned=False)
    assert put(run_store, TWO) == PlacedDefinition("flow", 2, assigned=True)


@pytest.mark.parametrize("same", [True, False], ids=["one body", "two bodies"])
def test_simultaneous_posts_land_as_the_rule_says(run_store: SqlRunStore, same: bool) -> None:
    writers = 6
    bodies = [ONE if same else {"steps": [{"id": f"s{n}", "kind": "task"}]} for n in range(writers)]
    start = threading.Barrier(writers)
    placed: list[PlacedDefinition] = []
    failures: list[BaseException] = []

    def post(body: dict[str, Any]) -> None:
        start.wait()
        try:
            placed.append(put(run_store, body))
        except BaseException as error:
            failures.append(error)

    threads = [threading.Thread(target=post, args=(body,)) for body in bodies]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert failures == []
    if same:
        assert sorted(p.version for p in placed) == [1] * writers
        assert sum(p.assigned for p in placed) == 1
    else:
        assert sorted(p.version for p in placed) == list(range(1, writers + 1))
        assert all(p.assigned for p in placed)
