"""The aggregating audit sink: allowed events and the first refusal of a key are written at
once; repeats within a window become one row with a count; the keys a window holds are bounded."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import pytest

from mcpd.auth.audit import MANY, AggregatingAuditSink, StoreAuditSink
from mcpd.model.v1 import account_pb2, enums_pb2
from mcpd.runtime.clock import ManualClock, to_timestamp
from tests.libs.auth.memory_store import MemoryControlStore

ALLOWED = enums_pb2.AUDIT_RESULT_ALLOWED
REFUSED = enums_pb2.AUDIT_RESULT_REFUSED
WINDOW_S = 60.0


@dataclass
class Sink:
    """The sink under test, the store behind it and the clock it reads."""

    sink: AggregatingAuditSink
    store: MemoryControlStore
    clock: ManualClock
    numbered: Iterator[int]

    def refusal(
        self,
        *,
        source: str = "203.0.113.9",
        principal: str = "badbadbadbadbad0",
        action: str = "list_spans",
        project: str = "a",
        reason: str = "UNKNOWN_CREDENTIALS",
        resource: str | None = None,
    ) -> account_pb2.AuditEvent:
        return account_pb2.AuditEvent(
            audit_id=f"e{next(self.numbered):04d}",
            timestamp=to_timestamp(self.clock.now()),
            principal=principal,
            action=action,
            project=project,
            resource=resource,
            result=REFUSED,
            source=source,
            reason=reason,
            count=1,
        )

    def rows(self) -> list[tuple[str, str, int]]:
        """(source, principal, count) of every row written, in order."""
        return [(e.source, e.principal, e.count) for e in self.store.audit]


def _sink(max_keys: int = 4) -> Sink:
    store, clock = MemoryControlStore(), ManualClock()
    sink = AggregatingAuditSink(
        StoreAuditSink(store), clock=clock, window_s=WINDOW_S, max_keys=max_keys
    )
    return Sink(sink, store, clock, iter(range(1, 100_000)))


@pytest.fixture
def aggregating() -> Sink:
    return _sink()


async def test_the_first_refusal_is_written_at_once_and_repeats_are_counted(
    aggregating: Sink,
) -> None:
    first = aggregating.refusal(resource="t1")
    await aggregating.sink.record(first)
    assert aggregating.store.audit == [first]
    for _ in range(9):
        aggregating.clock.advance(1)
        await aggregating.sink.record(aggregating.refusal(resource="t2"))
    await aggregating.sink.flush()
    assert len(aggregating.store.audit) == 1  # the window has not closed

    aggregating.clock.advance(WINDOW_S)
    await aggregating.sink.flush()

    folded = aggregating.store.audit[1]
    assert (folded.count, folded.audit_id, folded.source, folded.reason) == (
        9,
        "e0002",  # the first repeat, standing for all nine
        "203.0.113.9",
        "UNKNOWN_CREDENTIALS",
    )
    assert not folded.HasField("resource")
    aggregating.clock.advance(WINDOW_S)
    await aggregating.sink.flush()
    assert len(aggregating.store.audit) == 2  # written once


async def test_a_single_repeat_keeps_its_resource(aggregating: Sink) -> None:
    await aggregating.sink.record(aggregating.refusal(resource="t1"))
    await aggregating.sink.record(aggregating.refusal(resource="t2"))
    aggregating.clock.advance(WINDOW_S)
    await aggregating.sink.flush()
    assert [(e.resource, e.count) for e in aggregating.store.audit] == [("t1", 1), ("t2", 1)]


async def test_each_window_starts_over(aggregating: Sink) -> None:
    for _ in range(3):
        await aggregating.sink.record(aggregating.refusal())
    aggregating.clock.advance(WINDOW_S)
    # The next refusal closes the old window itself, before it is written as a first.
    for _ in range(2):
        await aggregating.sink.record(aggregating.refusal())
    await aggregating.sink.close()
    assert [e.count for e in aggregating.store.audit] == [1, 2, 1, 1]


@pytest.mark.parametrize(
    "differs",
    [
        {"source": "198.51.100.1"},
        {"principal": "0123456789abcdef"},
        {"action": "get_trace"},
        {"project": "b"},
        {"reason": "SCOPE_REQUIRED"},
    ],
)
async def test_keys_are_kept_apart(aggregating: Sink, differs: dict[str, str]) -> None:
    for _ in range(3):
        await aggregating.sink.record(aggregating.refusal())
        await aggregating.sink.record(aggregating.refusal(**differs))
    assert len(aggregating.store.audit) == 2
    await aggregating.sink.close()
    assert sorted(e.count for e in aggregating.store.audit) == [1, 1, 2, 2]


async def test_allowed_events_are_written_through_every_time(aggregating: Sink) -> None:
    for _ in range(3):
        allowed = aggregating.refusal()
        allowed.result = ALLOWED
        allowed.ClearField("reason")
        await aggregating.sink.record(allowed)
    assert [e.count for e in aggregating.store.audit] == [1, 1, 1]


async def test_keys_past_the_bound_fold_into_one_row_per_action(aggregating: Sink) -> None:
    # A flood of distinct bad keys: four are kept apart, the rest fold per action.
    for number in range(100):
        await aggregating.sink.record(aggregating.refusal(principal=f"key{number}"))
        await aggregating.sink.record(
            aggregating.refusal(principal=f"key{number}", action="get_trace", resource="t1")
        )
    assert aggregating.rows() == [("203.0.113.9", f"key{n}", 1) for n in (0, 0, 1, 1)]

    await aggregating.sink.close()

    overflow = {e.action: e for e in aggregating.store.audit if e.source == MANY}
    assert {action: e.count for action, e in overflow.items()} == {
        "list_spans": 98,
        "get_trace": 98,
    }
    for row in overflow.values():
        assert (row.principal, row.project, row.reason) == (MANY, "", MANY)
        assert not row.HasField("resource")
    assert sum(e.count for e in aggregating.store.audit) == 200
    assert len(aggregating.store.audit) == 6


async def test_close_writes_the_open_window_and_stops_the_flushing_task(
    aggregating: Sink,
) -> None:
    aggregating.sink.start()
    for _ in range(5):
        await aggregating.sink.record(aggregating.refusal())
    await aggregating.sink.close()
    assert [e.count for e in aggregating.store.audit] == [1, 4]
    assert "audit-aggregation" not in {task.get_name() for task in asyncio.all_tasks()}


class _Signalling(StoreAuditSink):
    """Sets `written` after each write."""

    def __init__(self, store: MemoryControlStore) -> None:
        super().__init__(store)
        self.written = asyncio.Event()

    async def record_all(self, events: Sequence[account_pb2.AuditEvent]) -> None:
        await super().record_all(events)
        self.written.set()


async def test_the_task_flushes_once_the_clock_has_left_the_window(aggregating: Sink) -> None:
    # A short window, so the task's wait for the end of it is short too; the window's end is
    # read from the manual clock, which has moved on by the time the task wakes.
    inner = _Signalling(aggregating.store)
    sink = AggregatingAuditSink(inner, clock=aggregating.clock, window_s=0.05)
    sink.start()
    try:
        for _ in range(3):
            await sink.record(aggregating.refusal())
        inner.written.clear()
        aggregating.clock.advance(1)
        async with asyncio.timeout(30):
            await inner.written.wait()
    finally:
        await sink.close()
    assert [e.count for e in aggregating.store.audit] == [1, 2]


async def test_a_failed_write_of_counted_rows_is_logged_not_raised(
    aggregating: Sink, caplog: pytest.LogCaptureFixture
) -> None:
    await aggregating.sink.record(aggregating.refusal())
    await aggregating.sink.record(aggregating.refusal())
    aggregating.store.fail_audit = True
    aggregating.clock.advance(WINDOW_S)
    await aggregating.sink.flush()
    assert "audit write failed for 1 counted refusal rows" in caplog.text
    # A first refusal still raises: the interceptor logs it there, with its method.
    with pytest.raises(OSError, match="disk full"):
        await aggregating.sink.record(aggregating.refusal())


def test_the_window_and_the_bound_must_be_positive() -> None:
    inner = StoreAuditSink(MemoryControlStore())
    with pytest.raises(ValueError, match="positive"):
        AggregatingAuditSink(inner, clock=ManualClock(), window_s=0)
    with pytest.raises(ValueError, match="positive"):
        AggregatingAuditSink(inner, clock=ManualClock(), max_keys=0)
