"""Fixtures for the storage tests: real databases only.

SQLite files and chdb data live in `tmp_path`. PostgreSQL tests run when
MCPD_TEST_POSTGRES_URL is set, each in a schema of its own (created for the test, selected
through libpq's `options=-csearch_path=...`, dropped afterwards), and are skipped otherwise.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

from mcpd.runtime.clock import ManualClock
from mcpd.storage.sql.control_store import SqlControlStore
from tests.libs.storage.helpers import T0, OpenedStore, open_store, sql_engine

POSTGRES_ENV = "MCPD_TEST_POSTGRES_URL"
POSTGRES_SKIP = f"{POSTGRES_ENV} is not set: PostgreSQL storage tests skipped"

SQL_BACKENDS = ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
TRACE_BACKENDS = [*SQL_BACKENDS, "clickhouse"]


@pytest.fixture
def postgres_url() -> Iterator[str]:
    """A PostgreSQL URL whose search_path is a fresh schema, dropped after the test."""
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


@pytest.fixture
def backend_url(request: pytest.FixtureRequest) -> str | None:
    """The PostgreSQL URL when the test's `backend` parameter is postgres, else None."""
    backend = request.getfixturevalue("backend")
    if backend == "postgres":
        url: str = request.getfixturevalue("postgres_url")
        return url
    return None


@pytest.fixture(params=TRACE_BACKENDS)
def trace_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[OpenedStore]:
    """A trace store on each backend, not yet migrated, with its statements recorded."""
    backend: str = request.param
    pg = request.getfixturevalue("postgres_url") if backend == "postgres" else None
    opened = open_store("trace", backend, tmp_path, pg)
    try:
        yield opened
    finally:
        opened.store.close()


@pytest.fixture(params=SQL_BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    """A SQL backend name: sqlite, and postgres when it is available."""
    name: str = request.param
    return name


@pytest.fixture
def clock() -> ManualClock:
    """Wall time starts at T0 and moves only when a test says so."""
    return ManualClock(T0)


@pytest.fixture
def control_store(
    backend: str, backend_url: str | None, tmp_path: Path, clock: ManualClock
) -> Iterator[SqlControlStore]:
    """A migrated control store on each SQL backend, stamping rows with `clock`."""
    opened = SqlControlStore(sql_engine("control", backend, tmp_path, backend_url), clock=clock)
    opened.migrate()
    try:
        yield opened
    finally:
        opened.close()
