"""Transitions of runs in the run store, on SQLite and PostgreSQL: one transaction reads a run
under its lock (a `RunSnapshot`), the orchestrator decides, and the `RunChanges` it answers are
written before the transaction commits.

The lock is the run row's: `SELECT ... FOR UPDATE` on PostgreSQL (with SKIP LOCKED for a claim,
which would rather take another run's work than wait), and SQLite's single writer (BEGIN
IMMEDIATE) there. Every change to a run goes through here, so two transitions of one run never
interleave and each sees the other's writes.

Claims and the timer tick find their candidates with a plain read first (`claimable`,
`due_timers`) and then move each run in a transition of its own, which decides again from what
the lock shows: a candidate another process took in between is simply not there.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar, cast

from sqlalchemy import Connection, and_, delete, exists, func, insert, select, text, update

from mcpd.runtime.errors import AlreadyExists
from mcpd.runtime.ids import new_id
from mcpd.storage.run_records import (
    AttemptRow,
    LeaseRow,
    ParkedEventRow,
    RunChanges,
    RunRow,
    RunSnapshot,
    TimerRow,
    WaitRow,
)
from mcpd.storage.sql.dialect import SqlDialect, insert_ignore
from mcpd.storage.sql.schema.run import (
    idempotency_keys,
    leases,
    parked_events,
    run_events,
    runs,
    span_outbox,
    step_attempts,
    timers,
    waits,
)

__all__ = [
    "EVENT_SCOPE",
    "KEY_TTL_NS",
    "append_events",
    "apply_changes",
    "claimable",
    "due_timers",
    "first_transition",
    "lease_run",
    "park_event",
    "queued_spans",
    "read_journal",
    "sent_spans",
    "take_key",
    "transition",
    "waiting",
]

T = TypeVar("T")
Decide = Callable[[RunSnapshot], tuple[RunChanges, T]]
_ATTEMPT_COLUMNS = [column for column in step_attempts.c if column.name != "project"]
_TIMER_COLUMNS = [timers.c.run_id, timers.c.kind, timers.c.step_key, timers.c.attempt]
# Published event ids are held as idempotency keys of this scope, for as long as parked events.
EVENT_SCOPE = "event"
KEY_TTL_NS = 24 * 3600 * 1_000_000_000


def transition(
    conn: Connection,
    dialect: SqlDialect,
    project: str,
    run_id: str,
    decide: Decide[T],
    *,
    now: int,
    lease_id: str | None = None,
    skip_locked: bool = False,
) -> T | None:
    """Lock the run's tree (its root's row, then its own), read its snapshot, apply what
    `decide` answers and return the rest of its answer; None (deciding nothing) when the run
    does not exist or, with `skip_locked`, another transaction holds the tree."""
    c = runs.c
    root = conn.execute(
        select(c.root_run_id).where(c.project == project, c.run_id == run_id)
    ).scalar_one_or_none()
    if root is None:
        return None
    if root != run_id and _lock(conn, project, str(root), skip_locked=skip_locked) is None:
        return None
    locked = _lock(conn, project, run_id, skip_locked=skip_locked)
    if locked is None:
        return None
    tree = _RunTree(conn, dialect, project)
    changes, answer = decide(tree.snapshot_of(locked, lease_id))
    apply_changes(conn, dialect, project, run_id, changes, now=now)
    return answer


def _lock(conn: Connection, project: str, run_id: str, *, skip_locked: bool) -> RunRow | None:
    row = (
        conn.execute(
            select(runs)
            .where(runs.c.project == project, runs.c.run_id == run_id)
            .with_for_update(skip_locked=skip_locked)
        )
        .mappings()
        .first()
    )
    return None if row is None else cast(RunRow, dict(row))


def first_transition(
    conn: Connection,
    dialect: SqlDialect,
    run: RunRow,
    decide: Decide[T],
    *,
    now: int,
) -> T:
    """The transition of a run just inserted in this transaction: no journal yet."""
    project = run["project"]
    changes, answer = decide(_RunTree(conn, dialect, project).new(run))
    apply_changes(conn, dialect, project, run["run_id"], changes, now=now)
    return answer


def read_journal(
    conn: Connection, run_id: str
) -> tuple[list[AttemptRow], list[TimerRow], list[WaitRow]]:
    """A run's attempts (in the order written), timers and open waits."""
    a, t, w = step_attempts.c, timers.c, waits.c
    attempts = conn.execute(
        select(*_ATTEMPT_COLUMNS).where(a.run_id == run_id).order_by(a.created_at, a.attempt)
    ).mappings()
    held = conn.execute(
        select(*_TIMER_COLUMNS, t.due_at)
        .where(t.run_id == run_id)
        .order_by(t.due_at, t.kind, t.step_key)
    ).mappings()
    open_waits = conn.execute(
        select(w.run_id, w.step_key, w.event, w.key, w.expires_at)
        .where(w.run_id == run_id)
        .order_by(w.step_key)
    ).mappings()
    return (
        [cast(AttemptRow, dict(row)) for row in attempts],
        [cast(TimerRow, dict(row)) for row in held],
        [cast(WaitRow, dict(row)) for row in open_waits],
    )


