"""A migrated session store on SQLite (with its tantivy index) and on PostgreSQL."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from mcpd.storage.sql.sessions import SqlSessionStore
from mcpd.storage.sql.stores import SqlTraceStore
from tests.libs.storage.helpers import sql_engine

SQL_BACKENDS = ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]


@pytest.fixture(params=SQL_BACKENDS)
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[SqlSessionStore]:
    """A session store on a freshly migrated trace database, closed afterwards."""
    backend: str = request.param
    url = request.getfixturevalue("postgres_url") if backend == "postgres" else None
    engine = sql_engine("trace", backend, tmp_path, url)
    SqlTraceStore(engine).migrate()
    index_dir = tmp_path / "search" / "events" if backend == "sqlite" else None
    opened = SqlSessionStore(engine, index_dir=index_dir)
    try:
        yield opened
    finally:
        opened.close()
        engine.dispose()
