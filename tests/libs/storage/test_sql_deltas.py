"""Delta polling (`TraceStore.deltas`) on SQLite and PostgreSQL: arrival order, positions,
has_more, re-written rows arriving again, and no row skipped or repeated while several writers
commit concurrently."""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Iterator, Sequence
from typing import Any

import pytest
from sqlalchemy import select

from mcpd.runtime.errors import InvalidArgument
from mcpd.signals.batch import SignalBatch
from mcpd.signals.queries import DeltaPage, DeltaPosition
from mcpd.signals.rollups import DAY_NS
from mcpd.signals.rows import LogRow, SpanRow, TraceRow
from mcpd.storage.sql.dialect import SqlDialect
from mcpd.storage.sql.schema import trace as schema
from mcpd.storage.sql.signals import write_batches
from mcpd.storage.sql.stores import SqlTraceStore
from mcpd.testing.eventually import eventually
from tests.libs.signals.samples import MS, T0, log, span
from tests.libs.storage.helpers import Migrated, OpenedStore
from tests.libs.storage.query_data import quiesce

IDENTITY = {"traces": ("trace_id",), "spans": ("trace_id", "span_id"), "logs": ("log_id",)}


@pytest.fixture
def opened(backend: str, migrated: Migrated) -> Iterator[OpenedStore]:
    store = migrated.open("trace", backend)
    try:
        yield store
    finally:
        store.store.close()


@pytest.fixture
def store(opened: OpenedStore) -> SqlTraceStore:
    trace_store: SqlTraceStore = opened.store
    return trace_store


def settle(store: SqlTraceStore) -> None:
    """Wait until a poll sees every committed row: on PostgreSQL a transaction of another
    test may hold the poll horizon back for a moment (`query_data.quiesce`)."""
    quiesce(OpenedStore(store.backend, store, [], engine=store.engine))


def batch(
    *, spans: Sequence[SpanRow] = (), logs: Sequence[LogRow] = (), project: str = "p"
) -> SignalBatch:
    return SignalBatch(
        key_project=project,
        ingest_key=None,
        received_at=T0,
        spans=list(spans),
        logs=list(logs),
    )


def identity(signal: str, row: dict[str, Any]) -> tuple[str, ...]:
    return tuple(row[name] for name in IDENTITY[signal])


def drain(store: SqlTraceStore, signal: str, position: DeltaPosition, limit: int = 100) -> Any:
    """Every row waiting after `position`, and the position after the last one."""
    settle(store)
    rows: list[dict[str, Any]] = []
    while True:
        page = store.deltas("p", signal, position, limit=limit)
        rows.extend(page.rows)
        position = page.position
        if not page.has_more:
            return rows, position


def test_no_position_answers_no_rows_and_the_end_so_only_later_rows_arrive(
    store: SqlTraceStore,
) -> None:
    store.write_batches([batch(spans=[span("early")], logs=[log("early")])])
    # On PostgreSQL the end is the oldest transaction in flight: while another test's is open,
    # rows committed after it started still lie ahead (they would arrive, not be skipped).
    settle(store)
    starts = {signal: store.deltas("p", signal, None, limit=10) for signal in IDENTITY}
    for page in starts.values():
        assert page.rows == []
        assert page.has_more is False
        assert page.position.key == ()

    store.write_batches([batch(spans=[span("late", trace_id="t2")], logs=[log("late")])])

    spans, _ = drain(store, "spans", starts["spans"].position)
    logs, _ = drain(store, "logs", starts["logs"].position)
    traces, _ = drain(store, "traces", starts["traces"].position)
    assert [row["span_id"] for row in spans] == ["late"]
    assert [row["log_id"] for row in logs] == ["late"]
    assert [row["trace_id"] for row in traces] == ["t2"]


def test_pages_walk_arrival_then_identity_order_with_has_more(store: SqlTraceStore) -> None:
    start = store.deltas("p", "spans", None, limit=1).position
    store.write_batches([batch(spans=[span("c"), span("a"), span("b", trace_id="t0")])])
    store.write_batches([batch(spans=[span("e"), span("d")])])
    settle(store)

    walked: list[list[str]] = []
    flags: list[bool] = []
    position = start
    for _ in range(3):
        page = store.deltas("p", "spans", position, limit=2)
        walked.append([row["span_id"] for row in page.rows])
        flags.append(page.has_more)
        position = page.position

    # Within one transaction, identity order: (t0, b) before (t1, a) before (t1, c).
    assert walked == [["b", "a"], ["c", "d"], ["e"]]
    assert flags == [True, True, False]
    assert position.key == ("t1", "e")
    # An empty poll keeps the position: a row landing a moment later is not lost.
    empty = store.deltas("p", "spans", position, limit=2)
    assert empty == DeltaPage(rows=[], position=position, has_more=False)
    store.write_batches([batch(spans=[span("f")])])
    settle(store)
    assert [row["span_id"] for row in store.deltas("p", "spans", position, limit=2).rows] == ["f"]