class _RunTree:
    """`RunTree` inside one transaction that holds the tree's root: snapshots of its runs."""

    def __init__(self, conn: Connection, dialect: SqlDialect, project: str) -> None:
        self._conn = conn
        self._project = project
        self._keys = _WaitKeys(conn, dialect, project)

    def snapshot(self, run_id: str) -> RunSnapshot | None:
        row = _lock(self._conn, self._project, run_id, skip_locked=False)
        return None if row is None else self.snapshot_of(row, None)

    def running_children(self, run_id: str) -> list[str]:
        c = runs.c
        found = self._conn.execute(
            select(c.run_id)
            .where(c.project == self._project, c.parent_run_id == run_id, c.status == "running")
            .order_by(c.run_id)
        )
        return [str(row.run_id) for row in found]

    def totals(self, root_run_id: str) -> tuple[int, float]:
        c = runs.c
        steps, cost = self._conn.execute(
            select(
                func.coalesce(func.sum(c.steps_used), 0), func.coalesce(func.sum(c.cost_usd), 0)
            ).where(c.project == self._project, c.root_run_id == root_run_id)
        ).one()
        return int(steps), float(cost)

    def new(self, run: RunRow) -> RunSnapshot:
        """The snapshot of a run not stored yet."""
        return RunSnapshot(
            run=run, attempts=[], timers=[], waits=[], wait_keys=self._keys, tree=self
        )

    def snapshot_of(self, run: RunRow, lease_id: str | None) -> RunSnapshot:
        conn, run_id = self._conn, run["run_id"]
        attempts, held, open_waits = read_journal(conn, run_id)
        lease = None
        if lease_id is not None:
            row = (
                conn.execute(
                    select(*[c for c in leases.c if c.name != "project"]).where(
                        leases.c.lease_id == lease_id, leases.c.run_id == run_id
                    )
                )
                .mappings()
                .first()
            )
            lease = None if row is None else cast(LeaseRow, dict(row))
        return RunSnapshot(
            run=run,
            attempts=attempts,
            timers=held,
            waits=open_waits,
            lease=lease,
            wait_keys=self._keys,
            tree=self,
        )


