"""Runs in the run store: starting one (with its idempotency key) and reading runs, their
journal and their event log, on SQLite and PostgreSQL.

A start's idempotency key is a row of `idempotency_keys` (scope `start_run`) naming the run it
started. It is inserted with ON CONFLICT DO NOTHING before the run: when another start holds
the key the insert writes nothing (on PostgreSQL after waiting for that start to commit or roll
back; SQLite's BEGIN IMMEDIATE lets one writer in at a time) and the held key's run is
answered instead, so two simultaneous starts of one key make one run. A key past its
`expires_at` is deleted first and taken afresh.

The run's first attempts, events and timers are written with it (`transitions.apply_changes`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import cast

from sqlalchemy import Connection, delete, insert, select, tuple_

from mcpd.storage.run_records import (
    AttemptRow,
    RunChanges,
    RunDetailRecord,
    RunEventRow,
    RunRow,
    TimerRow,
    WaitRow,
)
from mcpd.storage.sql.dialect import SqlDialect, insert_ignore
from mcpd.storage.sql.schema.run import (
    idempotency_keys,
    run_events,
    runs,
    step_attempts,
    timers,
    waits,
)
from mcpd.storage.sql.transitions import apply_changes

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
    changes: RunChanges,
    *,
    now: int,
    key_ttl_ns: int,
) -> tuple[RunRow, bool]:
    """`RunStarts.start_run` inside the caller's transaction (see the module docstring)."""
    key = run["idempotency_key"]
    if key is not None:
        held = _take_key(conn, dialect, run, key, now=now, ttl_ns=key_ttl_ns)
        if held is not None:
            return held, False
    conn.execute(insert(runs), [dict(run)])
    apply_changes(conn, run["project"], run["run_id"], changes, now=now)
    stored = _run(conn, run["project"], run["run_id"])
    assert stored is not None
    return stored, True


def _take_key(
    conn: Connection, dialect: SqlDialect, run: RunRow, key: str, *, now: int, ttl_ns: int
) -> RunRow | None:
    """Take the start key for `run`; the run that holds it already, if another does."""
    c = idempotency_keys.c
    where = (c.project == run["project"], c.scope == START_SCOPE, c.key == key)
    conn.execute(delete(idempotency_keys).where(*where, c.expires_at <= now))
    row = {
        "project": run["project"],
        "scope": START_SCOPE,
        "key": key,
        "target": run["run_id"],
        "created_at": now,
        "expires_at": now + ttl_ns,
    }
    taken = conn.execute(insert_ignore(idempotency_keys, dialect).values(row).returning(c.key))
    if taken.first() is not None:
        return None
    target = conn.execute(select(c.target).where(*where)).scalar_one()
    return _run(conn, run["project"], str(target))


def _run(conn: Connection, project: str, run_id: str) -> RunRow | None:
    row = (
        conn.execute(select(runs).where(runs.c.project == project, runs.c.run_id == run_id))
        .mappings()
        .first()
    )
    return None if row is None else cast(RunRow, dict(row))


def run_detail(conn: Connection, project: str, run_id: str) -> RunDetailRecord | None:
    """The run with its attempts (in the order written), timers and waits."""
    run = _run(conn, project, run_id)
    if run is None:
        return None
    a, t, w = step_attempts.c, timers.c, waits.c
    attempt_columns = [col for col in step_attempts.c if col.name != "project"]
    attempts = conn.execute(
        select(*attempt_columns)
        .where(a.run_id == run_id)
        .order_by(a.created_at, a.step_key, a.attempt)
    ).mappings()
    held = conn.execute(
        select(t.run_id, t.kind, t.step_key, t.attempt, t.due_at)
        .where(t.run_id == run_id)
        .order_by(t.due_at, t.kind, t.step_key)
    ).mappings()
    open_waits = conn.execute(
        select(w.run_id, w.step_key, w.event, w.key, w.expires_at)
        .where(w.run_id == run_id)
        .order_by(w.step_key)
    ).mappings()
    return RunDetailRecord(
        run=run,
        attempts=[cast(AttemptRow, dict(row)) for row in attempts],
        timers=[cast(TimerRow, dict(row)) for row in held],
        waits=[cast(WaitRow, dict(row)) for row in open_waits],
    )


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