def test_a_full_page_with_nothing_after_it_has_no_more(store: SqlTraceStore) -> None:
    start = store.deltas("p", "logs", None, limit=1).position
    store.write_batches([batch(logs=[log("1"), log("2")])])
    settle(store)

    page = store.deltas("p", "logs", start, limit=2)

    assert [row["log_id"] for row in page.rows] == ["1", "2"]
    assert page.has_more is False


def test_rows_carry_exactly_the_row_keys_and_the_values_written(store: SqlTraceStore) -> None:
    starts = {signal: store.deltas("p", signal, None, limit=1).position for signal in IDENTITY}
    written_span = span("s1", input={"prompt": "hello"}, tags=["x"], is_root=True)
    written_log = log("l1", fields={"k": 1})
    store.write_batches([batch(spans=[written_span], logs=[written_log])])

    (span_row,), _ = drain(store, "spans", starts["spans"])
    (log_row,), _ = drain(store, "logs", starts["logs"])
    (trace_row,), _ = drain(store, "traces", starts["traces"])

    assert span_row == written_span
    assert log_row == written_log
    assert set(span_row) == SpanRow.__required_keys__ | SpanRow.__optional_keys__
    assert set(log_row) == LogRow.__required_keys__ | LogRow.__optional_keys__
    assert set(trace_row) == TraceRow.__required_keys__ | TraceRow.__optional_keys__
    stored = store.trace_records("p", "t1", logs=False, scores=False, feedback=False)
    assert stored is not None
    assert trace_row == stored.trace


def test_a_rewritten_row_arrives_again_further_on(store: SqlTraceStore) -> None:
    start = store.deltas("p", "traces", None, limit=1).position
    store.write_batches([batch(spans=[span("root", is_root=True, end_time=None)])])
    first, position = drain(store, "traces", start)
    store.write_batches([batch(spans=[span("child", start_time=T0 + MS)])])

    again, later = drain(store, "traces", position)

    assert [row["span_count"] for row in first] == [1]
    assert [row["span_count"] for row in again] == [2]
    assert later.seq > position.seq


def test_other_projects_rows_are_not_seen(store: SqlTraceStore) -> None:
    start = store.deltas("p", "spans", None, limit=1).position
    store.write_batches([batch(spans=[span("theirs", project="q")], project="q")])
    store.write_batches([batch(spans=[span("ours")])])

    rows, _ = drain(store, "spans", start)

    assert [row["span_id"] for row in rows] == ["ours"]


def test_unknown_signal_bad_limit_and_foreign_position_are_refused(store: SqlTraceStore) -> None:
    with pytest.raises(InvalidArgument) as refused:
        store.deltas("p", "scores", None, limit=10)
    assert refused.value.field == "signal"
    with pytest.raises(InvalidArgument) as refused:
        store.deltas("p", "spans", None, limit=0)
    assert refused.value.field == "limit"
    with pytest.raises(InvalidArgument) as refused:
        store.deltas("p", "spans", DeltaPosition(1, ("log-1",)), limit=10)
    assert refused.value.field == "cursor"


@pytest.mark.postgres
@pytest.mark.parametrize("backend", ["postgres"])
def test_postgres_holds_back_rows_behind_a_transaction_still_open(store: SqlTraceStore) -> None:
    """An older transaction that commits after a younger one: the younger one's rows wait
    until the older one has committed, and then both arrive, older first."""
    start = store.deltas("p", "spans", None, limit=10).position
    # Two days apart: a writer holds the rollup rows it added until it commits (decision 184),
    # so the younger would wait for the older if both counted in the same hour and day.
    later = T0 + 2 * DAY_NS
    with store.engine.begin() as older:
        write_batches(older, SqlDialect.of(store.engine), [batch(spans=[span("older")])])
        younger = span("younger", trace_id="t2", start_time=later, end_time=later + 10 * MS)
        store.write_batches([batch(spans=[younger])])
        held = store.deltas("p", "spans", start, limit=10)
        assert held == DeltaPage(rows=[], position=start, has_more=False)

    rows, _ = drain(store, "spans", start)

    assert [row["span_id"] for row in rows] == ["older", "younger"]