def apply_changes(
    conn: Connection,
    dialect: SqlDialect,
    project: str,
    run_id: str,
    changes: RunChanges,
    *,
    now: int,
) -> None:
    """Write one transition's changes of the run (see `RunChanges`), then those of the runs
    it started and of the other runs of its tree it moved."""
    if changes.run:
        conn.execute(update(runs).where(runs.c.run_id == run_id).values(**changes.run))
    a = step_attempts.c
    for step_key, attempt, columns in changes.attempt_updates:
        conn.execute(
            update(step_attempts)
            .where(a.run_id == run_id, a.step_key == step_key, a.attempt == attempt)
            .values(**columns)
        )
    if changes.new_attempts:
        conn.execute(
            insert(step_attempts), [{"project": project, **row} for row in changes.new_attempts]
        )
    t = timers.c
    if changes.drop_timers_and_waits:
        conn.execute(delete(timers).where(t.run_id == run_id))
        conn.execute(delete(waits).where(waits.c.run_id == run_id))
    replaced = [(row["kind"], row["step_key"]) for row in changes.timers_set]
    for kind, step_key in [*changes.timers_cleared, *replaced]:
        conn.execute(
            delete(timers).where(t.run_id == run_id, t.kind == kind, t.step_key == step_key)
        )
    if changes.timers_set:
        conn.execute(insert(timers), [{"project": project, **row} for row in changes.timers_set])
    w = waits.c
    for step_key in changes.waits_closed:
        conn.execute(delete(waits).where(w.run_id == run_id, w.step_key == step_key))
    if changes.new_waits:
        conn.execute(insert(waits), [{"project": project, **row} for row in changes.new_waits])
    for event_id, target in changes.event_ids:
        if not take_key(conn, dialect, project, EVENT_SCOPE, event_id, target, now=now):
            raise AlreadyExists(f"event {event_id} was published before", field="event_id")
    if changes.new_leases:
        conn.execute(insert(leases), [{"project": project, **row} for row in changes.new_leases])
    for lease_id, outcome in changes.lease_outcomes:
        conn.execute(update(leases).where(leases.c.lease_id == lease_id).values(outcome=outcome))
    append_events(conn, project, run_id, changes.events, at=now)
    if changes.spans:
        conn.execute(
            insert(span_outbox),
            [
                {
                    "outbox_id": new_id(),
                    "project": project,
                    "run_id": run_id,
                    "span": span,
                    "created_at": now,
                }
                for span in changes.spans
            ],
        )
    for child, first in changes.new_runs:
        conn.execute(insert(runs), [dict(child)])
        apply_changes(conn, dialect, project, child["run_id"], first, now=now)
    for other, moved in changes.others.items():
        apply_changes(conn, dialect, project, other, moved, now=now)


def append_events(
    conn: Connection, project: str, run_id: str, events: Sequence[tuple[str, Any]], *, at: int
) -> None:
    """Append (kind, payload) rows to the run's event log, numbered from its header in the
    transaction that writes them, so the log has no gaps and commits in order."""
    if not events:
        return
    header = runs.c
    first = conn.execute(
        update(runs)
        .where(header.run_id == run_id, header.project == project)
        .values(next_event_seq=header.next_event_seq + len(events))
        .returning(header.next_event_seq)
    ).scalar_one() - len(events)
    rows = [
        {
            "project": project,
            "run_id": run_id,
            "seq": first + n,
            "kind": kind,
            "payload": payload,
            "at": at,
        }
        for n, (kind, payload) in enumerate(events)
    ]
    conn.execute(insert(run_events), rows)


def claimable(
    conn: Connection, project: str, *, run_id: str | None, limit: int
) -> list[tuple[str, str, int]]:
    """Up to `limit` (run_id, step_key, attempt) of the project's offerable attempts, oldest
    first: pending claimable steps (not a node's `wait` row) with no retry timer still holding
    the step."""
    a, t = step_attempts.c, timers.c
    held = exists().where(t.run_id == a.run_id, t.step_key == a.step_key, t.kind == "retry")
    statement = select(a.run_id, a.step_key, a.attempt).where(
        a.project == project, a.status == "pending", a.kind != "wait", ~held
    )
    if run_id is not None:
        statement = statement.where(a.run_id == run_id)
    statement = statement.order_by(a.created_at, a.run_id, a.step_key).limit(limit)
    return [(row.run_id, row.step_key, row.attempt) for row in conn.execute(statement)]


def due_timers(conn: Connection, *, now: int, limit: int) -> list[tuple[str, TimerRow]]:
    """Up to `limit` (project, timer) that have come due by `now`, across projects, soonest
    first."""
    t = timers.c
    statement = (
        select(t.project, *_TIMER_COLUMNS, t.due_at)
        .where(t.due_at <= now)
        .order_by(t.due_at, t.run_id, t.kind)
        .limit(limit)
    )
    found: list[tuple[str, TimerRow]] = []
    for row in conn.execute(statement).mappings():
        fields: dict[str, Any] = dict(row)
        project = fields.pop("project")
        found.append((project, cast(TimerRow, fields)))
    return found


def lease_run(conn: Connection, project: str, lease_id: str) -> str | None:
    """The run of the project's lease `lease_id`, or None."""
    c = leases.c
    found = conn.execute(
        select(c.run_id).where(and_(c.project == project, c.lease_id == lease_id))
    ).scalar_one_or_none()
    return None if found is None else str(found)


