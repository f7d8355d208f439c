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

from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar, cast

from sqlalchemy import (
    Connection,
    Table,
    bindparam,
    delete,
    exists,
    func,
    insert,
    select,
    text,
    update,
)

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
from mcpd.storage.sql.dialect import SqlDialect, insert_ignore, upsert
from mcpd.storage.sql.driver import DriverStatement
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
    "apply_changes",
    "claimable",
    "due_timers",
    "first_transition",
    "lease_transition",
    "park_event",
    "queued_spans",
    "read_journal",
    "sent_spans",
    "stored_run",
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

# The statements of the transitions' hot path, built once with bound parameters and run on the
# driver's cursor (`DriverStatement`): through SQLAlchemy's execution each would cost more than
# SQLite takes to run it, inside the write lock. Parameters are named `p_<column>`, apart from
# the columns an INSERT or UPDATE writes, which take the columns' own names.
_R, _A, _T, _W, _L = runs.c, step_attempts.c, timers.c, waits.c, leases.c
_RUN = (_R.project == bindparam("p_project"), _R.run_id == bindparam("p_run_id"))
_ROOT_OF = DriverStatement(select(_R.root_run_id).where(*_RUN))
_RUN_ROW = DriverStatement(select(runs).where(*_RUN))
_LOCK = {
    skip: DriverStatement(select(runs).where(*_RUN).with_for_update(skip_locked=skip))
    for skip in (False, True)
}
_JOURNAL_ATTEMPTS = DriverStatement(
    select(*_ATTEMPT_COLUMNS)
    .where(_A.run_id == bindparam("p_run_id"))
    .order_by(_A.created_at, _A.attempt)
)
_JOURNAL_TIMERS = DriverStatement(
    select(*_TIMER_COLUMNS, _T.due_at)
    .where(_T.run_id == bindparam("p_run_id"))
    .order_by(_T.due_at, _T.kind, _T.step_key)
)
_JOURNAL_WAITS = DriverStatement(
    select(_W.run_id, _W.step_key, _W.event, _W.key, _W.expires_at)
    .where(_W.run_id == bindparam("p_run_id"))
    .order_by(_W.step_key)
)
_LEASE_OF_PROJECT = DriverStatement(
    select(*[c for c in leases.c if c.name != "project"]).where(
        _L.project == bindparam("p_project"), _L.lease_id == bindparam("p_lease_id")
    )
)
_UPDATE_RUN = DriverStatement(update(runs).where(_R.run_id == bindparam("p_run_id")))
_UPDATE_ATTEMPT = DriverStatement(
    update(step_attempts).where(
        _A.run_id == bindparam("p_run_id"),
        _A.step_key == bindparam("p_step_key"),
        _A.attempt == bindparam("p_attempt"),
    )
)
_DROP_TIMERS = DriverStatement(delete(timers).where(_T.run_id == bindparam("p_run_id")))
_DROP_WAITS = DriverStatement(delete(waits).where(_W.run_id == bindparam("p_run_id")))
_DELETE_TIMER = DriverStatement(
    delete(timers).where(
        _T.run_id == bindparam("p_run_id"),
        _T.kind == bindparam("p_kind"),
        _T.step_key == bindparam("p_step_key"),
    )
)
_DELETE_WAIT = DriverStatement(
    delete(waits).where(_W.run_id == bindparam("p_run_id"), _W.step_key == bindparam("p_step_key"))
)
_SET_TIMER = {
    dialect: DriverStatement(upsert(timers, dialect, ("attempt", "due_at")))
    for dialect in SqlDialect
}
_LEASE_OUTCOME = DriverStatement(update(leases).where(_L.lease_id == bindparam("p_lease_id")))
_INSERT: dict[Table, DriverStatement] = {
    table: DriverStatement(insert(table))
    for table in (runs, step_attempts, waits, leases, span_outbox, run_events)
}
_TREE_TOTALS = DriverStatement(
    select(
        func.coalesce(func.sum(_R.steps_used), 0).label("steps"),
        func.coalesce(func.sum(_R.cost_usd), 0).label("cost"),
    ).where(_R.project == bindparam("p_project"), _R.root_run_id == bindparam("p_root_run_id"))
)
_RUNNING_CHILDREN = DriverStatement(
    select(_R.run_id)
    .where(
        _R.project == bindparam("p_project"),
        _R.parent_run_id == bindparam("p_parent_run_id"),
        _R.status == "running",
    )
    .order_by(_R.run_id)
)
_CLAIMABLE_WHERE = (
    _A.project == bindparam("p_project"),
    _A.status == "pending",
    _A.kind != "wait",
    ~exists().where(_T.run_id == _A.run_id, _T.step_key == _A.step_key, _T.kind == "retry"),
)
_OFFERABLE = {
    in_run: select(_A.run_id, _A.step_key, _A.attempt)
    .where(*_CLAIMABLE_WHERE, *((_A.run_id == bindparam("p_run_id"),) if in_run else ()))
    .order_by(_A.created_at, _A.run_id, _A.step_key)
    .limit(bindparam("p_limit"))
    for in_run in (False, True)
}
# By (in one run, locked). What a claim leases is locked: on PostgreSQL the rows stay locked to
# the claim, and one that another claim holds is passed over for the next (SQLite renders no
# FOR UPDATE: its writers take turns).
_CLAIMABLE = {
    (in_run, lock): DriverStatement(
        statement.with_for_update(skip_locked=True) if lock else statement
    )
    for in_run, statement in _OFFERABLE.items()
    for lock in (False, True)
}
_NEXT_EVENT_SEQ = DriverStatement(
    update(runs)
    .where(*_RUN)
    .values(next_event_seq=_R.next_event_seq + bindparam("p_count"))
    .returning(_R.next_event_seq)
)


