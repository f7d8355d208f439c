"""`RunStore.erase_subject` on SQLite and PostgreSQL: whole ended trees go with everything that
hangs off them; a tree with a live run stays whole and is counted."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from sqlalchemy import Table, func, insert, select
from sqlalchemy.engine import Engine

from mcpd.storage.run_records import RunErasure
from mcpd.storage.sql.schema import run as schema
from mcpd.storage.sql.stores import SqlRunStore
from tests.libs.storage.helpers import Migrated

T = 1_767_225_600_000_000_000
SUBJECT = ("u-hash", "u-plain")


@pytest.fixture
def run_store(backend: str, migrated: Migrated) -> Iterator[SqlRunStore]:
    store = SqlRunStore(migrated.engine("run", backend))
    with store.engine.begin() as conn:
        for project in ("p", "q"):
            conn.execute(
                insert(schema.definitions),
                [
                    {
                        "project": project,
                        "id": "flow",
                        "version": 1,
                        "kind": "workflow",
                        "body": {},
                        "created_at": T,
                    }
                ],
            )
    try:
        yield store
    finally:
        store.close()


def _add_run(
    engine: Engine,
    run_id: str,
    *,
    project: str = "p",
    user_id: str | None = None,
    status: str = "succeeded",
    root: str | None = None,
    parent: str | None = None,
    consumed: str | None = None,
) -> None:
    """A run with one attempt, a started and (when given) a resumed event, a timer, a wait,
    and the idempotency key of its start."""
    with engine.begin() as conn:
        conn.execute(
            insert(schema.runs),
            [
                {
                    "run_id": run_id,
                    "project": project,
                    "definition_id": "flow",
                    "definition_version": 1,
                    "status": status,
                    "cursor_index": 0,
                    "cursor_construct": "step",
                    "input": {"prompt": f"input of {run_id}"},
                    "user_id": user_id,
                    "trace_id": "0" * 32,
                    "steps_used": 0,
                    "cost_usd": 0.0,
                    "idempotency_key": f"start-{run_id}",
                    "root_run_id": root or run_id,
                    "parent_run_id": parent,
                    "depth": 0 if parent is None else 1,
                    "next_event_seq": 2,
                    "created_at": T,
                    "updated_at": T,
                }
            ],
        )
        common = {"project": project, "run_id": run_id}
        conn.execute(
            insert(schema.step_attempts),
            [
                {
                    **common,
                    "step_key": "a",
                    "attempt": 1,
                    "kind": "task",
                    "effect": "pure",
                    "status": "succeeded",
                    "span_id": "0" * 16,
                    "created_at": T,
                }
            ],
        )
        events = [{**common, "seq": 0, "kind": "run_started", "payload": {}, "at": T}]
        if consumed is not None:
            payload = {"step_key": "a", "event_id": consumed}
            events.append({**common, "seq": 1, "kind": "run_resumed", "payload": payload, "at": T})
        conn.execute(insert(schema.run_events), events)
        conn.execute(
            insert(schema.timers), [{**common, "kind": "deadline", "step_key": "", "due_at": T}]
        )
        conn.execute(
            insert(schema.waits),
            [{**common, "step_key": "a", "event": "ok", "key": "k", "expires_at": T}],
        )
        conn.execute(
            insert(schema.idempotency_keys),
            [
                {
                    "project": project,
                    "scope": "start_run",
                    "key": f"start-{run_id}",
                    "target": run_id,
                    "created_at": T,
                    "expires_at": T,
                }
            ],
        )


def _add_event(engine: Engine, event_id: str, project: str = "p") -> None:
    """A parked event and the idempotency key of its id."""
    with engine.begin() as conn:
        conn.execute(
            insert(schema.parked_events),
            [
                {
                    "project": project,
                    "event_id": event_id,
                    "event": "ok",
                    "key": "k",
                    "payload": {"note": "approved"},
                    "parked_at": T,
                    "expires_at": T,
                }
            ],
        )
        conn.execute(
            insert(schema.idempotency_keys),
            [
                {
                    "project": project,
                    "scope": "event",
                    "key": event_id,
                    "target": "parked",
                    "created_at": T,
                    "expires_at": T,
                }
            ],
        )


def _count(engine: Engine, table: Table, **where: Any) -> int:
    statement = select(func.count()).select_from(table)
    for name, value in where.items():
        statement = statement.where(table.c[name] == value)
    with engine.connect() as conn:
        return int(conn.execute(statement).scalar_one())


def _run_ids(engine: Engine) -> set[str]:
    with engine.connect() as conn:
        return set(conn.execute(select(schema.runs.c.run_id)).scalars())


JOURNALS = (schema.step_attempts, schema.run_events, schema.timers, schema.waits)


def test_an_ended_tree_goes_whole_with_its_journal_keys_and_consumed_events(
    run_store: SqlRunStore,
) -> None:
    engine = run_store.engine
    # The subject started a child run; the root belongs to nobody in particular.
    _add_run(engine, "root-1")
    _add_run(engine, "child-1", user_id="u-hash", root="root-1", parent="root-1", consumed="ev-1")
    _add_run(engine, "grandchild-1", root="root-1", parent="child-1", status="failed")
    _add_event(engine, "ev-1")
    # Someone else's run, another parked event, and the subject's run in another project.
    _add_run(engine, "other", user_id="u-other")
    _add_event(engine, "ev-2")
    _add_run(engine, "elsewhere", project="q", user_id="u-hash")

    result = run_store.erase_subject("p", SUBJECT)

    assert result == RunErasure(runs_erased=3, runs_in_flight=0, in_flight_roots=())
    assert _run_ids(engine) == {"other", "elsewhere"}
    for table in JOURNALS:
        for gone in ("root-1", "child-1", "grandchild-1"):
            assert _count(engine, table, run_id=gone) == 0, table.name
        assert _count(engine, table, run_id="other") == 1, table.name
    assert _count(engine, schema.parked_events, event_id="ev-1") == 0
    assert _count(engine, schema.parked_events, event_id="ev-2") == 1
    keys = schema.idempotency_keys
    assert _count(engine, keys, key="ev-1") == 0
    assert _count(engine, keys, key="ev-2") == 1
    assert _count(engine, keys, target="child-1") == 0
    assert _count(engine, keys, target="root-1") == 0
    assert _count(engine, keys, target="other") == 1
    assert _count(engine, keys, target="elsewhere") == 1
    assert _count(engine, schema.definitions) == 2


def test_a_tree_with_a_live_run_is_left_whole_and_counted(run_store: SqlRunStore) -> None:
    engine = run_store.engine
    _add_run(engine, "root-live", user_id="u-plain")
    _add_run(engine, "child-a", user_id="u-hash", root="root-live", parent="root-live")
    _add_run(
        engine, "child-b", root="root-live", parent="root-live", status="running", consumed="ev"
    )
    _add_event(engine, "ev")
    _add_run(engine, "done", user_id="u-hash", status="cancelled")

    result = run_store.erase_subject("p", SUBJECT)

    assert result == RunErasure(runs_erased=1, runs_in_flight=2, in_flight_roots=("root-live",))
    assert _run_ids(engine) == {"root-live", "child-a", "child-b"}
    assert _count(engine, schema.run_events, run_id="child-b") == 2
    assert _count(engine, schema.parked_events, event_id="ev") == 1
    assert _count(engine, schema.idempotency_keys, target="root-live") == 1


def test_no_identifiers_or_no_match_erase_nothing(run_store: SqlRunStore) -> None:
    _add_run(run_store.engine, "r", user_id="u-hash")

    assert run_store.erase_subject("p", []) == RunErasure()
    assert run_store.erase_subject("p", ["nobody"]) == RunErasure()
    assert _run_ids(run_store.engine) == {"r"}
