"""Analytics on the SQL trace store (`mcpd.storage.sql.signals.analytics`): group figures and
cost buckets over a small hand-built dataset, with the figures worked out by hand."""

from __future__ import annotations

import random
from collections.abc import Iterator
from typing import Any

import pytest

from mcpd.signals.batch import SignalBatch
from mcpd.signals.queries import CostPoint, GroupFigures, LatencyFigures, Window
from mcpd.signals.rows import SpanRow
from mcpd.signals.stats import latency_figures
from mcpd.storage.sql.stores import SqlTraceStore
from tests.libs.signals.samples import MS, T0, span
from tests.libs.storage.helpers import Migrated

MINUTE = 60_000 * MS
HOUR = 60 * MINUTE
HALF_HOUR_NS = 30 * MINUTE
MIDNIGHT = T0 - T0 % HALF_HOUR_NS  # T0 is midnight plus 123 ns
WINDOW = Window(T0, T0 + HOUR)


def root(trace_id: str, start: int, duration_ms: int, **overrides: Any) -> SpanRow:
    return span(
        "root",
        trace_id=trace_id,
        is_root=True,
        kind="agent_run",
        start_time=start,
        end_time=start + duration_ms * MS,
        duration_ns=duration_ms * MS,
        **overrides,
    )


def call(
    trace_id: str,
    span_id: str,
    start: int,
    duration_ms: int,
    model: str,
    provider: str,
    tokens: tuple[int, int],
    cost: float,
    **overrides: Any,
) -> SpanRow:
    """A model call under the trace's root."""
    return span(
        span_id,
        trace_id=trace_id,
        parent_span_id="root",
        kind="model_generation",
        start_time=start,
        end_time=start + duration_ms * MS,
        duration_ns=duration_ms * MS,
        model=model,
        provider=provider,
        input_tokens=tokens[0],
        output_tokens=tokens[1],
        total_tokens=sum(tokens),
        cost_currency="USD",
        total_cost=cost,
        **overrides,
    )


DATASET: list[SpanRow] = [
    # t1: an error (its claude call failed), at the window's first instant.
    root("t1", T0, 100, environment="prod", name="chat"),
    call("t1", "m1", T0 + MS, 40, "gpt", "openai", (10, 5), 0.25),
    call("t1", "m2", T0 + 2 * MS, 50, "claude", "anthropic", (20, 10), 0.5, status="error"),
    # t2
    root("t2", T0 + 10 * MINUTE, 200, environment="prod", name="search"),
    call("t2", "m1", T0 + 10 * MINUTE + MS, 30, "gpt", "openai", (1, 2), 1.0),
    # t3: no environment, no usage, no cost; in the second half hour.
    root("t3", T0 + 59 * MINUTE, 300, environment=None, name="chat"),
    # Outside the window: at its (exclusive) end, just before its start.
    root("t4", T0 + HOUR, 400, environment="prod", name="chat"),
    call("t4", "m1", T0 + HOUR + MS, 10, "gpt", "openai", (100, 100), 5.0),
    root("t5", T0 - 1, 500, environment="prod", name="chat"),
]


@pytest.fixture
def store(backend: str, migrated: Migrated) -> Iterator[SqlTraceStore]:
    """A migrated SQL trace store holding DATASET in project p, and a trace of project q."""
    opened: SqlTraceStore = migrated.open("trace", backend).store
    other = root("t1", T0, 999, project="q", environment="prod", name="chat")
    opened.write_batches([_batch("p", DATASET), _batch("q", [other])])
    try:
        yield opened
    finally:
        opened.close()


def _batch(project: str, spans: list[SpanRow]) -> SignalBatch:
    return SignalBatch(key_project=project, ingest_key=None, received_at=T0, spans=spans)


def latency(*durations_ms: int) -> LatencyFigures:
    return latency_figures([ms * MS for ms in durations_ms])


# --- group_figures -------------------------------------------------------------------------------


def test_ungrouped_figures_are_over_the_traces_in_the_window(store: SqlTraceStore) -> None:
    (figures,) = store.group_figures("p", WINDOW, None)

    assert figures == GroupFigures(
        key=None,
        count=3,
        error_count=1,
        span_count=6,
        input_tokens=31,
        output_tokens=17,
        total_cost=1.75,
        latency=latency(100, 200, 300),
    )
    assert (figures.latency.p50, figures.latency.mean, figures.latency.max) == (200, 200, 300)
    assert figures.latency.p90 == pytest.approx(280.0)
    assert figures.latency.p99 == pytest.approx(298.0)


def test_a_trace_dimension_groups_traces_and_unset_is_the_empty_key(
    store: SqlTraceStore,
) -> None:
    assert store.group_figures("p", WINDOW, "environment") == [
        GroupFigures(
            key="",
            count=1,
            error_count=0,
            span_count=1,
            input_tokens=0,
            output_tokens=0,
            total_cost=None,
            latency=latency(300),
        ),
        GroupFigures(
            key="prod",
            count=2,
            error_count=1,
            span_count=5,
            input_tokens=31,
            output_tokens=17,
            total_cost=1.75,
            latency=latency(100, 200),
        ),
    ]
    by_status = store.group_figures("p", WINDOW, "status")
    assert [(g.key, g.count, g.error_count) for g in by_status] == [("error", 1, 1), ("ok", 2, 0)]


