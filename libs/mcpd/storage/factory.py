"""Opening the stores from configuration: the one place backends are chosen.

A process opens the stores its roles need (`stores`: some of `STORE_NAMES`) and no other, so a
role cannot reach data it does not own: the composition root keeps the table of which role needs
which.

`storage.backend` picks the trace store: `sqlite` (a file under the data directory),
`postgres` (at `storage.postgres_url`) or `clickhouse` (at `storage.clickhouse_url`). The run
and control stores live on PostgreSQL whenever `storage.postgres_url` is set, and otherwise in
SQLite files under the data directory: they are small, transactional and the same on every
deployment, and PostgreSQL is their scale-out path. Every store is migrated on open.

The session read model (`Stores.sessions`) lives in the trace store's database: on SQLite it
searches with a tantivy index under `<data_dir>/search/events`, reconciled with the database on
open; on PostgreSQL with its full-text search; on ClickHouse in tables of the trace database
(migration 0002), ranked with BM25 inside ClickHouse over a text index
(`mcpd.storage.clickhouse.sessions`).
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Protocol, TypeVar

from sqlalchemy.engine import URL, Engine
from sqlalchemy.exc import ArgumentError, OperationalError

from mcpd.runtime.clock import Clock
from mcpd.runtime.errors import InvalidArgument, Unavailable
from mcpd.sessions.store import SessionStore
from mcpd.storage.clickhouse.executor import open_executor
from mcpd.storage.clickhouse.sessions import ClickHouseSessionStore
from mcpd.storage.clickhouse.store import ClickHouseTraceStore
from mcpd.storage.interfaces import ControlStore, MigratedStore, RunStore, TraceStore
from mcpd.storage.sql.control_store import SqlControlStore
from mcpd.storage.sql.engine import (
    Synchronous,
    create_postgres_engine,
    create_sqlite_engine,
    postgres_url,
)
from mcpd.storage.sql.sessions import SqlSessionStore
from mcpd.storage.sql.stores import SqlRunStore, SqlTraceStore

BACKENDS = ("sqlite", "postgres", "clickhouse")
STORE_NAMES = frozenset({"trace", "run", "control"})
BACKEND_SETTING = "storage.backend"
POSTGRES_SETTING = "storage.postgres_url"
CLICKHOUSE_SETTING = "storage.clickhouse_url"

# File names under the data directory, one database per store.
TRACE_DB = "trace.db"
RUN_DB = "run.db"
CONTROL_DB = "control.db"
# Each trace-store connection's SQLite page cache (`engine` documents why it is not the default).
TRACE_CACHE_MIB = 32
# The embedded session search index, under the data directory.
SESSION_INDEX_DIR = Path("search") / "events"


class ClosableSessionStore(SessionStore, Protocol):
    """A SessionStore that holds something to release (the search index's writer)."""

    def close(self) -> None:
        """Release it. Idempotent."""
        ...


@dataclass
class Stores:
    """The stores one process opened, and the session read model on the trace store's
    database. A context manager: leaving it closes them all.

    Asking for a store the process did not open raises LookupError naming it: a role that needs
    it is missing from the table of what each role opens.
    """

    _trace: TraceStore | None
    _run: RunStore | None
    _control: ControlStore | None
    _sessions: ClosableSessionStore | None
    _closed: bool = field(default=False, init=False, repr=False)

    @property
    def trace(self) -> TraceStore:
        """The trace store."""
        return _opened(self._trace, "trace")

    @property
    def run(self) -> RunStore:
        """The run store."""
        return _opened(self._run, "run")

    @property
    def control(self) -> ControlStore:
        """The control store."""
        return _opened(self._control, "control")

    @property
    def sessions(self) -> ClosableSessionStore:
        """The session read model, in the trace store's database."""
        return _opened(self._sessions, "trace")

    @property
    def names(self) -> frozenset[str]:
        """Which stores are open (`trace`, `run`, `control`)."""
        return frozenset(name for name, store in self._by_name().items() if store is not None)

    def describe(self) -> str:
        """Each backend with the open stores on it, for a start-up banner:
        `clickhouse (trace), postgres (run, control)`."""
        on: dict[str, list[str]] = {}
        for name, store in self._by_name().items():
            if store is not None:
                on.setdefault(store.backend, []).append(name)
        return ", ".join(f"{backend} ({', '.join(names)})" for backend, names in on.items())

    def pending_migrations(self) -> dict[str, list[str]]:
        """Per open store (trace, run, control), the migrations not yet applied."""
        return {
            name: store.pending_migrations()
            for name, store in self._by_name().items()
            if store is not None
        }

    def close(self) -> None:
        """Close every store, even if closing one of them fails. Idempotent."""
        if self._closed:
            return
        self._closed = True
        with ExitStack() as stack:
            # Callbacks run in reverse: control, run, then trace, each whatever the others did.
            for store in self._by_name().values():
                if store is not None:
                    stack.callback(store.close)
            # First of all: the session store's index writer, before the trace engine goes.
            if self._sessions is not None:
                stack.callback(self._sessions.close)

    def _by_name(self) -> dict[str, MigratedStore | None]:
        return {"trace": self._trace, "run": self._run, "control": self._control}

    def __enter__(self) -> Stores:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()


_Opened = TypeVar("_Opened")


def _opened(store: _Opened | None, name: str) -> _Opened:
    if store is None:
        raise LookupError(f"this process did not open the {name} store")
    return store


def open_stores(
    backend: str,
    *,
    data_dir: Path,
    postgres_url: str | None,
    clickhouse_url: str | None,
    clock: Clock | None = None,
    migrate: bool = True,
    stores: Collection[str] = STORE_NAMES,
) -> Stores:
    """Open, migrate and return the `stores` named (all three by default). `clock` is what the
    stores stamp rows with.

    With `migrate=False` nothing is changed, so `Stores.pending_migrations` can be asked what a
    migration would apply.

    Raises InvalidArgument naming the setting at fault for an unknown backend or a bad or
    missing URL (whichever stores are asked for: the settings describe the whole deployment),
    Unavailable when a database cannot be reached, and ValueError for an unknown store name.
    """
    unknown = set(stores) - STORE_NAMES
    if unknown:
        raise ValueError(f"unknown stores {sorted(unknown)}; choose from {sorted(STORE_NAMES)}")
    if backend not in BACKENDS:
        raise InvalidArgument(
            f"unknown storage backend {backend!r}; choose one of {', '.join(BACKENDS)}",
            field=BACKEND_SETTING,
        )
    pg_url = _parse_postgres_url(postgres_url) if postgres_url else None
    if backend == "postgres" and pg_url is None:
        raise InvalidArgument(
            "storage.backend is postgres but storage.postgres_url is not set",
            field=POSTGRES_SETTING,
        )
    if backend == "clickhouse" and not clickhouse_url:
        raise InvalidArgument(
            "storage.backend is clickhouse but storage.clickhouse_url is not set",
            field=CLICKHOUSE_SETTING,
        )

    with ExitStack() as opened:
        # Anything opened before a failure is closed again by the ExitStack.
        trace: TraceStore | None = None
        sessions: ClosableSessionStore | None = None
        if "trace" in stores:
            trace, sessions = _open_trace(opened, backend, data_dir, pg_url, clickhouse_url)
        run = control = None
        if "run" in stores:
            run = SqlRunStore(_engine(pg_url, data_dir / RUN_DB, Synchronous.FULL))
            opened.callback(run.close)
        if "control" in stores:
            control = SqlControlStore(
                _engine(pg_url, data_dir / CONTROL_DB, Synchronous.FULL), clock=clock
            )
            opened.callback(control.close)

        for store, setting in (
            (control, POSTGRES_SETTING if pg_url else None),
            (run, POSTGRES_SETTING if pg_url else None),
            (trace, _trace_setting(backend)),
        ):
            if store is not None:
                action = store.migrate if migrate else store.pending_migrations
                _connecting(action, store, setting)
        if migrate and isinstance(sessions, SqlSessionStore):
            # A crash between a write's commit and its index update, or a deleted index.
            sessions.reconcile_search_index()
        opened.pop_all()
    return Stores(trace, run, control, sessions)


def _open_trace(
    opened: ExitStack,
    backend: str,
    data_dir: Path,
    pg_url: URL | None,
    clickhouse_url: str | None,
) -> tuple[TraceStore, ClosableSessionStore]:
    """The trace store of `backend` and the session read model in its database."""
    if backend == "clickhouse":
        assert clickhouse_url is not None
        executor = open_executor(clickhouse_url)
        opened.callback(executor.close)
        return ClickHouseTraceStore(executor), ClickHouseSessionStore(executor)
    trace_pg = pg_url if backend == "postgres" else None
    trace = SqlTraceStore(
        _engine(trace_pg, data_dir / TRACE_DB, Synchronous.NORMAL, TRACE_CACHE_MIB)
    )
    opened.callback(trace.close)
    index_dir = data_dir / SESSION_INDEX_DIR if backend == "sqlite" else None
    sessions = SqlSessionStore(trace.engine, index_dir=index_dir)
    opened.callback(sessions.close)
    return trace, sessions


def _parse_postgres_url(url: str) -> URL:
    try:
        return postgres_url(url)
    except (ArgumentError, ValueError) as error:
        raise InvalidArgument(f"bad PostgreSQL URL: {error}", field=POSTGRES_SETTING) from error


def _engine(
    pg_url: URL | None, sqlite_path: Path, synchronous: Synchronous, cache_mib: int | None = None
) -> Engine:
    if pg_url is not None:
        return create_postgres_engine(pg_url)
    sqlite_path.parent.mkdir(parents=True, exist_ok=True)
    return create_sqlite_engine(sqlite_path, synchronous=synchronous, cache_mib=cache_mib)


def _trace_setting(backend: str) -> str | None:
    return {"postgres": POSTGRES_SETTING, "clickhouse": CLICKHOUSE_SETTING}.get(backend)


def _connecting(action: Callable[[], object], store: MigratedStore, setting: str | None) -> None:
    """Run `action` (the first database round trip), reporting an unreachable database."""
    try:
        action()
    except OperationalError as error:
        # Connection refused, authentication failed, no such database, an unwritable file: the
        # setting is at fault or the server is down. The driver's first line says which; the
        # URL itself (and its password) stays out of the message.
        where = setting or "the data directory"
        reason = str(error.orig).strip().splitlines()[0] if error.orig else "connection failed"
        raise Unavailable(
            f"cannot open the {store.backend} database named by {where}: {reason}",
            field=setting,
        ) from error
