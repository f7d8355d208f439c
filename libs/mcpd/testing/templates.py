"""Migrated, empty stores for tests, made once per test session and copied per test.

Running a store's migrations is most of what opening a fresh store costs, so each kind of store
is migrated once, into a template, and every test gets its own copy of it:

* SQLite: the template file is copied (a WAL database is one file once its last connection has
  closed; the ``-wal`` and ``-shm`` files are copied too when they exist).
* PostgreSQL: ``CREATE DATABASE ... TEMPLATE`` (a block copy of the migrated database inside
  the server), emptied after the test and reused by the next one (see `PostgresTemplates`).
* ClickHouse (chdb): the engine's data directory is copied. chdb runs one engine per process,
  so a template is made only while no other chdb path is open, which is the case whenever a
  test is about to open a fresh one.

Templates are named after the test session's own token, so parallel workers never share one.
"""

from __future__ import annotations

import contextlib
import itertools
import shutil
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import sqlalchemy as sa
from sqlalchemy.engine import Engine, make_url
from sqlalchemy.pool import NullPool

from mcpd.storage.clickhouse import ChdbExecutor, ClickHouseTraceStore
from mcpd.storage.factory import CONTROL_DB, RUN_DB, TRACE_DB
from mcpd.storage.sql.base import SqlStore
from mcpd.storage.sql.control_store import SqlControlStore
from mcpd.storage.sql.engine import Synchronous, create_postgres_engine, create_sqlite_engine
from mcpd.storage.sql.schema import StoreName
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


@dataclass(frozen=True)
class _PostgresTemplate:
    """A migrated template database, what its schema looks like, and how to empty a copy."""

    name: str
    schema: str
    empty: tuple[str, ...]


class PostgresTemplates:
    """Migrated databases on the server ``admin_url`` names (its database is only used to
    create and drop the others), one template per kind of store.

    A test's database is a copy of the template (``CREATE DATABASE ... TEMPLATE``). When the
    test is done with it, it is emptied (every row deleted, sequences restarted) and kept for the
    next test of the same kind, which costs milliseconds where creating and dropping a database
    costs a large part of a second. A copy whose schema no longer matches the template's (a test
    migrated another store into it, or changed a table) is dropped instead, so every test starts
    on the template's schema with no rows. What an emptied database still has that a fresh one
    has not is planner statistics (ANALYZE, autovacuum): a test that reads those asks for a
    ``fresh`` copy.
    """

    def __init__(self, admin_url: str) -> None:
        self._base = make_url(admin_url).set(drivername="postgresql+psycopg")
        self._admin = sa.create_engine(self._base, isolation_level="AUTOCOMMIT")
        self._token = uuid.uuid4().hex[:10]
        self._copies = itertools.count(1)
        self._templates: dict[SqlKind, _PostgresTemplate] = {}
        self._idle: dict[SqlKind, list[str]] = {}

    def url_of(self, database: str) -> str:
        """The URL of ``database`` on the same server, password included."""
        return self._base.set(database=database).render_as_string(hide_password=False)

    @contextlib.contextmanager
    def database(self, kind: SqlKind, *, fresh: bool = False) -> Iterator[str]:
        """A database holding an empty migrated ``kind`` store, for the ``with`` block; its
        URL. ``fresh``: a new copy of the template, never one another test used."""
        template = self._template(kind)
        idle = self._idle.setdefault(kind, [])
        if idle and not fresh:
            name = idle.pop()
        else:
            name = f"mcpd_test_{kind}_{self._token}_{next(self._copies)}"
            self._execute(f'CREATE DATABASE "{name}" TEMPLATE "{template.name}"')
        try:
            yield self.url_of(name)
        finally:
            if self._emptied(name, template):
                idle.append(name)
            else:
                self._drop(name)

    def close(self) -> None:
        """Drop every database made here, the templates last."""
        for names in self._idle.values():
            for name in names:
                self._drop(name)
        for template in self._templates.values():
            self._drop(template.name)
        self._idle.clear()
        self._templates.clear()
        self._admin.dispose()

    def _template(self, kind: SqlKind) -> _PostgresTemplate:
        if kind not in self._templates:
            name = f"mcpd_template_{kind}_{self._token}"
            self._execute(f'CREATE DATABASE "{name}"')
            engine = create_postgres_engine(self.url_of(name))
            try:
                _migrate(kind, engine)
                with engine.connect() as conn:
                    schema = _schema_of(conn)
                    empty = _emptying_statements(conn, StoreName(kind).version_table)
            finally:
                engine.dispose()  # CREATE DATABASE ... TEMPLATE needs it unconnected
            self._templates[kind] = _PostgresTemplate(name, schema, empty)
        return self._templates[kind]

    def _emptied(self, name: str, template: _PostgresTemplate) -> bool:
        """Empty the copy ``name`` for reuse; False when its schema is not the template's."""
        engine = sa.create_engine(self.url_of(name), poolclass=NullPool)
        try:
            with engine.begin() as conn:
                # A connection the test left open could hold a lock the deletes wait for.
                conn.execute(sa.text(_TERMINATE_OTHERS))
                if _schema_of(conn) != template.schema:
                    return False
                for statement in template.empty:
                    conn.execute(sa.text(statement))
            return True
        finally:
            engine.dispose()

    def _drop(self, name: str) -> None:
        self._execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

    def _execute(self, statement: str) -> None:
        with self._admin.connect() as conn:
            conn.execute(sa.text(statement))


