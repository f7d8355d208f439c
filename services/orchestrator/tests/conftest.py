"""Fixtures for the orchestrator's tests: its domain objects over a migrated run store."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path

import pytest

from mcpd.runtime.clock import ManualClock
from mcpd.storage.sql.engine import create_postgres_engine
from mcpd.storage.sql.stores import SqlRunStore
from mcpd.testing.templates import PostgresTemplates, SqliteTemplates
from services.orchestrator.tests.daemon import Daemon, control_store, sqlite_store


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def daemon(
    request: pytest.FixtureRequest, sqlite_templates: SqliteTemplates, tmp_path: Path
) -> Iterator[Daemon]:
    """A daemon on an empty migrated run store of each SQL backend."""
    with ExitStack() as stack:
        if request.param == "postgres":
            postgres: PostgresTemplates = request.getfixturevalue("postgres_templates")
            store = SqlRunStore(
                create_postgres_engine(stack.enter_context(postgres.database("run")))
            )
        else:
            store = sqlite_store(sqlite_templates.copy("run", tmp_path / "run.db"))
        yield _daemon(stack, store, sqlite_templates, tmp_path)


@pytest.fixture
def sqlite_daemon(sqlite_templates: SqliteTemplates, tmp_path: Path) -> Iterator[Daemon]:
    """A daemon on an empty migrated SQLite run store, for what only SQLite does."""
    with ExitStack() as stack:
        store = sqlite_store(sqlite_templates.copy("run", tmp_path / "run.db"))
        yield _daemon(stack, store, sqlite_templates, tmp_path)


def _daemon(
    stack: ExitStack, store: SqlRunStore, sqlite: SqliteTemplates, directory: Path
) -> Daemon:
    """A daemon over `store` and a control store in `directory`, both closed by `stack`."""
    stack.callback(store.close)
    clock = ManualClock()
    control = control_store(sqlite, directory, clock)
    stack.callback(control.close)
    return Daemon(store, control, clock)
