"""A migrated control store of the test's own on each SQL backend, and a clock it and the syncs
read."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from mcpd.runtime.clock import ManualClock
from mcpd.storage.sql.control_store import SqlControlStore
from mcpd.storage.sql.engine import Synchronous, create_postgres_engine, create_sqlite_engine
from mcpd.testing.templates import PostgresTemplates, SqliteTemplates

T0 = datetime(2026, 12, 1, tzinfo=UTC)
BACKENDS: list[Any] = ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(T0)


@pytest.fixture(params=BACKENDS)
def control(
    request: pytest.FixtureRequest, tmp_path: Path, clock: ManualClock
) -> Iterator[SqlControlStore]:
    """The SQL store itself: a test reads every stored version through its engine."""
    with ExitStack() as stack:
        if request.param == "sqlite":
            sqlite: SqliteTemplates = request.getfixturevalue("sqlite_templates")
            path = sqlite.copy("control", tmp_path / "control.db")
            engine = create_sqlite_engine(path, synchronous=Synchronous.NORMAL)
        else:
            postgres: PostgresTemplates = request.getfixturevalue("postgres_templates")
            engine = create_postgres_engine(stack.enter_context(postgres.database("control")))
        store = SqlControlStore(engine, clock=clock)
        stack.callback(store.close)
        yield store
