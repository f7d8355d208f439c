"""Fixtures of the intelligence service's tests: a migrated trace store on each backend (copied
from the session's templates) and a manual clock."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from mcpd.runtime.clock import ManualClock
from mcpd.storage.clickhouse.executor import ChdbExecutor
from mcpd.storage.clickhouse.store import ClickHouseTraceStore
from mcpd.storage.interfaces import TraceStore
from mcpd.storage.sql.engine import Synchronous, create_postgres_engine, create_sqlite_engine
from mcpd.storage.sql.stores import SqlTraceStore
from mcpd.testing.templates import ClickHouseTemplate, PostgresTemplates, SqliteTemplates

BACKENDS: list[Any] = ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres), "clickhouse"]


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(datetime(2026, 12, 1, tzinfo=UTC))


@contextmanager
def opened_trace_store(
    request: pytest.FixtureRequest, backend: str, directory: Path
) -> Iterator[TraceStore]:
    """A migrated trace store on `backend`, its files under `directory`, closed on exit."""
    with ExitStack() as stack:
        store: TraceStore
        match backend:
            case "sqlite":
                templates: SqliteTemplates = request.getfixturevalue("sqlite_templates")
                path = templates.copy("trace", directory / "trace.db")
                store = SqlTraceStore(create_sqlite_engine(path, synchronous=Synchronous.NORMAL))
            case "postgres":
                postgres: PostgresTemplates = request.getfixturevalue("postgres_templates")
                url = stack.enter_context(postgres.database("trace"))
                store = SqlTraceStore(create_postgres_engine(url))
            case "clickhouse":
                template: ClickHouseTemplate = request.getfixturevalue("clickhouse_template")
                store = ClickHouseTraceStore(ChdbExecutor(template.copy(directory / "clickhouse")))
            case _:
                raise ValueError(backend)
        stack.callback(store.close)
        yield store


@pytest.fixture(params=BACKENDS)
def trace_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[TraceStore]:
    """A migrated trace store on each backend."""
    with opened_trace_store(request, request.param, tmp_path) as store:
        yield store
