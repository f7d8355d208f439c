"""The group-commit writer over a real SQLite trace store."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from mcpd.runtime.clock import ManualClock
from mcpd.runtime.errors import ResourceExhausted
from mcpd.signals.batch import IngestLag, SignalBatch
from mcpd.storage import Stores, open_stores
from mcpd.storage.interfaces import TraceStore
from mcpd.testing.eventually import eventually_async
from mcpd.testing.templates import SqliteTemplates
from services.ingest.writer import BatchWriter
from services.query.health import HealthReporter
from tests.libs.signals.samples import T0, span


@pytest.fixture
def stores(tmp_path: Path, sqlite_templates: SqliteTemplates) -> Iterator[Stores]:
    data_dir = sqlite_templates.data_dir(tmp_path)
    with open_stores("sqlite", data_dir=data_dir, postgres_url=None, clickhouse_url=None) as opened:
        yield opened


class GatedStore:
    """The real store, with every write_batches call held until the test opens the gate, and
    the groups it was called with recorded."""

    def __init__(self, store: TraceStore) -> None:
        self.store = store
        self.gate = threading.Event()
        self.entered = threading.Event()
        self.groups: list[list[str | None]] = []

    def write_batches(self, batches: Sequence[SignalBatch]) -> list[bool]:
        self.entered.set()
        self.gate.wait(10)
        self.groups.append([batch.ingest_key for batch in batches])
        return self.store.write_batches(batches)


def _assert_pending(writer: BatchWriter, records: int) -> None:
    assert writer.lag().pending_records == records


def _batch(key: str | None, trace: str, spans: int = 1) -> SignalBatch:
    rows = [span(f"{trace[:14]}{n:02d}", trace_id=trace, received_at=T0) for n in range(spans)]
    return SignalBatch(key_project="p", ingest_key=key, received_at=T0, spans=rows)


async def test_waiting_batches_share_one_transaction_and_replays_report_false(
    stores: Stores,
) -> None:
    gated = GatedStore(stores.trace)
    clock = ManualClock()
    writer = BatchWriter(gated, monotonic=clock.monotonic)
    writer.start()
    first = asyncio.create_task(writer.write(_batch("k1", "a" * 32)))
    await asyncio.to_thread(gated.entered.wait, 10)
    # While the first group is in its transaction, three more requests arrive.
    waiting = [
        asyncio.create_task(writer.write(_batch(key, trace * 32)))
        for key, trace in (("k2", "b"), ("k1", "c"), (None, "d"))
    ]
    await eventually_async(lambda: _assert_pending(writer, 4))
    clock.advance(2.5)
    lag = writer.lag()
    gated.gate.set()
    outcomes = [await first, *[await task for task in waiting]]
    await writer.close()

    assert lag.pending_records == 4
    assert lag.oldest_age_s == pytest.approx(2.5)
    assert gated.groups == [["k1"], ["k2", "k1", None]]
    # k1 came back in the second group: a replay, written once.
    assert outcomes == [True, True, False, True]
    assert writer.lag().pending_records == 0
    assert (
        stores.trace.trace_records("p", "c" * 32, logs=False, scores=False, feedback=False) is None
    )


async def test_a_failing_batch_fails_alone(stores: Stores) -> None:
    gated = GatedStore(stores.trace)
    writer = BatchWriter(gated, monotonic=ManualClock().monotonic)
    writer.start()
    blocker = asyncio.create_task(writer.write(_batch(None, "e" * 32)))
    await asyncio.to_thread(gated.entered.wait, 10)
    bad = _batch(None, "f" * 32)
    bad.spans[0]["name"] = None  # type: ignore[typeddict-item]
    tasks = [
        asyncio.create_task(writer.write(b))
        for b in (_batch(None, "1" * 32), bad, _batch(None, "2" * 32))
    ]
    await eventually_async(lambda: _assert_pending(writer, 4))
    gated.gate.set()
    results = await asyncio.gather(blocker, *tasks, return_exceptions=True)
    await writer.close()

    assert results[0] is True
    assert results[1] is True
    assert isinstance(results[2], Exception)
    assert results[3] is True
    assert gated.groups[1:] == [[None, None, None], [None], [None], [None]]


async def test_a_full_queue_refuses_with_resource_exhausted(stores: Stores) -> None:
    gated = GatedStore(stores.trace)
    writer = BatchWriter(
        gated,
        monotonic=ManualClock().monotonic,
        max_records=10,
        max_pending_records=10,
    )
    writer.start()
    held = asyncio.create_task(writer.write(_batch(None, "3" * 32, spans=8)))
    await asyncio.to_thread(gated.entered.wait, 10)

    with pytest.raises(ResourceExhausted):
        await writer.write(_batch(None, "4" * 32, spans=3))
    gated.gate.set()
    assert await held is True
    await writer.close()


def test_health_reports_the_ingest_queue_and_degrades_when_it_lags() -> None:
    clock = ManualClock()
    lag = IngestLag(pending_records=3, oldest_age_s=0.5)
    health = HealthReporter(storage="sqlite", clock=clock, ingest_lag=lambda: lag)
    fine = health.report()
    lag = IngestLag(pending_records=9000, oldest_age_s=42.0)
    lagging = health.report()

    assert (fine.status, fine.detail) == ("ok", "ingest queue: 3 records waiting, oldest 0.5 s")
    assert lagging.status == "degraded"
    assert lagging.detail == "ingest queue: 9000 records waiting, oldest 42.0 s"
