"""The three storage interfaces: trace store, run store, control store.

Each is a Protocol with one implementation per backend (SQLite and PostgreSQL through
SQLAlchemy Core; the trace store also on ClickHouse). The surfaces are small on purpose: this is
the lifecycle every store shares, and each feature adds the operations it needs.

All three are SYNCHRONOUS and blocking: database drivers block, and so does every method here.
Async callers (gRPC servicers, the gateway) run them in a worker thread, e.g. with
`asyncio.to_thread`, never on the event loop. Implementations are safe to call from several
threads at once (connections come from a pool, one per call).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Protocol, runtime_checkable

from mcpd.model.v1 import account_pb2, query_pb2
from mcpd.signals.batch import HeldTrace, SignalBatch, TraceRecords
from mcpd.signals.rows import SpanRow
from mcpd.storage.records import AuditPage, StoredAccount, StoredKey, StoredSession


@runtime_checkable
class TraceStore(Protocol):
    """Spans, traces, logs, metrics, scores, feedback, aspect notes, themes and facets."""

    @property
    def backend(self) -> str:
        """Which backend this is: `sqlite`, `postgres` or `clickhouse`."""
        ...

    def capabilities(self) -> query_pb2.StoreCapabilities:
        """What this backend can and cannot do, reported truthfully (see `capabilities`)."""
        ...

    def migrate(self) -> list[str]:
        """Apply pending schema migrations; return what was applied, oldest first.

        Returns an empty list, and issues no schema statement, when nothing is pending.
        """
        ...

    def pending_migrations(self) -> list[str]:
        """Migrations not yet applied, oldest first; changes nothing."""
        ...

    def write_batches(self, batches: Sequence[SignalBatch]) -> list[bool]:
        """Write several batches as ONE transaction (group commit); all of it or none of it.

        Returns, per batch in order, True when it was written and False when its
        `(key_project, ingest_key)` was already stored (by an earlier call, or by an earlier
        batch of this call): nothing of such a batch is written. Rows replace rows with the
        same primary key (a span re-sent when it ends). In the same transaction the store
        records the ingest keys, writes `held_spans` to its holding table, re-projects the
        trace row of every (project, trace_id) that a written span, score or feedback touches
        (`mcpd.signals.projection`), and upserts the facet values the rows carry
        (`mcpd.signals.facets`).
        """
        ...

    def held_traces(self) -> list[HeldTrace]:
        """A summary of every trace with spans in the holding table (tail sampling)."""
        ...

    def release_held(self, project: str, keep: Sequence[str], drop: Sequence[str]) -> int:
        """Tail sampling's decision, in one transaction: the held spans of the `keep` traces
        move into `spans` (projection and facets maintained as in `write_batches`), those of
        the `drop` traces are deleted. Returns how many spans moved."""
        ...

    def trace_records(
        self, project: str, trace_id: str, *, logs: bool, scores: bool, feedback: bool
    ) -> TraceRecords | None:
        """One trace of one project with its spans (and, as asked, logs, scores and
        feedback), in the order `TraceRecords` documents; None when the project holds no
        trace row with this id."""
        ...

    def facet_value_count(self, project: str, facet: str, key: str) -> int:
        """How many distinct values the facet table holds for (project, facet, key); `key` is
        '' for every facet but `metric_label_value`."""
        ...

    def session_spans(self, project: str, session_id: str, *, limit: int) -> list[SpanRow]:
        """The spans of one project whose `session_id` (correlation) is `session_id`, across
        all its traces, ordered by start time, then span id, then trace id.

        At most `limit` of them: when the session holds more, the NEWEST `limit` (the last ones
        in that order), still in ascending order, so an oversized session loses its oldest
        spans first. An empty `session_id` or a `limit` below 1 gives []. Held (tail-sampled,
        undecided) spans are not included.
        """
        ...

    def close(self) -> None:
        """Release connections. Idempotent; the store is unusable afterwards."""
        ...


@runtime_checkable
class RunStore(Protocol):
    """Definitions, runs, step attempts, run events, timers, waits, parked events, idempotency."""

    @property
    def backend(self) -> str:
        """Which backend this is: `sqlite` or `postgres`."""
        ...

    def migrate(self) -> list[str]:
        """Apply pending schema migrations; return what was applied, oldest first."""
        ...

    def pending_migrations(self) -> list[str]:
        """Migrations not yet applied, oldest first; changes nothing."""
        ...

    def close(self) -> None:
        """Release connections. Idempotent; the store is unusable afterwards."""
        ...


@runtime_checkable
class ControlStore(Protocol):
    """Projects, accounts, API key digests, sessions, the audit log and the price book."""

    @property
    def backend(self) -> str:
        """Which backend this is: `sqlite` or `postgres`."""
        ...

    def migrate(self) -> list[str]:
        """Apply pending schema migrations; return what was applied, oldest first."""
        ...

    def pending_migrations(self) -> list[str]:
        """Migrations not yet applied, oldest first; changes nothing."""
        ...

    def create_account(self, account: StoredAccount, project_name: str) -> None:
        """Store a new account and create its project, in one transaction.

        Raises AlreadyExists (field `email`) when the email is taken.
        """
        ...

    def find_account(self, email: str) -> StoredAccount | None:
        """The account with this normalised email, or None."""
        ...

    def create_session(self, session: StoredSession) -> None:
        """Store a session (its token's digest, never the token)."""
        ...

    def find_session(self, token_digest: str) -> StoredSession | None:
        """The session whose token has this SHA-256 digest, expired or not, or None."""
        ...

    def delete_expired_sessions(self, now: datetime) -> int:
        """Remove sessions that expired before `now`; return how many."""
        ...

    def create_key(self, key: StoredKey) -> None:
        """Store an API key (its digest, never the secret)."""
        ...

    def find_key(self, digest: str) -> StoredKey | None:
        """The key whose secret has this SHA-256 digest, revoked or not, or None."""
        ...

    def list_keys(self, account_email: str) -> list[StoredKey]:
        """The account's keys that are not revoked, newest first."""
        ...

    def revoke_key(self, account_email: str, key_id: str, now: datetime) -> StoredKey:
        """Revoke one of the account's keys; NotFound (field `id`) when it has no such key."""
        ...

    def has_credentials(self) -> bool:
        """Whether any account or unrevoked key exists (local mode ends when one does)."""
        ...

    def append_audit(self, events: Sequence[account_pb2.AuditEvent]) -> None:
        """Append audit events in one transaction. Nothing ever deletes them."""
        ...

    def list_audit(self, project: str, *, cursor: str | None, limit: int) -> AuditPage:
        """A project's audit events, newest first, `limit` per page.

        `cursor` is the opaque `next_cursor` of the previous page; a malformed one raises
        InvalidArgument (field `cursor`).
        """
        ...

    def ensure_project(self, project_id: str, name: str) -> None:
        """Create the project if it does not exist. An existing project is left as it is."""
        ...

    def get_project(self, project_id: str) -> account_pb2.Project | None:
        """The project, or None when there is none with this id."""
        ...

    def configure_project(self, project: account_pb2.Project) -> None:
        """Create or update a project's name, retention, sampling, redaction, budget and
        metadata from configuration (absent JSON fields cleared); created_at is kept."""
        ...

    def set_price_overrides(
        self, project_id: str, prices: Mapping[str, Mapping[str, float]], currency: str = "USD"
    ) -> int:
        """Record the project's price overrides (model -> meter -> price per million tokens)
        as new price-book rows effective now, for the meters whose price changed; return how
        many rows were added. Price rows are never updated."""
        ...

    def price_overrides(self, project_id: str) -> dict[str, dict[str, float]]:
        """The project's current price override per model and meter."""
        ...

    def close(self) -> None:
        """Release connections. Idempotent; the store is unusable afterwards."""
        ...
