"""Group commit: concurrent ingest requests share one storage transaction.

Every request hands its SignalBatch to `BatchWriter.write` and waits. One writer task takes
everything that is waiting (up to `max_records` records), writes it with ONE
`TraceStore.write_batches` call in a worker thread, and only then answers each waiting request:
nothing is acknowledged before it is durable, and a burst of small requests costs one commit
instead of one each. While a transaction runs, the next group gathers.

When a group fails, the writer retries its batches one at a time, so one bad batch fails only
its own request. The queue is bounded: past `max_pending_records` a request is refused with
ResourceExhausted and a retry delay (HTTP 429 with `Retry-After`, gRPC RESOURCE_EXHAUSTED with a
RetryInfo; OTLP clients retry) instead of growing memory without limit; what waits before the
queue is bounded by `services.ingest.admission`. `lag()` reports the queue depth and the age of
the oldest unwritten record (HealthStatus detail and the `mcpd.ingest.queue.*` metrics).
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from opentelemetry import metrics

from mcpd.runtime.errors import Unavailable
from mcpd.signals.batch import IngestLag, SignalBatch
from mcpd.storage.interfaces import BatchWrites
from services.ingest.admission import busy

log = logging.getLogger(__name__)

DEFAULT_MAX_RECORDS = 20_000
DEFAULT_MAX_PENDING_RECORDS = 500_000


@dataclass(slots=True)
class _Waiting:
    batch: SignalBatch
    enqueued_at: float
    done: asyncio.Future[bool]


class BatchWriter:
    """Writes SignalBatches through one storage transaction per group (see module docstring)."""

    def __init__(
        self,
        store: BatchWrites,
        *,
        monotonic: Callable[[], float],
        max_records: int = DEFAULT_MAX_RECORDS,
        max_pending_records: int = DEFAULT_MAX_PENDING_RECORDS,
    ) -> None:
        self._store = store
        self._monotonic = monotonic
        self._max_records = max_records
        self._max_pending = max_pending_records
        self._queue: deque[_Waiting] = deque()
        self._in_flight: list[_Waiting] = []
        self._pending_records = 0
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._closing = False
        meter = metrics.get_meter("mcpd.ingest")
        meter.create_observable_gauge(
            "mcpd.ingest.queue.depth",
            callbacks=[lambda _options: [metrics.Observation(self.lag().pending_records)]],
            unit="{record}",
            description="Records accepted by ingest and not yet written to storage.",
        )
        meter.create_observable_gauge(
            "mcpd.ingest.queue.oldest_age",
            callbacks=[lambda _options: [metrics.Observation(self.lag().oldest_age_s)]],
            unit="s",
            description="How long the oldest unwritten record has waited.",
        )

    def start(self) -> None:
        """Start the writer task on the running loop."""
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run(), name="batch-writer")

    async def close(self) -> None:
        """Write what is queued, then stop. Requests after this are refused."""
        self._closing = True
        self._wake.set()
        if self._task is not None:
            await self._task
            self._task = None

    async def write(self, batch: SignalBatch) -> bool:
        """Write `batch` durably; True when written, False when its ingest_key was a replay."""
        if self._closing:
            raise Unavailable("ingest is shutting down; retry against another replica")
        count = batch.record_count()
        if self._pending_records + count > self._max_pending and self._pending_records:
            raise busy(
                f"ingest queue is full ({self._pending_records} records waiting); retry later"
            )
        self.start()
        waiting = _Waiting(batch, self._monotonic(), asyncio.get_running_loop().create_future())
        self._queue.append(waiting)
        self._pending_records += count
        self._wake.set()
        return await waiting.done

    def lag(self) -> IngestLag:
        """Queue depth and the oldest unwritten record's age, in-flight group included."""
        oldest = (
            self._in_flight[0] if self._in_flight else (self._queue[0] if self._queue else None)
        )
        age = self._monotonic() - oldest.enqueued_at if oldest else 0.0
        return IngestLag(pending_records=self._pending_records, oldest_age_s=max(age, 0.0))

    async def _run(self) -> None:
        while True:
            if not self._queue:
                if self._closing:
                    return
                self._wake.clear()
                await self._wake.wait()
                continue
            self._in_flight = self._take_group()
            try:
                await self._write_group(self._in_flight)
            finally:
                self._pending_records -= sum(w.batch.record_count() for w in self._in_flight)
                self._in_flight = []

    def _take_group(self) -> list[_Waiting]:
        group = [self._queue.popleft()]
        records = group[0].batch.record_count()
        while self._queue and records + self._queue[0].batch.record_count() <= self._max_records:
            waiting = self._queue.popleft()
            records += waiting.batch.record_count()
            group.append(waiting)
        return group

    async def _write_group(self, group: list[_Waiting]) -> None:
        try:
            outcomes = await asyncio.to_thread(self._store.write_batches, [w.batch for w in group])
        except Exception as error:
            if len(group) == 1:
                _fail(group, error)
                return
            log.warning("group write of %d batches failed; retrying one by one", len(group))
            for waiting in group:
                await self._write_group([waiting])
            return
        for waiting, stored in zip(group, outcomes, strict=True):
            if not waiting.done.done():
                waiting.done.set_result(stored)


def _fail(group: Iterable[_Waiting], error: Exception) -> None:
    for waiting in group:
        if not waiting.done.done():
            waiting.done.set_exception(error)
