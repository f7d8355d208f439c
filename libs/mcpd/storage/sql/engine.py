"""Engines for the SQL stores: SQLite files configured for durability, PostgreSQL via psycopg 3.

SQLite settings, and why:

* `journal_mode=WAL`: readers never block the writer and the writer never blocks readers, and a
  commit is one append to the WAL.
* `synchronous`: chosen per store (`Synchronous`). In WAL mode NORMAL syncs the WAL at
  checkpoints only, which is durable across a process crash (`kill -9`: the committed frames
  are in the OS page cache and reach the file) but may lose the last transactions on power loss
  or an OS crash; FULL syncs the WAL on every commit, which also survives power loss. The
  trace store (high-volume, batched telemetry) uses NORMAL; the run and control stores (an
  acknowledged step completion or API key must never vanish) use FULL.
* `cache_size`: chosen per store (`cache_mib`). SQLite's default page cache is 2 MiB per
  connection; the trace store's writes touch nine B-trees of `spans` (its table, primary key and
  list indexes), and pages that do not fit come back from the OS with a system call each, which
  slows every span upsert (docs/decisions.md has the figures). The cache fills as pages are
  used, up to the limit, per connection.
* `foreign_keys=ON`: SQLite ignores foreign keys unless told otherwise, per connection.
* `busy_timeout`: a writer waits for the lock instead of failing at once with SQLITE_BUSY.
* A writers' queue in the kernel: before `BEGIN IMMEDIATE` a connection takes an exclusive
  `flock` on `<database>-writer`, and lets it go once the transaction has committed or rolled
  back. SQLite's busy handler sleeps in growing steps (1, 2, 5, 10 ms and on) and does not wake
  when the lock comes free, so writers of several processes left the file idle between their
  transactions; a waiter on the `flock` is woken the moment it is released. Readers take no
  `flock`. The kernel drops the lock of a process that dies. Only mcpd's connections queue there;
  another program writing the file still meets SQLite's busy handler.
* `BEGIN IMMEDIATE` for every transaction except those opened with `read_connection`: taking
  the write lock at BEGIN means a transaction that reads and then writes cannot fail half-way
  with SQLITE_BUSY (a deferred transaction cannot wait to upgrade its lock), and it serialises
  writers across processes. This is SQLAlchemy's documented recipe: the driver's own
  transaction handling is switched off (`isolation_level = None`) and BEGIN is emitted from the
  engine's `begin` event.

On both backends `hide_parameters=True`: a statement's parameters (password hashes, key and
session digests, prompts) never appear in a SQLAlchemy error message or engine log line, so an
error that escapes to a log carries the statement only.
"""

from __future__ import annotations

import enum
import fcntl
import json
import os
import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import orjson
from sqlalchemy import Connection, create_engine, event
from sqlalchemy.engine import URL, Engine, make_url
from sqlalchemy.pool import ConnectionPoolEntry

# Execution option that makes a SQLite transaction DEFERRED instead of IMMEDIATE.
READ_ONLY_OPTION = "mcpd_read_only"
BUSY_TIMEOUT_MS = 10_000


class Synchronous(enum.StrEnum):
    """SQLite's `synchronous` pragma values mcpd uses (see the module docstring)."""

    NORMAL = "NORMAL"
    FULL = "FULL"


def create_sqlite_engine(
    path: Path, *, synchronous: Synchronous, cache_mib: int | None = None
) -> Engine:
    """An engine on the SQLite file at `path` (created if missing), configured as documented;
    `cache_mib` is each connection's page cache (None: SQLite's default)."""
    engine = create_engine(
        URL.create("sqlite", database=str(path)),
        # The pool hands a connection to one thread at a time; stores are called from worker
        # threads, so the driver's same-thread check would only get in the way.
        connect_args={
            "check_same_thread": False,
            "timeout": BUSY_TIMEOUT_MS / 1000,
            "factory": QueuedWriterConnection,
        },
        hide_parameters=True,
        json_deserializer=json_loads,
    )

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: sqlite3.Connection, _record: ConnectionPoolEntry) -> None:
        # Stop the driver from emitting BEGIN (and COMMIT before DDL) on its own.
        dbapi_connection.isolation_level = None
        _enable_wal(dbapi_connection)
        cursor = dbapi_connection.cursor()
        try:
            cursor.execute(f"PRAGMA synchronous={synchronous.value}")
            if cache_mib is not None:
                # A negative size is in KiB.
                cursor.execute(f"PRAGMA cache_size={-1024 * int(cache_mib)}")
            cursor.execute("PRAGMA foreign_keys=ON")
            cursor.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
            # Freed pages are zeroed, so an erased subject's bytes leave the file (the default
            # of Debian's build, not of SQLite's).
            cursor.execute("PRAGMA secure_delete=ON")
        finally:
            cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Connection) -> None:
        if conn.get_execution_options().get(READ_ONLY_OPTION, False):
            conn.exec_driver_sql("BEGIN")
        else:
            driver = conn.connection.driver_connection
            assert isinstance(driver, QueuedWriterConnection)
            driver.queue_for_writing()
            try:
                conn.exec_driver_sql("BEGIN IMMEDIATE")
            except BaseException:
                driver.writing_ended()
                raise

    return engine


