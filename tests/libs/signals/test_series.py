"""Metric series (`mcpd.signals.series`): bucket choice, and raw points aggregated into series."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from mcpd.model.v1 import query_pb2
from mcpd.runtime.errors import InvalidArgument
from mcpd.signals.messages import nanos_of, python_of
from mcpd.signals.queries import Window
from mcpd.signals.rows import MetricRow
from mcpd.signals.series import aggregate, choose_bucket
from mcpd.signals.stats import quantile
from tests.libs.signals.samples import T0, metric

S = 1_000_000_000
MINUTE = 60 * S
HOUR = 60 * MINUTE
DAY = 24 * HOUR
WEEK = 7 * DAY
# Midnight: every bucket width below divides it, so bucket starts are BASE + k * width.
BASE = T0 - T0 % DAY
WINDOW = Window(BASE, BASE + HOUR)


def point(metric_id: str, at_s: float, value: float = 1.0, **overrides: Any) -> MetricRow:
    """A point `at_s` seconds after BASE."""
    return metric(metric_id, timestamp=BASE + int(at_s * S), value=value, **overrides)


def histogram(
    metric_id: str,
    at_s: float,
    counts: Sequence[float],
    *,
    bounds: Sequence[float] = (10.0, 20.0, 40.0),
    low: float | None = 10.0,
    high: float | None = 40.0,
    total: float = 0.0,
    temporality: str = "delta",
    **overrides: Any,
) -> MetricRow:
    """A histogram point as OTLP ingest stores it (docs/otlp.md)."""
    buckets = {
        "bounds": list(bounds),
        "counts": list(counts),
        "count": sum(counts),
        "sum": total,
        "min": low,
        "max": high,
        "temporality": temporality,
    }
    return point(metric_id, at_s, total, kind="histogram", buckets=buckets, **overrides)


def series_of(
    points: Sequence[MetricRow],
    agg: str | None = None,
    *,
    group_by: Sequence[str] = (),
    bucket_s: int = 60,
    window: Window = WINDOW,
) -> query_pb2.MetricSeriesResponse:
    return aggregate(points, window=window, bucket_s=bucket_s, agg=agg, group_by=group_by)


def lines(
    response: query_pb2.MetricSeriesResponse,
) -> list[tuple[Any, list[tuple[int, float, int]]]]:
    """Each series as (labels, [(bucket offset from BASE in s, value, count)])."""
    return [
        (
            python_of(series.labels),
            [((nanos_of(p.timestamp) - BASE) // S, p.value, p.count) for p in series.points],
        )
        for series in response.series
    ]


def values(response: query_pb2.MetricSeriesResponse) -> list[float]:
    """The values of a response's only series."""
    (series,) = response.series
    return [p.value for p in series.points]


# --- choose_bucket -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("start", "end", "expected"),
    [
        (BASE, BASE + 10 * S, 1),
        (BASE, BASE + HOUR, 30),  # exactly 120 buckets
        (BASE + S, BASE + HOUR + S, 60),  # unaligned: 30 s would touch 121 buckets
        (BASE, BASE + 30 * DAY, 21600),
        (BASE, BASE + 119 * WEEK, 604800),
        (0, 240 * WEEK, 2 * 604800),  # beyond the nice widths: whole weeks
    ],
)
def test_the_chosen_bucket_is_the_smallest_nice_width_within_120_buckets(
    start: int, end: int, expected: int
) -> None:
    assert choose_bucket(Window(start, end), None) == expected


def test_a_requested_bucket_is_honoured() -> None:
    assert choose_bucket(WINDOW, 7) == 7
    # 10,000 one-second buckets is the most served.
    assert choose_bucket(Window(BASE, BASE + 10_000 * S), 1) == 1


@pytest.mark.parametrize(
    ("window", "requested"), [(WINDOW, 0), (WINDOW, -5), (Window(BASE, BASE + 10_001 * S), 1)]
)
def test_an_unservable_bucket_is_refused(window: Window, requested: int) -> None:
    with pytest.raises(InvalidArgument) as refused:
        choose_bucket(window, requested)
    assert refused.value.field == "bucket"


def test_a_bucket_needs_both_ends_of_the_window() -> None:
    with pytest.raises(ValueError, match="both ends"):
        choose_bucket(Window(start=BASE), None)


# --- counters and gauges -------------------------------------------------------------------------


def test_counters_sum_per_bucket_oldest_first_and_leave_empty_buckets_out() -> None:
    points = [
        point("c", 150, 4, kind="counter", unit="{request}"),
        point("a", 10, 1, kind="counter", unit="{request}"),
        point("b", 59.5, 2, kind="counter", unit="{request}"),
        point("d", 179, 0, kind="counter", unit="{request}"),
    ]

    response = series_of(points)

    assert response.name == "queue.depth"
    assert response.unit == "{request}"
    assert response.bucket == "60s"
    assert lines(response) == [({}, [(0, 3.0, 2), (120, 4.0, 2)])]


