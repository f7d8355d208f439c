"""Fixtures for the storage tests: real databases only.

SQLite files and chdb data live in `tmp_path`. PostgreSQL tests run when
MCPD_TEST_POSTGRES_URL is set, and are skipped otherwise. A test of migrations gets an empty
schema of its own (created for the test, selected through libpq's `options=-csearch_path=...`,
dropped afterwards); a test of a migrated store gets a copy of a migrated template (`migrated`):
a file or directory copy, or a database created from the template and dropped afterwards.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path

import pytest

from mcpd.runtime.clock import ManualClock
from mcpd.storage.sql.control_store import SqlControlStore
from mcpd.storage.sql.stores import SqlRunStore
from tests.libs.storage.helpers import T0, Migrated, OpenedStore, open_store, postgres_schema

SQL_BACKENDS = ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
TRACE_BACKENDS = [*SQL_BACKENDS, "clickhouse"]


@pytest.fixture
def postgres_url() -> Iterator[str]:
    """A PostgreSQL URL whose search_path is a fresh, empty schema, dropped after the test."""
    with postgres_schema() as url:
        yield url


@pytest.fixture
def migrated(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Migrated]:
    """Migrated stores for this test, copied from the session's templates."""
    with ExitStack() as stack:
        yield Migrated(request, tmp_path, stack)


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


@pytest.fixture(params=TRACE_BACKENDS)
def migrated_trace_store(
    request: pytest.FixtureRequest, migrated: Migrated
) -> Iterator[OpenedStore]:
    """A migrated, empty trace store on each backend, with its statements recorded."""
    opened = migrated.open("trace", request.param)
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
    backend: str, migrated: Migrated, clock: ManualClock
) -> Iterator[SqlControlStore]:
    """A migrated control store on each SQL backend, stamping rows with `clock`."""
    opened = SqlControlStore(migrated.engine("control", backend), clock=clock)
    try:
        yield opened
    finally:
        opened.close()


@pytest.fixture
def run_store(backend: str, migrated: Migrated) -> Iterator[SqlRunStore]:
    """A migrated run store on the test's SQL backend."""
    store = SqlRunStore(migrated.engine("run", backend))
    try:
        yield store
    finally:
        store.close()
