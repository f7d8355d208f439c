"""Helpers shared by the storage tests: opening a store with its statements recorded."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sqlalchemy import event, inspect
from sqlalchemy.engine import Engine

from mcpd.storage.clickhouse.executor import ChdbExecutor, ClickHouseExecutor, insert_statement
from mcpd.storage.clickhouse.store import ClickHouseTraceStore
from mcpd.storage.sql.control_store import SqlControlStore
from mcpd.storage.sql.engine import Synchronous, create_postgres_engine, create_sqlite_engine
from mcpd.storage.sql.stores import SqlRunStore, SqlTraceStore

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