def test_a_counter_answers_only_sum() -> None:
    with pytest.raises(InvalidArgument) as refused:
        series_of([point("a", 1, kind="counter")], "mean")
    assert refused.value.field == "agg"
    assert "sum" in refused.value.message


@pytest.mark.parametrize(
    ("agg", "expected"),
    [
        (None, [2.0, 7.0]),
        ("last", [2.0, 7.0]),
        ("min", [2.0, 7.0]),
        ("max", [9.0, 7.0]),
        ("mean", [5.0, 7.0]),
    ],
)
def test_gauge_aggregations(agg: str | None, expected: list[float]) -> None:
    points = [point("a", 1, 4), point("b", 2, 9), point("c", 30, 2), point("d", 61, 7)]

    response = series_of(points, agg)

    assert values(response) == expected
    assert [p.count for p in response.series[0].points] == [3, 1]


def test_last_is_the_newest_point_whatever_the_input_order() -> None:
    points = [point("z", 30, 1), point("a", 10, 2), point("b", 30, 3)]

    # Equal timestamps fall back to metric_id: "z" is the later of the two.
    assert values(series_of(points)) == [1.0]


@pytest.mark.parametrize("agg", ["sum", "p95", "count", "median"])
def test_a_gauge_refuses_what_it_cannot_answer(agg: str) -> None:
    with pytest.raises(InvalidArgument) as refused:
        series_of([point("a", 1)], agg)
    assert refused.value.field == "agg"
    assert "last, min, max, mean" in refused.value.message


def test_points_outside_the_window_are_ignored() -> None:
    window = Window(BASE + 60 * S, BASE + 120 * S)
    points = [point("a", 59.999, 1), point("b", 60, 2), point("c", 119.5, 3), point("d", 120, 4)]

    assert values(series_of(points, "mean", window=window)) == [2.5]


def test_the_newest_kind_is_the_metric_kind_and_other_points_are_left_out() -> None:
    points = [point("a", 1, 100, kind="gauge"), point("b", 2, 3, kind="counter")]

    assert lines(series_of(points)) == [({}, [(0, 3.0, 1)])]


def test_no_points_make_no_series() -> None:
    response = series_of([], bucket_s=300)

    assert response == query_pb2.MetricSeriesResponse(bucket="300s")


# --- series and exemplars ------------------------------------------------------------------------


def test_each_label_set_is_a_series_ordered_by_canonical_json() -> None:
    points = [
        point("a", 1, 1, labels={"route": "/pay", "code": 200}),
        point("b", 2, 2, labels=None),
        point("c", 3, 3, labels={"code": 200, "route": "/pay"}),
        point("d", 4, 4, labels={"code": 500, "route": "/pay"}),
    ]

    assert lines(series_of(points, "max")) == [
        ({"code": 200, "route": "/pay"}, [(0, 3.0, 2)]),
        ({"code": 500, "route": "/pay"}, [(0, 4.0, 1)]),
        ({}, [(0, 2.0, 1)]),
    ]


def test_group_by_keeps_only_those_keys_and_a_missing_key_groups_under_null() -> None:
    points = [
        point("a", 1, 1, kind="counter", labels={"route": "/pay", "code": 200}),
        point("b", 2, 2, kind="counter", labels={"route": "/pay", "code": 500}),
        point("c", 3, 4, kind="counter", labels={"code": 200}),
        point("d", 4, 8, kind="counter", labels=None),
    ]

    assert lines(series_of(points, group_by=["route"])) == [
        ({"route": "/pay"}, [(0, 3.0, 2)]),
        ({"route": None}, [(0, 12.0, 2)]),
    ]


def test_the_exemplar_is_the_largest_traced_point_of_the_bucket() -> None:
    points = [
        point("a", 1, 5, trace_id="t-small"),
        point("b", 2, 9, trace_id=None),
        point("c", 3, 7, trace_id="t-large"),
        point("d", 4, 7, trace_id="t-later"),
        point("e", 61, 1),
    ]

    first, second = series_of(points).series[0].points

    assert first.exemplar_trace_id == "t-large"
    assert not second.HasField("exemplar_trace_id")


# --- histograms ----------------------------------------------------------------------------------


def test_histogram_points_of_a_bucket_merge_their_counts() -> None:
    # Merged: 6 observations in (10, 20], 10 in (20, 40]; min 10, max 40.
    points = [
        histogram("a", 1, [0, 4, 4, 0], total=200, trace_id="t-a"),
        histogram("b", 2, [0, 2, 6, 0], total=240, trace_id="t-b"),
    ]

    assert lines(series_of(points, "count")) == [({}, [(0, 16.0, 16)])]
    assert values(series_of(points, "sum")) == [440.0]
    assert values(series_of(points, "mean")) == [27.5]
    assert values(series_of(points, "p50")) == [pytest.approx(24.0)]  # 20 + 20 * 2/10
    assert values(series_of(points, "p25")) == [pytest.approx(10 + 10 * 4 / 6)]
    assert values(series_of(points, "p100")) == [40.0]
    assert values(series_of(points, "p0")) == [10.0]
    assert series_of(points).series[0].points[0].exemplar_trace_id == "t-b"


