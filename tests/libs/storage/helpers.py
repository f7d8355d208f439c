"""Helpers shared by the storage tests: opening a store with its statements recorded, fresh
or as a copy of a migrated template."""

from __future__ import annotations

import os
import re
import uuid
from collections.abc import Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import create_engine, event, inspect, text
from sqlalchemy.engine import Engine, make_url

from mcpd.storage.clickhouse.executor import ChdbExecutor, ClickHouseExecutor, insert_statement
from mcpd.storage.clickhouse.store import ClickHouseTraceStore
from mcpd.storage.sql.control_store import SqlControlStore
from mcpd.storage.sql.engine import Synchronous, create_postgres_engine, create_sqlite_engine
from mcpd.storage.sql.stores import SqlRunStore, SqlTraceStore
from mcpd.testing.pytest_plugin import POSTGRES_ENV, POSTGRES_SKIP
from mcpd.testing.templates import ClickHouseTemplate, PostgresTemplates, SqliteTemplates, SqlKind

DDL = re.compile(r"^\s*(CREATE|ALTER|DROP|RENAME|TRUNCATE)\b", re.IGNORECASE)
WRITE = re.compile(r"^\s*(INSERT|UPDATE|DELETE|REPLACE)\b", re.IGNORECASE)
# Where the `clock` fixture starts: microseconds set, so a lossy round trip would show.
T0 = datetime(2026, 1, 1, 0, 0, 0, 123_456, tzinfo=UTC)


class RecordingExecutor:
    """A ClickHouseExecutor that records every statement before passing it on."""

    def __init__(self, inner: ClickHouseExecutor) -> None:
        self.inner = inner
        self.statements: list[str] = []

    def command(self, sql: str, params: Mapping[str, object] | None = None) -> None:
        self.statements.append(sql)
        self.inner.command(sql, params)

    def query(self, sql: str, params: Mapping[str, object] | None = None) -> list[tuple[Any, ...]]:
        self.statements.append(sql)
        return self.inner.query(sql, params)

    def insert(self, table: str, columns: Sequence[str], data: str | bytes, fmt: str) -> None:
        self.statements.append(insert_statement(table, columns, fmt))
        self.inner.insert(table, columns, data, fmt)

    def close(self) -> None:
        self.inner.close()


def record_statements(engine: Engine) -> list[str]:
    """Every statement the engine sends to the database from now on, in order."""
    statements: list[str] = []

    def before(
        _conn: Any, _cursor: Any, statement: str, _params: Any, _context: Any, _many: bool
    ) -> None:
        statements.append(statement)

    event.listen(engine, "before_cursor_execute", before)
    return statements


@dataclass
class OpenedStore:
    """A store under test, the statements it has issued, and how to list its tables."""

    backend: str
    store: Any
    statements: list[str]
    engine: Engine | None = None
    executor: RecordingExecutor | None = None

    def table_names(self) -> set[str]:
        """The tables that exist, read from the database itself."""
        if self.engine is not None:
            return set(inspect(self.engine).get_table_names())
        assert self.executor is not None
        rows = self.executor.inner.query(
            "SELECT name FROM system.tables WHERE database = currentDatabase()"
        )
        return {str(row[0]) for row in rows}


def sql_engine(kind: str, backend: str, tmp_path: Path, postgres_url: str | None) -> Engine:
    """A fresh engine for one store on `backend`."""
    if backend == "postgres":
        assert postgres_url is not None
        return create_postgres_engine(postgres_url)
    synchronous = Synchronous.NORMAL if kind == "trace" else Synchronous.FULL
    return create_sqlite_engine(tmp_path / f"{kind}.db", synchronous=synchronous)


def open_store(kind: str, backend: str, tmp_path: Path, postgres_url: str | None) -> OpenedStore:
    """Open (without migrating) the `kind` store on `backend`, recording its statements."""
    if backend == "clickhouse":
        assert kind == "trace"
        executor = RecordingExecutor(ChdbExecutor(tmp_path / "clickhouse"))
        return OpenedStore(
            backend=backend,
            store=ClickHouseTraceStore(executor),
            statements=executor.statements,
            executor=executor,
        )
    engine = sql_engine(kind, backend, tmp_path, postgres_url)
    store_class = {"trace": SqlTraceStore, "run": SqlRunStore, "control": SqlControlStore}[kind]
    return OpenedStore(
        backend=backend,
        store=store_class(engine),
        statements=record_statements(engine),
        engine=engine,
    )


@contextmanager
def postgres_schema() -> Iterator[str]:
    """A PostgreSQL URL whose search_path is a fresh, empty schema, dropped afterwards; skips
    without MCPD_TEST_POSTGRES_URL."""
    base = os.environ.get(POSTGRES_ENV)
    if not base:
        pytest.skip(POSTGRES_SKIP)
    base_url = make_url(base).set(drivername="postgresql+psycopg")
    schema = f"mcpd_test_{uuid.uuid4().hex[:16]}"
    admin = create_engine(base_url, isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as conn:
            conn.execute(text(f'CREATE SCHEMA "{schema}"'))
        url = base_url.update_query_dict({"options": f"-csearch_path={schema}"})
        yield url.render_as_string(hide_password=False)
    finally:
        with admin.connect() as conn:
            conn.execute(text(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE'))
        admin.dispose()


@dataclass
class Migrated:
    """Migrated, empty stores copied from the session's templates into `directory` (SQLite,
    chdb) or into a database of their own (PostgreSQL), released by `stack`."""

    request: pytest.FixtureRequest
    directory: Path
    stack: ExitStack

    def prepare(self, kind: SqlKind, backend: str, *, fresh: bool = False) -> str | None:
        """Lay out a migrated `kind` store on `backend` where `open_store` and `sql_engine`
        look for it in `directory`; the PostgreSQL URL, None on the other backends. A
        PostgreSQL database is an emptied one another test used unless `fresh`."""
        match backend:
            case "sqlite":
                sqlite: SqliteTemplates = self.request.getfixturevalue("sqlite_templates")
                sqlite.copy(kind, self.directory / f"{kind}.db")
                return None
            case "clickhouse":
                assert kind == "trace"
                clickhouse: ClickHouseTemplate = self.request.getfixturevalue("clickhouse_template")
                clickhouse.copy(self.directory / "clickhouse")
                return None
            case "postgres":
                postgres: PostgresTemplates = self.request.getfixturevalue("postgres_templates")
                return self.stack.enter_context(postgres.database(kind, fresh=fresh))
        raise ValueError(backend)

    def elsewhere(self, name: str) -> Migrated:
        """Another layout, in the subdirectory `name`, released with this one."""
        directory = self.directory / name
        directory.mkdir()
        return Migrated(self.request, directory, self.stack)

    def open(self, kind: SqlKind, backend: str, *, fresh: bool = False) -> OpenedStore:
        """A migrated `kind` store on `backend`, statements recorded from now on."""
        url = self.prepare(kind, backend, fresh=fresh)
        return open_store(kind, backend, self.directory, url)

    def engine(self, kind: SqlKind, backend: str) -> Engine:
        """An engine on a migrated `kind` store on a SQL backend."""
        return sql_engine(kind, backend, self.directory, self.prepare(kind, backend))