_TERMINATE_OTHERS = """
SELECT pg_terminate_backend(pid) FROM pg_stat_activity
WHERE datname = current_database() AND pid <> pg_backend_pid()
"""

# Everything a test could change in a store's schema, as one text: tables and their columns,
# indexes, constraints, triggers, sequences and functions of the public schema.
_SCHEMA = """
SELECT string_agg(item, E'\\n' ORDER BY item) FROM (
    SELECT format('column %s.%s %s %s %s', table_name, column_name, data_type, is_nullable,
                  column_default) AS item
    FROM information_schema.columns WHERE table_schema = 'public'
    UNION ALL SELECT 'index ' || indexdef FROM pg_indexes WHERE schemaname = 'public'
    UNION ALL SELECT format('constraint %s %s', conname, pg_get_constraintdef(oid))
    FROM pg_constraint WHERE connamespace = 'public'::regnamespace
    UNION ALL SELECT format('trigger %s %s', tgname, tgrelid::regclass)
    FROM pg_trigger WHERE NOT tgisinternal
    UNION ALL SELECT 'sequence ' || sequencename FROM pg_sequences WHERE schemaname = 'public'
    UNION ALL SELECT format('function %s %s', proname, md5(prosrc))
    FROM pg_proc WHERE pronamespace = 'public'::regnamespace
) AS items
"""

_FOREIGN_KEYS = """
SELECT conrelid::regclass::text, confrelid::regclass::text FROM pg_constraint
WHERE contype = 'f' AND connamespace = 'public'::regnamespace AND conrelid <> confrelid
"""


def _schema_of(conn: sa.Connection) -> str:
    return str(conn.execute(sa.text(_SCHEMA)).scalar_one() or "")


def _emptying_statements(conn: sa.Connection, version_table: str) -> tuple[str, ...]:
    """DELETEs of every table but the migrations' record, referencing tables before the
    tables they reference, then a restart of every sequence."""
    tables = set(
        conn.execute(
            sa.text("SELECT tablename FROM pg_tables WHERE schemaname = 'public'")
        ).scalars()
    )
    tables.discard(version_table)
    references = [
        (str(child), str(parent)) for child, parent in conn.execute(sa.text(_FOREIGN_KEYS))
    ]
    ordered: list[str] = []
    while tables:
        # A table is emptied once no table still to be emptied refers to it.
        free = sorted(t for t in tables if not any(p == t and c in tables for c, p in references))
        ordered.extend(free)
        tables.difference_update(free)
    sequences = conn.execute(
        sa.text("SELECT sequencename FROM pg_sequences WHERE schemaname = 'public'")
    ).scalars()
    return (
        *(f'DELETE FROM "{table}"' for table in ordered),
        *(f'ALTER SEQUENCE "{sequence}" RESTART' for sequence in sequences),
    )


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