# --- concurrent writers ------------------------------------------------------------------------

BATCHES = 12
# Spans (and logs) per batch, per writer: big and small transactions side by side, so on
# PostgreSQL a younger, smaller one often commits before an older, bigger one.
PER_BATCH = (40, 5, 20, 5)
WRITERS = len(PER_BATCH)
TRACES = 3
# Enough text that writing a batch takes a while after its arrival stamp is drawn.
PAYLOAD = "lorem ipsum " * 200


class Poller:
    """Polls the three signals with small pages until told to stop and everything is drained."""

    def __init__(self, store: SqlTraceStore) -> None:
        self.store = store
        self.seen: dict[str, list[dict[str, Any]]] = {signal: [] for signal in IDENTITY}
        self.positions: dict[str, list[DeltaPosition]] = {signal: [] for signal in IDENTITY}
        self.start = {
            signal: store.deltas("p", signal, None, limit=1).position for signal in IDENTITY
        }

    def poll(self) -> bool:
        """One round over the signals; whether any rows came."""
        came = False
        for signal in IDENTITY:
            position = self.positions[signal][-1] if self.positions[signal] else self.start[signal]
            page = self.store.deltas("p", signal, position, limit=3)
            if page.rows:
                came = True
                self.seen[signal].extend(page.rows)
                self.positions[signal].append(page.position)
            else:
                assert page.position == position
                assert not page.has_more
        return came


def test_concurrent_writers_are_seen_exactly_once_and_traces_end_final(
    store: SqlTraceStore,
) -> None:
    poller = Poller(store)
    errors: list[BaseException] = []
    ready = threading.Barrier(WRITERS + 1)

    def writer(number: int) -> None:
        try:
            ready.wait()
            for index in range(BATCHES):
                names = [f"w{number}-b{index}-{item}" for item in range(PER_BATCH[number])]
                # Each writer its own traces, so PostgreSQL writers never wait on each other's
                # trace locks and commit in whatever order they finish; each trace is
                # re-projected batch after batch.
                spans = [
                    span(
                        name,
                        trace_id=f"w{number}-t{item % TRACES}",
                        start_time=T0 + index * MS,
                        input={"text": PAYLOAD},
                    )
                    for item, name in enumerate(names)
                ]
                store.write_batches([batch(spans=spans, logs=[log(name) for name in names])])
        except BaseException as error:  # reported to the test thread
            errors.append(error)

    threads = [threading.Thread(target=writer, args=(number,)) for number in range(WRITERS)]
    for thread in threads:
        thread.start()
    ready.wait()
    while any(thread.is_alive() for thread in threads):
        poller.poll()
    for thread in threads:
        thread.join()
    assert errors == []
    expected = BATCHES * sum(PER_BATCH)

    def every_row_seen() -> None:
        while poller.poll():
            pass
        assert len(poller.seen["spans"]) >= expected, "spans missing after the writers finished"
        assert len(poller.seen["logs"]) >= expected, "logs missing after the writers finished"

    # PostgreSQL: a transaction of another session can hold the horizon back for a moment.
    eventually(every_row_seen, timeout=60)
    settle(store)
    while poller.poll():
        pass

    for signal in ("spans", "logs"):
        counts = Counter(identity(signal, row) for row in poller.seen[signal])
        assert len(counts) == expected, signal
        assert set(counts.values()) == {1}, f"{signal} seen more than once"
    for signal, positions in poller.positions.items():
        ordered = [(position.seq, position.key) for position in positions]
        assert ordered == sorted(set(ordered)), signal
    last: dict[str, dict[str, Any]] = {}
    for row in poller.seen["traces"]:
        last[row["trace_id"]] = row
    with store.engine.connect() as conn:
        stored = conn.execute(
            select(*schema.row_columns(schema.traces)).where(schema.traces.c.project == "p")
        ).mappings()
        final = {row["trace_id"]: dict(row) for row in stored}
    assert last == final
    assert sum(row["span_count"] for row in final.values()) == expected