def take_key(
    conn: Connection,
    dialect: SqlDialect,
    project: str,
    scope: str,
    key: str,
    target: str,
    *,
    now: int,
    ttl_ns: int = KEY_TTL_NS,
) -> bool:
    """Take an idempotency key of `scope` for `target`; False when another holds it unexpired
    (an expired one is deleted first and taken afresh)."""
    c = idempotency_keys.c
    where = (c.project == project, c.scope == scope, c.key == key)
    conn.execute(delete(idempotency_keys).where(*where, c.expires_at <= now))
    row = {
        "project": project,
        "scope": scope,
        "key": key,
        "target": target,
        "created_at": now,
        "expires_at": now + ttl_ns,
    }
    taken = conn.execute(insert_ignore(idempotency_keys, dialect).values(row).returning(c.key))
    return taken.first() is not None


def waiting(conn: Connection, project: str, event: str, key: str) -> list[tuple[str, str]]:
    """(run_id, step_key) of the project's open waits on (event, key), soonest to expire first."""
    w = waits.c
    found = conn.execute(
        select(w.run_id, w.step_key)
        .where(w.project == project, w.event == event, w.key == key)
        .order_by(w.expires_at, w.run_id)
    )
    return [(row.run_id, row.step_key) for row in found]


def park_event(
    conn: Connection,
    dialect: SqlDialect,
    project: str,
    parked: ParkedEventRow,
    *,
    supplied: bool,
    now: int,
) -> str:
    """Park an event no run waits for: 'parked'; 'duplicate' for an id seen before (a supplied
    one among published ids, a derived one among parked events); 'waiting' when a matching wait
    opened meanwhile (deliver to it instead), under the (event, key) hold."""
    _WaitKeys(conn, dialect, project).hold(parked["event"], parked["key"])
    if waiting(conn, project, parked["event"], parked["key"]):
        return "waiting"
    if supplied and not take_key(
        conn, dialect, project, EVENT_SCOPE, parked["event_id"], "parked", now=now
    ):
        return "duplicate"
    p = parked_events.c
    conn.execute(delete(parked_events).where(p.project == project, p.expires_at <= now))
    stored = conn.execute(
        insert_ignore(parked_events, dialect)
        .values({"project": project, **parked})
        .returning(p.event_id)
    )
    return "parked" if stored.first() is not None else "duplicate"


class _WaitKeys:
    """`WaitKeys` inside one transaction: the hold is a transaction-scoped advisory lock on
    PostgreSQL; SQLite's single writer holds every key already."""

    def __init__(self, conn: Connection, dialect: SqlDialect, project: str) -> None:
        self._conn = conn
        self._dialect = dialect
        self._project = project

    def hold(self, event: str, key: str) -> None:
        if self._dialect is SqlDialect.POSTGRES:
            name = "\x1f".join((self._project, event, key))
            self._conn.execute(
                text("SELECT pg_advisory_xact_lock(hashtextextended(:name, 0))"), {"name": name}
            )

    def take_parked(self, event: str, key: str, *, now: int) -> ParkedEventRow | None:
        self.hold(event, key)
        p = parked_events.c
        row = (
            self._conn.execute(
                select(p.event_id, p.event, p.key, p.payload, p.parked_at, p.expires_at)
                .where(
                    p.project == self._project,
                    p.event == event,
                    p.key == key,
                    p.expires_at > now,
                )
                .order_by(p.parked_at, p.event_id)
                .limit(1)
            )
            .mappings()
            .first()
        )
        if row is None:
            return None
        self._conn.execute(
            delete(parked_events).where(p.project == self._project, p.event_id == row["event_id"])
        )
        return cast(ParkedEventRow, dict(row))


def queued_spans(conn: Connection, *, limit: int) -> list[tuple[str, Any]]:
    """Up to `limit` (outbox_id, span) waiting for ingest, oldest first, across projects."""
    o = span_outbox.c
    found = conn.execute(select(o.outbox_id, o.span).order_by(o.outbox_id).limit(limit))
    return [(str(row.outbox_id), row.span) for row in found]


def sent_spans(conn: Connection, outbox_ids: Sequence[str]) -> None:
    """Forget the spans ingest has."""
    if outbox_ids:
        conn.execute(delete(span_outbox).where(span_outbox.c.outbox_id.in_(list(outbox_ids))))
