"""The run store's tables on SQLite and PostgreSQL.

From the spec's Definition, Run, StepAttempt and RunEvent entities (definitions, runs,
step_attempts, run_events), RunTimer and RunWait (timers, waits), and what the orchestrator
needs to keep besides: the leases handed to workers (leases), the spans waiting to reach ingest
(span_outbox), events held for a later wait (parked_events) and idempotency keys for starts and
published events (idempotency_keys).

Run ids are minted by the daemon, so `runs` keeps the spec's key (`run_id`); every row still
carries its `project`. The journal tables reference their run with ON DELETE CASCADE so that
erasing a run removes its attempts, events, deadlines and waits in the same statement.
"""

from __future__ import annotations

from sqlalchemy import (
    Column,
    Double,
    ForeignKey,
    ForeignKeyConstraint,
    Integer,
    PrimaryKeyConstraint,
    Table,
    Text,
)

from mcpd.storage.sql.schema._common import correlation_columns, index, new_metadata
from mcpd.storage.sql.types import Count, JsonDocument, TimestampNs

metadata = new_metadata()


def _run_fk() -> Column[str]:
    return Column(
        "run_id",
        Text,
        ForeignKey("runs.run_id", ondelete="CASCADE"),
        nullable=False,
    )


definitions = Table(
    "definitions",
    metadata,
    Column("project", Text, nullable=False),
    Column("id", Text, nullable=False),
    Column("version", Integer, nullable=False),
    Column("kind", Text, nullable=False),
    Column("body", JsonDocument, nullable=False),
    Column("created_at", TimestampNs, nullable=False),
    # SHA-256 of the kind and canonical body: the versioning rule's lookup of an identical body.
    Column("body_digest", Text),
    PrimaryKeyConstraint("project", "id", "version"),
    index("definitions", "project", "id", "body_digest"),
)

runs = Table(
    "runs",
    metadata,
    Column("run_id", Text, nullable=False),
    Column("project", Text, nullable=False),
    Column("definition_id", Text, nullable=False),
    Column("definition_version", Integer, nullable=False),
    Column("status", Text, nullable=False),
    # RunCursor, flattened: the walker reads and moves it on every transition.
    Column("cursor_index", Integer, nullable=False),
    Column("cursor_construct", Text, nullable=False),
    Column("cursor_step_key", Text),
    Column("input", JsonDocument),
    Column("output", JsonDocument),
    Column("state", JsonDocument),
    Column("error", Text),
    # Correlation as stored at start. Its run_id is this run's own id, so it is not repeated.
    *correlation_columns(exclude=("run_id",)),
    Column("trace_id", Text, nullable=False),
    Column("steps_used", Integer, nullable=False),
    Column("max_steps", Integer),
    Column("cost_usd", Double, nullable=False),
    Column("max_cost_usd", Double),
    Column("deadline_at", TimestampNs),
    Column("idempotency_key", Text),
    Column("root_run_id", Text, nullable=False),
    Column("parent_run_id", Text),
    Column("parent_step_key", Text),
    Column("depth", Integer, nullable=False),
    # The next RunEvent.seq to hand out. Allocated from the run header inside the writing
    # transaction, so a run's event log has no gaps and commits in order.
    Column("next_event_seq", Count, nullable=False),
    Column("created_at", TimestampNs, nullable=False),
    Column("updated_at", TimestampNs, nullable=False),
    Column("ended_at", TimestampNs),
    PrimaryKeyConstraint("run_id"),
    ForeignKeyConstraint(
        ["project", "definition_id", "definition_version"],
        ["definitions.project", "definitions.id", "definitions.version"],
    ),
    index("runs", "project", "created_at"),
    index("runs", "project", "status", "created_at"),
    index("runs", "project", "definition_id", "definition_version", "created_at"),
    index("runs", "project", "user_id"),
    # The run watches' window: the runs that ended in it, and (ended_at NULL) those still running.
    index("runs", "project", "ended_at"),
    index("runs", "root_run_id"),
    index("runs", "parent_run_id"),
)

