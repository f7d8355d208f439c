"""A migrated session store on SQLite (with its tantivy index), on PostgreSQL, and on ClickHouse
(the real engine in process, through chdb): one behaviour suite for all three."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from mcpd.storage.clickhouse.sessions import ClickHouseSessionStore
from mcpd.storage.sql.sessions import SqlSessionStore
from tests.libs.storage.helpers import Migrated

SQL_BACKENDS = ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
SESSION_BACKENDS = [*SQL_BACKENDS, "clickhouse"]

# What the behaviour tests take: any session store, with the maintenance calls both have.
AnySessionStore = SqlSessionStore | ClickHouseSessionStore


@pytest.fixture(params=SESSION_BACKENDS)
def store(
    request: pytest.FixtureRequest, migrated: Migrated, tmp_path: Path
) -> Iterator[AnySessionStore]:
    """A session store on a fresh copy of a migrated trace database, closed afterwards."""
    backend: str = request.param
    if backend == "clickhouse":
        trace = migrated.open("trace", backend).store
        try:
            yield ClickHouseSessionStore(trace.executor)
        finally:
            trace.close()
        return
    yield from _sql_store(migrated, backend, tmp_path)


@pytest.fixture(params=SQL_BACKENDS)
def sql_store(
    request: pytest.FixtureRequest, migrated: Migrated, tmp_path: Path
) -> Iterator[SqlSessionStore]:
    """A SQL session store only: for tests that look at the SQL tables or the search backend."""
    yield from _sql_store(migrated, request.param, tmp_path)


def _sql_store(migrated: Migrated, backend: str, tmp_path: Path) -> Iterator[SqlSessionStore]:
    engine = migrated.engine("trace", backend)
    index_dir = tmp_path / "search" / "events" if backend == "sqlite" else None
    opened = SqlSessionStore(engine, index_dir=index_dir)
    try:
        yield opened
    finally:
        opened.close()
        engine.dispose()