class QueuedWriterConnection(sqlite3.Connection):
    """A SQLite connection whose write transactions queue on an `flock` of `<database>-writer`
    (see the module docstring): taken by `queue_for_writing` before `BEGIN IMMEDIATE`, released
    when the transaction commits or rolls back, or the connection closes."""

    def __init__(self, database: str, *args: Any, **kwargs: Any) -> None:
        super().__init__(database, *args, **kwargs)
        self._writer_lock_path = f"{database}-writer"
        self._writer_lock: int | None = None  # opened at the first write

    def queue_for_writing(self) -> None:
        """Wait until no other connection of mcpd writes the file, then hold it for this one."""
        if self._writer_lock is None:
            self._writer_lock = os.open(
                self._writer_lock_path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600
            )
        fcntl.flock(self._writer_lock, fcntl.LOCK_EX)

    def writing_ended(self) -> None:
        """Let the next writer in (releasing a turn this connection does not hold does
        nothing)."""
        if self._writer_lock is not None:
            fcntl.flock(self._writer_lock, fcntl.LOCK_UN)

    def commit(self) -> None:
        try:
            super().commit()
        finally:
            self.writing_ended()

    def rollback(self) -> None:
        try:
            super().rollback()
        finally:
            self.writing_ended()

    def close(self) -> None:
        try:
            super().close()
        finally:
            if self._writer_lock is not None:
                os.close(self._writer_lock)  # which releases a turn still held
                self._writer_lock = None


def _enable_wal(dbapi_connection: sqlite3.Connection) -> None:
    """Switch the database file to WAL, once; later connections find it switched already.

    The switch needs an exclusive lock. When two connections race for it on a fresh file,
    SQLite refuses one with SQLITE_BUSY at once instead of calling the busy handler (waiting
    could deadlock: each would hold the shared lock the other needs gone), so the refused one
    retries, with a short backoff, within the busy timeout.
    """
    deadline = time.monotonic() + BUSY_TIMEOUT_MS / 1000
    delay = 0.001
    while True:
        try:
            (mode,) = dbapi_connection.execute("PRAGMA journal_mode").fetchone()
            if mode != "wal":
                (mode,) = dbapi_connection.execute("PRAGMA journal_mode=WAL").fetchone()
        except sqlite3.OperationalError as error:
            if error.sqlite_errorcode != sqlite3.SQLITE_BUSY or time.monotonic() > deadline:
                raise
            time.sleep(delay)
            delay = min(delay * 2, 0.05)
            continue
        if mode != "wal":
            raise RuntimeError(f"SQLite refused WAL journaling (journal_mode is {mode!r})")
        return


def postgres_url(url: str) -> URL:
    """Parse a PostgreSQL URL and pin the psycopg 3 driver.

    Accepts `postgresql://`, `postgres://` and `postgresql+psycopg://`; raises ValueError for
    anything else (the factory turns that into InvalidArgument naming the setting).
    """
    parsed = make_url(url)
    if parsed.drivername not in ("postgresql", "postgres", "postgresql+psycopg"):
        raise ValueError(f"not a PostgreSQL URL (scheme {parsed.drivername!r})")
    if not parsed.host and not parsed.query.get("host"):
        raise ValueError("the URL names no host")
    return parsed.set(drivername="postgresql+psycopg")


def create_postgres_engine(url: str | URL) -> Engine:
    """An engine on PostgreSQL. `url` may carry libpq options (e.g. a search_path)."""
    parsed = url if isinstance(url, URL) else postgres_url(url)
    # pre_ping: a daemon lives for weeks; a connection the server dropped is replaced, not
    # handed to a request.
    return create_engine(
        parsed, pool_pre_ping=True, hide_parameters=True, json_deserializer=json_loads
    )


def json_loads(text: str | bytes) -> Any:
    """A stored JSON document, decoded. orjson, because a large trace reads megabytes of
    payloads and the standard library's decoder is the slower one; the standard library for the
    NaN and Infinity tokens `json.dumps` (the serializer) may have written, which orjson
    refuses."""
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        return json.loads(text)


@contextmanager
def read_connection(engine: Engine) -> Iterator[Connection]:
    """A connection whose transactions only read: DEFERRED on SQLite, so readers take no lock.

    The transaction still gives a consistent snapshot across the statements in it. Rolled back
    on exit, since nothing was written.
    """
    with engine.connect() as conn:
        yield conn.execution_options(**{READ_ONLY_OPTION: True})
