"""Runs in the run store: starting one (with its idempotency key) and reading runs, their
journal and their event log, on SQLite and PostgreSQL.

A start's idempotency key is a row of `idempotency_keys` (scope `start_run`) naming the run it
started. It is inserted with ON CONFLICT DO NOTHING before the run: when another start holds
the key the insert writes nothing (on PostgreSQL after waiting for that start to commit or roll
back; SQLite's BEGIN IMMEDIATE lets one writer in at a time) and the held key's run is
answered instead, so two simultaneous starts of one key make one run. A key past its
`expires_at` is deleted first and taken afresh.

The run's first transition (its first events, attempts, timers and waits) is decided and
written in the same transaction (`transitions.first_transition`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import cast

from sqlalchemy import Connection, select, tuple_, update

from mcpd.storage.run_records import (
    RunChanges,
    RunDetailRecord,
    RunEventRow,
    RunRow,
    RunSnapshot,
)
from mcpd.storage.sql.dialect import SqlDialect
from mcpd.storage.sql.schema.run import (
    idempotency_keys,
    run_events,
    runs,
)
from mcpd.storage.sql.transitions import (
    first_transition,
    insert_run,
    read_journal,
    stored_run,
    take_key,
)

__all__ = [
    "START_SCOPE",
    "list_runs",
    "run_detail",
    "run_events_after",
    "start_run",
]

START_SCOPE = "start_run"


def start_run(
    conn: Connection,
    dialect: SqlDialect,
    run: RunRow,
    decide: Callable[[RunSnapshot], tuple[RunChanges, object]],
    *,
    now: int,
    key_ttl_ns: int,
) -> tuple[RunRow, bool]:
    """`RunStarts.start_run` inside the caller's transaction (see the module docstring)."""
    key = run["idempotency_key"]
    if key is not None and not take_key(
        conn, dialect, run["project"], START_SCOPE, key, run["run_id"], now=now, ttl_ns=key_ttl_ns
    ):
        held = _held_by(conn, run, key)
        if held is not None:
            return held, False
        # The run the key started has been erased since: the key starts this one instead.
        c = idempotency_keys.c
        conn.execute(
            update(idempotency_keys)
            .where(c.project == run["project"], c.scope == START_SCOPE, c.key == key)
            .values(target=run["run_id"], created_at=now, expires_at=now + key_ttl_ns)
        )
    insert_run(conn, run)
    first_transition(conn, dialect, run, decide, now=now)
    stored = stored_run(conn, run["project"], run["run_id"])
    assert stored is not None
    return stored, True


def _held_by(conn: Connection, run: RunRow, key: str) -> RunRow | None:
    """The run that holds the start key `key` of `run`'s project."""
    c = idempotency_keys.c
    target = conn.execute(
        select(c.target).where(c.project == run["project"], c.scope == START_SCOPE, c.key == key)
    ).scalar_one()
    return stored_run(conn, run["project"], str(target))


def run_detail(conn: Connection, project: str, run_id: str) -> RunDetailRecord | None:
    """The run with its attempts (in the order written), timers and waits."""
    run = stored_run(conn, project, run_id)
    if run is None:
        return None
    attempts, held, open_waits = read_journal(conn, run_id)
    return RunDetailRecord(run=run, attempts=attempts, timers=held, waits=open_waits)


def list_runs(
    conn: Connection,
    project: str,
    *,
    statuses: Sequence[str],
    definition_id: str | None,
    after: tuple[int, str] | None,
    limit: int,
) -> list[RunRow]:
    """The project's runs, newest first, after the (created_at, run_id) `after`."""
    c = runs.c
    statement = select(runs).where(c.project == project)
    if statuses:
        statement = statement.where(c.status.in_(list(statuses)))
    if definition_id is not None:
        statement = statement.where(c.definition_id == definition_id)
    if after is not None:
        statement = statement.where(tuple_(c.created_at, c.run_id) < tuple_(*after))
    statement = statement.order_by(c.created_at.desc(), c.run_id.desc()).limit(limit)
    return [cast(RunRow, dict(row)) for row in conn.execute(statement).mappings()]


def run_events_after(
    conn: Connection, project: str, run_id: str, *, after: int | None, limit: int
) -> list[RunEventRow]:
    """The run's event log rows with seq above `after`, in order."""
    c = run_events.c
    statement = select(c.run_id, c.seq, c.kind, c.payload, c.at).where(
        c.project == project, c.run_id == run_id
    )
    if after is not None:
        statement = statement.where(c.seq > after)
    statement = statement.order_by(c.seq).limit(limit)
    return [cast(RunEventRow, dict(row)) for row in conn.execute(statement).mappings()]
