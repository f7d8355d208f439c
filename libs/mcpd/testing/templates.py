"""Migrated, empty stores for tests, made once per test session and copied per test.

Running a store's migrations is most of what opening a fresh store costs, so each kind of store
is migrated once, into a template, and every test gets its own copy of it:

* SQLite: the template file is copied (a WAL database is one file once its last connection has
  closed; the ``-wal`` and ``-shm`` files are copied too when they exist).
* PostgreSQL: ``CREATE DATABASE ... TEMPLATE`` (a block copy of the migrated database inside
  the server), dropped after the test with ``WITH (FORCE)``.
* ClickHouse (chdb): the engine's data directory is copied. chdb runs one engine per process,
  so a template is made only while no other chdb path is open, which is the case whenever a
  test is about to open a fresh one.

Templates are named after the test session's own token, so parallel workers never share one.
"""

from __future__ import annotations

import contextlib
import shutil
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Literal

import sqlalchemy as sa
from sqlalchemy.engine import Engine, make_url

from mcpd.storage.clickhouse import ChdbExecutor, ClickHouseTraceStore
from mcpd.storage.factory import CONTROL_DB, RUN_DB, TRACE_DB
from mcpd.storage.sql.base import SqlStore
from mcpd.storage.sql.control_store import SqlControlStore
from mcpd.storage.sql.engine import Synchronous, create_postgres_engine, create_sqlite_engine
from mcpd.storage.sql.stores import SqlRunStore, SqlTraceStore

SqlKind = Literal["trace", "run", "control"]
SQL_STORES: dict[SqlKind, Callable[[Engine], SqlStore]] = {
    "trace": SqlTraceStore,
    "run": SqlRunStore,
    "control": SqlControlStore,
}
_SQLITE_FILES = ("", "-wal", "-shm")


def _migrate(kind: SqlKind, engine: Engine) -> None:
    store = SQL_STORES[kind](engine)
    try:
        store.migrate()
    finally:
        store.close()


class SqliteTemplates:
    """One migrated SQLite file per kind of store under ``directory``, made on first use."""

    def __init__(self, directory: Path) -> None:
        self._directory = directory
        self._made: dict[SqlKind, Path] = {}

    def copy(self, kind: SqlKind, target: Path) -> Path:
        """Copy the migrated ``kind`` database to ``target`` (a file path); ``target``."""
        template = self._template(kind)
        for suffix in _SQLITE_FILES:
            source = template.with_name(template.name + suffix)
            if source.exists():
                shutil.copyfile(source, target.with_name(target.name + suffix))
        return target

    def data_dir(self, directory: Path) -> Path:
        """Lay out ``directory`` as a data directory whose three stores are migrated, under
        the names ``mcpd.storage.open_stores`` gives them; ``directory``."""
        directory.mkdir(parents=True, exist_ok=True)
        self.copy("trace", directory / TRACE_DB)
        self.copy("run", directory / RUN_DB)
        self.copy("control", directory / CONTROL_DB)
        return directory

    def _template(self, kind: SqlKind) -> Path:
        if kind not in self._made:
            path = self._directory / f"{kind}.db"
            # The synchronous setting is per connection, not in the file: any will do here.
            _migrate(kind, create_sqlite_engine(path, synchronous=Synchronous.NORMAL))
            self._made[kind] = path
        return self._made[kind]


class PostgresTemplates:
    """One migrated template database per kind of store, on the server ``admin_url`` names
    (its database is only used to create and drop the others)."""

    def __init__(self, admin_url: str) -> None:
        self._base = make_url(admin_url).set(drivername="postgresql+psycopg")
        self._admin = sa.create_engine(self._base, isolation_level="AUTOCOMMIT")
        self._token = uuid.uuid4().hex[:10]
        self._made: dict[SqlKind, str] = {}

    def url_of(self, database: str) -> str:
        """The URL of ``database`` on the same server, password included."""
        return self._base.set(database=database).render_as_string(hide_password=False)

    @contextlib.contextmanager
    def database(self, kind: SqlKind) -> Iterator[str]:
        """A fresh database holding an empty migrated ``kind`` store, dropped on exit; its URL."""
        name = f"mcpd_test_{uuid.uuid4().hex[:16]}"
        self._execute(f'CREATE DATABASE "{name}" TEMPLATE "{self._template(kind)}"')
        try:
            yield self.url_of(name)
        finally:
            self._drop(name)

    def close(self) -> None:
        """Drop the templates."""
        for name in self._made.values():
            self._drop(name)
        self._made.clear()
        self._admin.dispose()

    def _template(self, kind: SqlKind) -> str:
        if kind not in self._made:
            name = f"mcpd_template_{kind}_{self._token}"
            self._execute(f'CREATE DATABASE "{name}"')
            engine = create_postgres_engine(self.url_of(name))
            try:
                _migrate(kind, engine)
            finally:
                engine.dispose()  # CREATE DATABASE ... TEMPLATE needs it unconnected
            self._made[kind] = name
        return self._made[kind]

    def _drop(self, name: str) -> None:
        self._execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

    def _execute(self, statement: str) -> None:
        with self._admin.connect() as conn:
            conn.execute(sa.text(statement))


class ClickHouseTemplate:
    """A migrated chdb data directory under ``directory``, made on first use."""

    def __init__(self, directory: Path) -> None:
        self._path = directory / "clickhouse"
        self._made = False

    def copy(self, target: Path) -> Path:
        """Copy the migrated data directory to ``target`` (which must not exist); ``target``."""
        if not self._made:
            store = ClickHouseTraceStore(ChdbExecutor(self._path))
            try:
                store.migrate()
            finally:
                store.close()
            self._made = True
        # The engine's links between its directories are relative: they hold in the copy.
        shutil.copytree(self._path, target, symlinks=True)
        return target