def test_a_span_dimension_groups_the_spans_that_carry_it(store: SqlTraceStore) -> None:
    assert store.group_figures("p", WINDOW, "model") == [
        GroupFigures(
            key="claude",
            count=1,
            error_count=1,
            span_count=1,
            input_tokens=20,
            output_tokens=10,
            total_cost=0.5,
            latency=latency(50),
        ),
        GroupFigures(
            key="gpt",
            count=2,
            error_count=0,
            span_count=2,
            input_tokens=11,
            output_tokens=7,
            total_cost=1.25,
            latency=latency(30, 40),
        ),
    ]
    by_provider = store.group_figures("p", WINDOW, "provider")
    assert [(g.key, g.count) for g in by_provider] == [("anthropic", 1), ("openai", 2)]


def test_the_window_is_half_open_and_either_side_may_be_open(store: SqlTraceStore) -> None:
    def count(window: Window) -> int:
        (figures,) = store.group_figures("p", window, None)
        return figures.count

    assert count(Window()) == 5
    assert count(Window(start=T0)) == 4  # t4 at the old end is in; t5 before the start is not
    assert count(Window(end=T0 + HOUR)) == 4
    assert count(Window(T0 + 10 * MINUTE, T0 + 59 * MINUTE)) == 1


def test_an_empty_window_has_one_empty_row_ungrouped_and_no_groups(store: SqlTraceStore) -> None:
    empty = Window(T0 + 2 * HOUR, T0 + 3 * HOUR)

    assert store.group_figures("p", empty, None) == [
        GroupFigures(
            key=None,
            count=0,
            error_count=0,
            span_count=0,
            input_tokens=0,
            output_tokens=0,
            total_cost=None,
            latency=LatencyFigures(),
        )
    ]
    assert store.group_figures("p", empty, "environment") == []
    assert store.group_figures("p", empty, "model") == []


def test_quantiles_are_percentile_cont_of_the_durations(backend: str, migrated: Migrated) -> None:
    rng = random.Random(11)
    durations = {name: [rng.randrange(1, 5_000_000_000) for _ in range(37)] for name in "ab"}
    spans = [
        span(
            f"{name}{i}",
            trace_id=f"{name}{i}",
            is_root=True,
            name=name,
            start_time=T0 + i,
            end_time=T0 + i + duration,
            duration_ns=duration,
        )
        for name, values in durations.items()
        for i, duration in enumerate(values)
    ]
    store: SqlTraceStore = migrated.open("trace", backend).store
    try:
        store.write_batches([_batch("p", spans)])

        groups = store.group_figures("p", WINDOW, "name")
    finally:
        store.close()

    for group in groups:
        expected = latency_figures(durations[str(group.key)])
        assert (group.latency.p50, group.latency.p90) == (expected.p50, expected.p90)
        assert (group.latency.p95, group.latency.p99) == (expected.p95, expected.p99)
        assert group.latency.max == expected.max
        assert group.latency.mean == pytest.approx(expected.mean, rel=1e-12)


# --- cost_points ---------------------------------------------------------------------------------


def test_cost_points_bucket_from_the_epoch_and_count_a_missing_cost_as_zero(
    store: SqlTraceStore,
) -> None:
    assert store.cost_points("p", WINDOW, None, HALF_HOUR_NS) == [
        CostPoint(MIDNIGHT, "", total_cost=1.75, input_tokens=31, output_tokens=17),
        CostPoint(MIDNIGHT + HALF_HOUR_NS, "", total_cost=0.0, input_tokens=0, output_tokens=0),
    ]


def test_cost_points_by_a_trace_dimension(store: SqlTraceStore) -> None:
    assert store.cost_points("p", WINDOW, "environment", HALF_HOUR_NS) == [
        CostPoint(MIDNIGHT, "prod", total_cost=1.75, input_tokens=31, output_tokens=17),
        CostPoint(MIDNIGHT + HALF_HOUR_NS, "", total_cost=0.0, input_tokens=0, output_tokens=0),
    ]


def test_cost_points_by_a_span_dimension(store: SqlTraceStore) -> None:
    assert store.cost_points("p", Window(), "model", HOUR) == [
        CostPoint(MIDNIGHT, "claude", total_cost=0.5, input_tokens=20, output_tokens=10),
        CostPoint(MIDNIGHT, "gpt", total_cost=1.25, input_tokens=11, output_tokens=7),
        CostPoint(MIDNIGHT + HOUR, "gpt", total_cost=5.0, input_tokens=100, output_tokens=100),
    ]


def test_cost_points_keep_within_the_window(store: SqlTraceStore) -> None:
    # t5 (before the window's start) is in; t4 (at its end) and its cost of 5 are not.
    points = store.cost_points("p", Window(end=T0 + HOUR), None, HALF_HOUR_NS)

    assert [(p.bucket_start, p.total_cost) for p in points] == [
        (MIDNIGHT, 1.75),
        (MIDNIGHT + HALF_HOUR_NS, 0.0),
    ]