def test_the_default_histogram_aggregation_is_p95() -> None:
    points = [histogram("a", 1, [0, 0, 10, 0])]

    assert values(series_of(points)) == values(series_of(points, "p95"))
    assert values(series_of(points)) == [pytest.approx(20 + 20 * 0.95)]


def test_open_ended_buckets_are_bounded_by_min_and_max_or_collapse_onto_their_edge() -> None:
    bounded = histogram("a", 1, [2, 0, 0, 2], low=0.0, high=100.0)
    unbounded = histogram("b", 1, [2, 0, 0, 2], low=None, high=None)

    assert values(series_of([bounded], "p25")) == [pytest.approx(5.0)]  # half of (0, 10]
    assert values(series_of([bounded], "p75")) == [pytest.approx(70.0)]  # half of (40, 100]
    assert values(series_of([unbounded], "p25")) == [10.0]
    assert values(series_of([unbounded], "p90")) == [40.0]


def test_buckets_are_clamped_to_min_and_max() -> None:
    points = [histogram("a", 1, [0, 4, 0, 0], low=12.0, high=16.0)]

    assert values(series_of(points, "p50")) == [pytest.approx(14.0)]


def test_raw_observations_take_percentile_cont() -> None:
    observed = [3.0, 100.0, 1.0, 2.0]
    points = [point(f"p{i}", i, value, kind="histogram") for i, value in enumerate(observed)]

    response = series_of(points, "p90")

    assert values(response) == [quantile(sorted(observed), 0.9)]
    assert response.series[0].points[0].count == 4
    assert values(series_of(points, "mean")) == [26.5]


def test_a_raw_observation_beside_a_histogram_is_a_point_mass() -> None:
    points = [
        histogram("a", 1, [0, 4, 0, 0], low=None, high=None),  # 4 spread over (10, 20]
        point("b", 2, 100.0, kind="histogram"),
    ]

    assert values(series_of(points, "p50")) == [pytest.approx(16.25)]  # 2.5 of 4 in (10, 20]
    assert values(series_of(points, "p100")) == [100.0]


def test_a_summary_spreads_its_count_between_its_quantiles() -> None:
    buckets = {
        "bounds": [],
        "counts": [10],
        "count": 10,
        "sum": 300.0,
        "min": None,
        "max": None,
        "quantiles": [{"quantile": 0.5, "value": 20.0}, {"quantile": 0.9, "value": 60.0}],
    }
    points = [point("a", 1, 300.0, kind="histogram", buckets=buckets)]

    assert values(series_of(points, "p50")) == [20.0]
    assert values(series_of(points, "p70")) == [pytest.approx(40.0)]
    assert values(series_of(points, "p95")) == [60.0]
    assert values(series_of(points, "mean")) == [30.0]


def test_cumulative_histograms_become_increases_per_stream() -> None:
    def cumulative(metric_id: str, at_s: float, counts: list[float], **kw: Any) -> MetricRow:
        return histogram(metric_id, at_s, counts, temporality="cumulative", **kw)

    points = [
        cumulative("a1", 5, [0, 4, 0, 0], total=60, labels={"host": "a"}),  # baseline
        cumulative("a2", 65, [0, 5, 2, 0], total=135, labels={"host": "a"}),  # +1, +2
        cumulative("a3", 125, [0, 1, 0, 0], total=15, labels={"host": "a"}),  # restarted
        cumulative("b1", 70, [0, 9, 9, 0], total=400, labels={"host": "b"}),  # baseline
    ]

    assert lines(series_of(points, "count", group_by=["metric"])) == [
        ({"metric": None}, [(60, 3.0, 3), (120, 1.0, 1)])
    ]
    assert values(series_of(points, "sum", group_by=["metric"])) == [75.0, 15.0]


def test_a_histogram_bucket_without_observations_has_a_count_but_no_quantile() -> None:
    points = [
        histogram("a", 1, [0, 3, 0, 0], temporality="cumulative"),
        histogram("b", 61, [0, 3, 0, 0], temporality="cumulative"),  # nothing new
    ]

    assert lines(series_of(points, "count")) == [({}, [(60, 0.0, 0)])]
    assert series_of(points, "p50").series == []


def test_a_histogram_with_nothing_to_place_has_no_quantile() -> None:
    points = [histogram("a", 1, [5], bounds=(), low=None, high=None)]

    assert series_of(points, "p50").series == []
    assert values(series_of(points, "count")) == [5.0]


@pytest.mark.parametrize("agg", ["last", "p101", "p", "p9x", "max"])
def test_a_histogram_refuses_what_it_cannot_answer(agg: str) -> None:
    with pytest.raises(InvalidArgument) as refused:
        series_of([histogram("a", 1, [0, 1, 0, 0])], agg)
    assert refused.value.field == "agg"
    assert "pNN" in refused.value.message