def transition(
    conn: Connection,
    dialect: SqlDialect,
    project: str,
    run_id: str,
    decide: Decide[T],
    *,
    now: int,
    skip_locked: bool = False,
) -> T | None:
    """Lock the run's tree, read its snapshot, apply what `decide` answers and return the rest
    of its answer; None (deciding nothing) when the run does not exist or, with `skip_locked`,
    another transaction holds the tree."""
    locked = _lock_tree(conn, dialect, project, run_id, skip_locked=skip_locked)
    if locked is None:
        return None
    tree = _RunTree(conn, dialect, project)
    changes, answer = decide(tree.snapshot_of(locked, None))
    apply_changes(conn, dialect, project, run_id, changes, now=now)
    return answer


def lease_transition(
    conn: Connection,
    dialect: SqlDialect,
    project: str,
    lease_id: str,
    decide: Decide[T],
    *,
    now: int,
) -> T | None:
    """`transition` of the run the project's lease `lease_id` belongs to, with the lease in the
    snapshot; None when there is no such lease."""
    where = {"p_project": project, "p_lease_id": lease_id}
    found = _LEASE_OF_PROJECT.first(conn, where)
    if found is None:
        return None
    run_id = found["run_id"]
    locked = _lock_tree(conn, dialect, project, run_id, skip_locked=False)
    if locked is None:
        return None
    lease = cast(LeaseRow, found)
    if dialect is SqlDialect.POSTGRES:
        # Read before the lock, its outcome may be stale: another call of this lease may have
        # landed in between. SQLite's single writer has let none in since.
        lease = cast(LeaseRow, _LEASE_OF_PROJECT.first(conn, where))
    tree = _RunTree(conn, dialect, project)
    changes, answer = decide(tree.snapshot_of(locked, lease))
    apply_changes(conn, dialect, project, run_id, changes, now=now)
    return answer


def _lock_tree(
    conn: Connection, dialect: SqlDialect, project: str, run_id: str, *, skip_locked: bool
) -> RunRow | None:
    """The run's row, its tree locked: on PostgreSQL the root's row first, then its own; on
    SQLite the transaction's write lock holds every row already."""
    if dialect is SqlDialect.SQLITE:
        return _lock(conn, project, run_id, skip_locked=skip_locked)
    found = _ROOT_OF.first(conn, {"p_project": project, "p_run_id": run_id})
    if found is None:
        return None
    root = found["root_run_id"]
    if root != run_id and _lock(conn, project, root, skip_locked=skip_locked) is None:
        return None
    return _lock(conn, project, run_id, skip_locked=skip_locked)


def _lock(conn: Connection, project: str, run_id: str, *, skip_locked: bool) -> RunRow | None:
    where = {"p_project": project, "p_run_id": run_id}
    return cast(RunRow | None, _LOCK[skip_locked].first(conn, where))