step_attempts = Table(
    "step_attempts",
    metadata,
    Column("project", Text, nullable=False),
    _run_fk(),
    Column("step_key", Text, nullable=False),
    Column("attempt", Integer, nullable=False),
    Column("kind", Text, nullable=False),
    Column("effect", Text, nullable=False),
    Column("status", Text, nullable=False),
    Column("input", JsonDocument),
    Column("output", JsonDocument),
    Column("error", JsonDocument),
    Column("usage", JsonDocument),
    Column("cost_usd", Double),
    Column("span_id", Text, nullable=False),
    Column("lease_owner", Text),
    # The lease that holds the attempt now (a `leases` row); NULL while none does.
    Column("lease_id", Text),
    Column("lease_until", TimestampNs),
    Column("started_at", TimestampNs),
    Column("orphaned_at", TimestampNs),
    Column("reclaim_until", TimestampNs),
    Column("attempts_left", Integer),
    Column("ended_at", TimestampNs),
    Column("created_at", TimestampNs, nullable=False),
    PrimaryKeyConstraint("run_id", "step_key", "attempt"),
    # Dispatch: the claimable attempts of a project, oldest first.
    index("step_attempts", "project", "status", "created_at"),
)

leases = Table(
    "leases",
    metadata,
    # Every lease ever handed out for an attempt: an attempt leased again (after `unservable` or
    # a reclaim) gets a new one, so a call about an old lease is told `fenced` from
    # `already_applied` by the lease's own `outcome`.
    Column("lease_id", Text, nullable=False),
    Column("project", Text, nullable=False),
    _run_fk(),
    Column("step_key", Text, nullable=False),
    Column("attempt", Integer, nullable=False),
    Column("worker_id", Text, nullable=False),
    Column("issued_at", TimestampNs, nullable=False),
    # 'completed' or 'failed' once this lease's own complete or fail landed; NULL before.
    Column("outcome", Text),
    PrimaryKeyConstraint("lease_id"),
    index("leases", "run_id", "step_key", "attempt"),
)

span_outbox = Table(
    "span_outbox",
    metadata,
    # The spans of runs and attempts, queued in the transaction of the change they record and
    # deleted once ingest has them; a run's erasure removes its queued ones with it.
    Column("outbox_id", Text, nullable=False),
    Column("project", Text, nullable=False),
    _run_fk(),
    Column("span", JsonDocument, nullable=False),
    Column("created_at", TimestampNs, nullable=False),
    PrimaryKeyConstraint("outbox_id"),
    index("span_outbox", "run_id"),
)

run_events = Table(
    "run_events",
    metadata,
    Column("project", Text, nullable=False),
    _run_fk(),
    Column("seq", Count, nullable=False),
    Column("kind", Text, nullable=False),
    Column("payload", JsonDocument),
    Column("at", TimestampNs, nullable=False),
    PrimaryKeyConstraint("run_id", "seq"),
)

timers = Table(
    "timers",
    metadata,
    Column("project", Text, nullable=False),
    _run_fk(),
    Column("kind", Text, nullable=False),
    # '' for a run-level deadline (RunTimer.step_key absent): a key column cannot be NULL.
    Column("step_key", Text, nullable=False),
    # The attempt a lease, reclaim, step-timeout or retry timer fences on; NULL otherwise.
    Column("attempt", Integer),
    Column("due_at", TimestampNs, nullable=False),
    PrimaryKeyConstraint("run_id", "kind", "step_key"),
    # The tick: every timer that has come due, across projects.
    index("timers", "due_at"),
)

waits = Table(
    "waits",
    metadata,
    Column("project", Text, nullable=False),
    _run_fk(),
    Column("step_key", Text, nullable=False),
    Column("event", Text, nullable=False),
    Column("key", Text, nullable=False),
    Column("expires_at", TimestampNs, nullable=False),
    PrimaryKeyConstraint("run_id", "step_key"),
    # Routing a published event: the matching wait that expires soonest.
    index("waits", "project", "event", "key", "expires_at"),
)

parked_events = Table(
    "parked_events",
    metadata,
    Column("project", Text, nullable=False),
    Column("event_id", Text, nullable=False),
    Column("event", Text, nullable=False),
    Column("key", Text, nullable=False),
    Column("payload", JsonDocument),
    Column("parked_at", TimestampNs, nullable=False),
    Column("expires_at", TimestampNs, nullable=False),
    PrimaryKeyConstraint("project", "event_id"),
    index("parked_events", "project", "event", "key", "parked_at"),
    index("parked_events", "expires_at"),
)

idempotency_keys = Table(
    "idempotency_keys",
    metadata,
    Column("project", Text, nullable=False),
    # What the key deduplicates: 'start_run' or 'event'.
    Column("scope", Text, nullable=False),
    Column("key", Text, nullable=False),
    # What the first request produced (a run id, an event outcome), returned to a repost.
    Column("target", Text, nullable=False),
    Column("created_at", TimestampNs, nullable=False),
    Column("expires_at", TimestampNs, nullable=False),
    PrimaryKeyConstraint("project", "scope", "key"),
    index("idempotency_keys", "expires_at"),
)
