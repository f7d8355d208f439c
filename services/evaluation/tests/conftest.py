"""Fixtures of the evaluation service's tests: a manual clock, migrated SQLite control and trace
stores, a webhook receiver and the webhook sender running in the test's event loop."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from mcpd.runtime.clock import ManualClock
from mcpd.storage.sql.control_store import SqlControlStore
from mcpd.storage.sql.engine import Synchronous, create_sqlite_engine
from mcpd.storage.sql.stores import SqlTraceStore
from mcpd.testing.templates import SqliteTemplates
from services.evaluation.tests.receiver import Receiver
from services.evaluation.webhooks import Webhooks


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    made = Receiver()
    yield made
    made.server.shutdown()


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(datetime(2026, 12, 1, tzinfo=UTC))


@pytest.fixture
def control(tmp_path: Path, clock: ManualClock) -> Iterator[SqlControlStore]:
    engine = create_sqlite_engine(tmp_path / "control.db", synchronous=Synchronous.NORMAL)
    store = SqlControlStore(engine, clock=clock)
    store.migrate()
    yield store
    store.close()


@pytest.fixture
async def webhooks() -> AsyncIterator[Webhooks]:
    made = Webhooks(first_delay_s=0.01)
    stop = asyncio.Event()
    task = asyncio.create_task(made.run(stop))
    yield made
    stop.set()
    await task


@pytest.fixture
def traces(tmp_path: Path, sqlite_templates: SqliteTemplates) -> Iterator[SqlTraceStore]:
    """A migrated SQLite trace store, copied from the session's template (datasets and
    experiments live there)."""
    path = sqlite_templates.copy("trace", tmp_path / "trace.db")
    store = SqlTraceStore(create_sqlite_engine(path, synchronous=Synchronous.NORMAL))
    yield store
    store.close()
