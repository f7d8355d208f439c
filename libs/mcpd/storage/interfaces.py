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

from typing import Protocol, runtime_checkable

from mcpd.model.v1 import account_pb2, query_pb2


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

    def ensure_project(self, project_id: str, name: str) -> None:
        """Create the project if it does not exist. An existing project is left as it is."""
        ...

    def get_project(self, project_id: str) -> account_pb2.Project | None:
        """The project, or None when there is none with this id."""
        ...

    def close(self) -> None:
        """Release connections. Idempotent; the store is unusable afterwards."""
        ...
