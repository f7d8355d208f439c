"""Fixtures for the orchestrator's tests: its domain objects over a migrated run store."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path

import pytest

from mcpd.runtime.clock import ManualClock
from mcpd.storage.sql.engine import create_postgres_engine
from mcpd.storage.sql.stores import SqlRunStore
from services.orchestrator.tests.daemon import Daemon, control_store, sqlite_store
from tests.libs.storage.helpers import postgres_schema


@pytest.fixture
def daemon(tmp_path: Path) -> Iterator[Daemon]:
    clock = ManualClock()
    store = sqlite_store(tmp_path / "run.db")
    control = control_store(tmp_path / "control.db", clock)
    store.migrate()
    try:
        yield Daemon(store, control, clock)
    finally:
        store.close()
        control.close()


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def any_daemon(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Daemon]:
    """A daemon on a migrated run store of each SQL backend."""
    with ExitStack() as stack:
        if request.param == "postgres":
            store = SqlRunStore(create_postgres_engine(stack.enter_context(postgres_schema())))
        else:
            store = sqlite_store(tmp_path / "run.db")
        stack.callback(store.close)
        store.migrate()
        clock = ManualClock()
        control = control_store(tmp_path / "control.db", clock)
        stack.callback(control.close)
        yield Daemon(store, control, clock)
