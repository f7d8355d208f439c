"""Fixtures for the orchestrator's tests: its domain objects over a migrated run store."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path

import pytest

from mcpd.runtime.clock import ManualClock
from mcpd.testing.templates import PostgresTemplates, SqliteTemplates
from services.orchestrator.tests.daemon import Daemon, open_daemon


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def postgres_backend(request: pytest.FixtureRequest) -> PostgresTemplates | None:
    """Each SQL backend of the run store in turn: PostgreSQL's templates, None for SQLite."""
    if request.param == "postgres":
        templates: PostgresTemplates = request.getfixturevalue("postgres_templates")
        return templates
    return None


@pytest.fixture
def daemon(
    postgres_backend: PostgresTemplates | None, sqlite_templates: SqliteTemplates, tmp_path: Path
) -> Iterator[Daemon]:
    """A daemon on an empty migrated run store of each SQL backend."""
    with ExitStack() as stack:
        yield open_daemon(stack, tmp_path, ManualClock(), sqlite_templates, postgres_backend)


@pytest.fixture
def sqlite_daemon(sqlite_templates: SqliteTemplates, tmp_path: Path) -> Iterator[Daemon]:
    """A daemon on an empty migrated SQLite run store, for what only SQLite does."""
    with ExitStack() as stack:
        yield open_daemon(stack, tmp_path, ManualClock(), sqlite_templates)