def stored_run(conn: Connection, project: str, run_id: str) -> RunRow | None:
    """The project's run `run_id` as stored, or None (read without a lock)."""
    return cast(RunRow | None, _RUN_ROW.first(conn, {"p_project": project, "p_run_id": run_id}))


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
    where = {"p_run_id": run_id}
    return (
        cast(list[AttemptRow], _JOURNAL_ATTEMPTS.rows(conn, where)),
        cast(list[TimerRow], _JOURNAL_TIMERS.rows(conn, where)),
        cast(list[WaitRow], _JOURNAL_WAITS.rows(conn, where)),
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
        where = {"p_project": self._project, "p_parent_run_id": run_id}
        return [str(row["run_id"]) for row in _RUNNING_CHILDREN.rows(self._conn, where)]

    def totals(self, root_run_id: str) -> tuple[int, float]:
        where = {"p_project": self._project, "p_root_run_id": root_run_id}
        found = _TREE_TOTALS.rows(self._conn, where)[0]
        return int(found["steps"]), float(found["cost"])

    def new(self, run: RunRow) -> RunSnapshot:
        """The snapshot of a run not stored yet."""
        return RunSnapshot(
            run=run, attempts=[], timers=[], waits=[], wait_keys=self._keys, tree=self
        )

    def snapshot_of(self, run: RunRow, lease: LeaseRow | None) -> RunSnapshot:
        attempts, held, open_waits = read_journal(self._conn, run["run_id"])
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
    it started and of the other runs of its tree it moved. Rows of one kind go in one
    executemany: a statement's round costs more than SQLite's work."""
    on_run = {"p_run_id": run_id}
    _update_run(conn, project, run_id, changes, at=now)
    for keys in _attempt_updates(changes.attempt_updates).values():
        _UPDATE_ATTEMPT.executemany(conn, [{**on_run, **key} for key in keys])
    _insert(conn, step_attempts, project, changes.new_attempts)
    if changes.drop_timers_and_waits:
        _DROP_TIMERS.execute(conn, on_run)
        _DROP_WAITS.execute(conn, on_run)
    _DELETE_TIMER.executemany(
        conn,
        [
            {**on_run, "p_kind": kind, "p_step_key": step_key}
            for kind, step_key in changes.timers_cleared
        ],
    )
    # A timer set replaces the run's timer of its kind and step, if there is one.
    _SET_TIMER[dialect].executemany(
        conn, [{"project": project, **row} for row in changes.timers_set]
    )
    _DELETE_WAIT.executemany(
        conn, [{**on_run, "p_step_key": step_key} for step_key in changes.waits_closed]
    )
    _insert(conn, waits, project, changes.new_waits)
    for event_id, target in changes.event_ids:
        if not take_key(conn, dialect, project, EVENT_SCOPE, event_id, target, now=now):
            raise AlreadyExists(f"event {event_id} was published before", field="event_id")
    _insert(conn, leases, project, changes.new_leases)
    _LEASE_OUTCOME.executemany(
        conn,
        [
            {"p_lease_id": lease_id, "outcome": outcome}
            for lease_id, outcome in changes.lease_outcomes
        ],
    )
    _INSERT[span_outbox].executemany(
        conn,
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
        insert_run(conn, child)
        apply_changes(conn, dialect, project, child["run_id"], first, now=now)
    for other, moved in changes.others.items():
        apply_changes(conn, dialect, project, other, moved, now=now)


def insert_run(conn: Connection, run: RunRow) -> None:
    """Store a new run's row."""
    _INSERT[runs].execute(conn, run)


def _insert(
    conn: Connection, table: Table, project: str, rows: Sequence[Mapping[str, Any]]
) -> None:
    """Insert the project's `rows` into `table` (which keys every row by project)."""
    _INSERT[table].executemany(conn, [{"project": project, **row} for row in rows])


def _update_run(
    conn: Connection, project: str, run_id: str, changes: RunChanges, *, at: int
) -> None:
    """The run row's changed columns and its event log rows, the header's `next_event_seq`
    moved on in the same UPDATE."""
    if changes.events:
        _append_events(conn, project, run_id, changes.events, at=at, columns=changes.run)
    elif changes.run:
        _UPDATE_RUN.execute(conn, {"p_run_id": run_id, **changes.run})


def _attempt_updates(
    updates: Sequence[tuple[str, int, dict[str, Any]]],
) -> dict[tuple[str, ...], list[dict[str, Any]]]:
    """The parameters of the attempts' UPDATEs, one set of columns per attempt (later changes
    of a column win), grouped by the columns they set."""
    merged: dict[tuple[str, int], dict[str, Any]] = {}
    for step_key, attempt, columns in updates:
        merged.setdefault((step_key, attempt), {}).update(columns)
    grouped: dict[tuple[str, ...], list[dict[str, Any]]] = {}
    for (step_key, attempt), columns in merged.items():
        grouped.setdefault(tuple(sorted(columns)), []).append(
            {"p_step_key": step_key, "p_attempt": attempt, **columns}
        )
    return grouped


def _append_events(
    conn: Connection,
    project: str,
    run_id: str,
    events: Sequence[tuple[str, Any]],
    *,
    at: int,
    columns: dict[str, Any],
) -> None:
    """Append (kind, payload) rows to the run's event log, numbered from its header in the
    transaction that writes them, so the log has no gaps and commits in order; the run row's
    changed `columns` are set in the UPDATE that numbers them."""
    where = {"p_project": project, "p_run_id": run_id, "p_count": len(events)}
    numbered = _NEXT_EVENT_SEQ.first(conn, {**where, **columns})
    assert numbered is not None, "a run's events are appended under its lock"
    first = numbered["next_event_seq"] - len(events)
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
    _INSERT[run_events].executemany(conn, rows)


def claimable(
    conn: Connection, project: str, *, run_id: str | None, limit: int, lock: bool = False
) -> list[tuple[str, str, int]]:
    """Up to `limit` (run_id, step_key, attempt) of the project's offerable attempts, oldest
    first: pending claimable steps (not a node's `wait` row) with no retry timer still holding
    the step. With `lock` (in a write transaction) the rows are locked, skipping locked ones."""
    where = {"p_project": project, "p_limit": limit}
    if run_id is not None:
        where["p_run_id"] = run_id
    found = _CLAIMABLE[(run_id is not None, lock)].rows(conn, where)
    return [(row["run_id"], row["step_key"], row["attempt"]) for row in found]


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
