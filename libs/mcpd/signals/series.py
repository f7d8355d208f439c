"""Metric series: a metric's raw points bucketed into chart lines, the same way on every backend.

Stores hand back raw points (`TraceStore.metric_points`); the aggregation is done here once, so
SQLite, PostgreSQL and ClickHouse cannot disagree about what a bucket holds. The rules:

* Buckets are `bucket_s` wide and aligned to the Unix epoch (a bucket starts at a multiple of
  its width), so a chart refreshed a minute later keeps its buckets, and cost buckets line up.
* A metric has one kind: the kind of its newest point. Points of another kind (a producer that
  changed temporality, see docs/otlp.md) are left out rather than mixed into a meaningless sum.
* counter: `sum` only. Counters are stored as increments (OTLP delta sums; a cumulative sum is
  stored as a gauge by ingest), so the sum of a bucket's points is its increase.
* gauge: `last` (default), `min`, `max` or `mean` of the bucket's values.
* histogram: a bucket merges its points' distributions. `count` = observations, `sum`, `mean`
  = sum / count, or a quantile `pNN` (default p95). A histogram whose buckets say
  `"temporality": "cumulative"` carries running totals, so each of its points is turned into the
  increase since the previous point of the same stream (same labels and correlation); a stream's
  first point in the fetched range is only the baseline, and a point whose counts went down (a
  restart) or whose bounds changed counts whole.
* Quantiles: when every observation of the bucket is a raw value (a point without buckets), the
  values' `percentile_cont` (`stats.quantile`), as analytics computes latency. Otherwise the
  merged distribution with observations spread evenly inside each histogram bucket (the
  open-ended first and last buckets bounded by the point's min and max), a Summary's mass
  spread between its reported quantiles, and raw values as points; the quantile interpolates
  linearly inside the bucket it falls in. A bucket with nothing to place (a histogram with no
  finite bound and no min or max) leaves the quantile out, and so the chart point.
* One series per label combination: the full label set, or with `group_by` only those keys (a
  point without one groups under null for it). Series are ordered by their labels' canonical
  JSON, points oldest first. A bucket appears only when points fell in it and its aggregation
  has a value (its `count` tells a genuine zero from no data); a series without one is left
  out. A point's exemplar is the trace of the contributing point with the largest value that
  names one.
"""

from __future__ import annotations

import itertools
import json
import math
import re
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from mcpd.model.v1 import query_pb2
from mcpd.runtime.errors import InvalidArgument, quoted
from mcpd.signals.messages import timestamp_of, value_of
from mcpd.signals.queries import Window
from mcpd.signals.rows import CorrelationColumns, MetricRow
from mcpd.signals.stats import quantile

NICE_BUCKETS_S: tuple[int, ...] = (
    1, 5, 10, 15, 30, 60, 300, 600, 900, 1800, 3600, 10800, 21600, 43200, 86400, 604800,
)  # fmt: skip
"""Widths the server chooses from: round seconds, minutes, hours, days, a week."""
TARGET_BUCKETS = 120
"""A chosen width gives at most this many buckets: enough resolution for a chart's width."""
MAX_BUCKETS = 10_000
"""A requested width that gives more buckets than this is refused: the response would be huge
and no chart draws it."""
DEFAULT_AGG: Mapping[str, str] = {"counter": "sum", "gauge": "last", "histogram": "p95"}
"""The aggregation used when the request names none, per metric kind."""

_NS_PER_S = 1_000_000_000
_QUANTILE = re.compile(r"p(\d{1,2}(?:\.\d+)?|100)")
_VALID_AGGS: Mapping[str, str] = {
    "counter": "sum",
    "gauge": "last, min, max, mean",
    "histogram": "a quantile pNN (p50, p90, p95, p99, ...), mean, sum, count",
}
_STREAM_COLUMNS = sorted(CorrelationColumns.__optional_keys__)

Segment = tuple[float, float, float]
"""(low, high, observations) spread evenly over [low, high]; low == high is a point mass."""


def choose_bucket(window: Window, requested_s: int | None) -> int:
    """The bucket width in seconds for a series over `window` (both ends set).

    A requested width is honoured unless it is below 1 s or would make more than MAX_BUCKETS
    buckets (InvalidArgument, field `bucket`). Otherwise the smallest of NICE_BUCKETS_S (then
    whole weeks) that gives at most TARGET_BUCKETS buckets.
    """
    if requested_s is not None:
        if requested_s < 1:
            raise InvalidArgument("bucket must be at least 1 second", field="bucket")
        buckets = _bucket_count(window, requested_s)
        if buckets > MAX_BUCKETS:
            raise InvalidArgument(
                f"a {requested_s}s bucket makes {buckets} buckets over this window; "
                f"at most {MAX_BUCKETS} are served, ask for a wider bucket",
                field="bucket",
            )
        return requested_s
    weeks = (NICE_BUCKETS_S[-1] * n for n in itertools.count(2))
    return next(
        width
        for width in itertools.chain(NICE_BUCKETS_S, weeks)
        if _bucket_count(window, width) <= TARGET_BUCKETS
    )


def _bucket_count(window: Window, width_s: int) -> int:
    """How many epoch-aligned buckets of `width_s` the half-open window touches."""
    if window.start is None or window.end is None:
        raise ValueError("a metric series needs a window with both ends set")
    if window.end <= window.start:
        return 0
    width = width_s * _NS_PER_S
    return (window.end - 1) // width - window.start // width + 1


def aggregate(
    points: Sequence[MetricRow],
    *,
    window: Window,
    bucket_s: int,
    agg: str | None,
    group_by: Sequence[str],
) -> query_pb2.MetricSeriesResponse:
    """The series of one metric's `points` (any order; those outside `window` are ignored),
    aggregated per the module's rules. `name` is the points' metric name ('' when there are
    none: the caller, who knows the name asked for, may set it).

    InvalidArgument (field `agg`) when `agg` does not apply to the metric's kind.
    """
    response = query_pb2.MetricSeriesResponse(bucket=f"{bucket_s}s")
    inside = sorted(
        (p for p in points if _in_window(p["timestamp"], window)),
        key=lambda p: (p["timestamp"], p["metric_id"]),
    )
    if not inside:
        return response
    kind = inside[-1]["kind"]
    reduce = _reducer(kind, agg)
    of_kind = [p for p in inside if p["kind"] == kind]
    response.name = of_kind[-1]["name"]
    unit = next((p["unit"] for p in reversed(of_kind) if p.get("unit")), None)
    if unit is not None:
        response.unit = unit
    samples = _histogram_samples(of_kind) if kind == "histogram" else map(_plain_sample, of_kind)
    for labels, buckets in _bucketed(samples, bucket_s * _NS_PER_S, group_by):
        found = (_point(start, bucket, reduce) for start, bucket in buckets)
        chart_points = [chart_point for chart_point in found if chart_point is not None]
        if chart_points:
            response.series.add(labels=value_of(labels), points=chart_points)
    return response


def _in_window(timestamp: int, window: Window) -> bool:
    return (window.start is None or timestamp >= window.start) and (
        window.end is None or timestamp < window.end
    )


# --- samples: what one point contributes to its bucket ------------------------------------------


@dataclass(frozen=True, slots=True)
class _Histogram:
    """A histogram point's distribution, as ingest stores it (docs/otlp.md): explicit upper
    `bounds` with one more count than bounds, optional min/max, and a Summary's quantiles."""

    bounds: tuple[float, ...]
    counts: tuple[float, ...]
    low: float | None
    high: float | None
    quantiles: tuple[tuple[float, float], ...]


@dataclass(frozen=True, slots=True)
class _Sample:
    """One point as its bucket sees it: `value` (a histogram's sum of observations),
    `count` observations, and the distribution of a histogram point with buckets (None for a
    raw observation, whose value is the observation)."""

    timestamp: int
    labels: Mapping[str, Any]
    value: float
    count: float
    trace_id: str | None
    histogram: _Histogram | None = None


def _plain_sample(point: MetricRow) -> _Sample:
    return _Sample(
        timestamp=point["timestamp"],
        labels=point.get("labels") or {},
        value=point["value"],
        count=1,
        trace_id=point.get("trace_id"),
    )


def _histogram_samples(points: Sequence[MetricRow]) -> Iterator[_Sample]:
    """Histogram points as samples, each cumulative one turned into its stream's increase."""
    previous: dict[tuple[Any, ...], _Sample] = {}
    for point in points:
        sample = _histogram_sample(point)
        if not _is_cumulative(point):
            yield sample
            continue
        stream = (_canonical(sample.labels), *(point.get(c) for c in _STREAM_COLUMNS))
        before = previous.get(stream)
        previous[stream] = sample
        if before is not None:
            yield _increase(before, sample)


def _histogram_sample(point: MetricRow) -> _Sample:
    sample = _plain_sample(point)
    buckets = point.get("buckets")
    if not isinstance(buckets, Mapping):
        return sample
    counts = tuple(float(c) for c in buckets.get("counts") or ())
    bounds = tuple(float(b) for b in buckets.get("bounds") or ())
    if len(counts) != len(bounds) + 1:
        return sample  # not ingest's shape: the point is one raw observation
    quantiles = tuple(
        (float(q["quantile"]), float(q["value"])) for q in buckets.get("quantiles") or ()
    )
    histogram = _Histogram(bounds, counts, buckets.get("min"), buckets.get("max"), quantiles)
    return replace(sample, count=sum(counts), histogram=histogram)


def _is_cumulative(point: MetricRow) -> bool:
    buckets = point.get("buckets")
    return isinstance(buckets, Mapping) and buckets.get("temporality") == "cumulative"


def _increase(before: _Sample, after: _Sample) -> _Sample:
    """What `after` added since `before` (the stream's previous cumulative point); `after`
    whole when the stream restarted or was re-bucketed."""
    old, new = before.histogram, after.histogram
    if old is None or new is None or old.bounds != new.bounds:
        return after
    counts = tuple(b - a for a, b in zip(old.counts, new.counts, strict=True))
    if min(counts) < 0:
        return after
    return replace(
        after,
        value=after.value - before.value,
        count=sum(counts),
        histogram=replace(new, counts=counts),
    )


# --- grouping into series and buckets -----------------------------------------------------------


def _bucketed(
    samples: Iterable[_Sample], bucket_ns: int, group_by: Sequence[str]
) -> list[tuple[dict[str, Any], list[tuple[int, list[_Sample]]]]]:
    """(series labels, [(bucket start, its samples in time order)] oldest first), series in
    canonical-JSON order of their labels."""
    grouped: dict[str, dict[int, list[_Sample]]] = defaultdict(lambda: defaultdict(list))
    labels_of: dict[str, dict[str, Any]] = {}
    for sample in samples:
        labels = _series_labels(sample.labels, group_by)
        key = _canonical(labels)
        labels_of[key] = labels
        grouped[key][sample.timestamp - sample.timestamp % bucket_ns].append(sample)
    return [(labels_of[key], sorted(grouped[key].items())) for key in sorted(grouped)]


def _series_labels(labels: Mapping[str, Any], group_by: Sequence[str]) -> dict[str, Any]:
    if not group_by:
        return dict(labels)
    return {key: labels.get(key) for key in group_by}


def _canonical(labels: Mapping[str, Any]) -> str:
    return json.dumps(labels, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _point(
    start: int, bucket: Sequence[_Sample], reduce: Callable[[Sequence[_Sample]], float | None]
) -> query_pb2.MetricSeriesPoint | None:
    """The bucket's chart point; None when its aggregation has no value (nothing observed)."""
    value = reduce(bucket)
    if value is None:
        return None
    point = query_pb2.MetricSeriesPoint(
        timestamp=timestamp_of(start), value=value, count=round(sum(s.count for s in bucket))
    )
    traced = [(s.value, s.trace_id) for s in bucket if s.trace_id is not None]
    if traced:
        # max keeps the first of equal values: the earliest point.
        point.exemplar_trace_id = max(traced, key=lambda pair: pair[0])[1]
    return point


# --- aggregations -------------------------------------------------------------------------------


def _reducer(kind: str, agg: str | None) -> Callable[[Sequence[_Sample]], float | None]:
    """The bucket aggregation `agg` names for a metric of `kind` (its default when None)."""
    name = agg if agg is not None else DEFAULT_AGG[kind]
    found = _REDUCERS[kind].get(name)
    if found is not None:
        return found
    matched = _QUANTILE.fullmatch(name) if kind == "histogram" else None
    if matched is not None:
        q = float(matched.group(1)) / 100
        return lambda bucket: _quantile(bucket, q)
    raise InvalidArgument(
        f"agg {quoted(name)} does not apply to a {kind} metric; use {_VALID_AGGS[kind]}",
        field="agg",
    )


def _values(bucket: Sequence[_Sample]) -> list[float]:
    return [s.value for s in bucket]


def _histogram_mean(bucket: Sequence[_Sample]) -> float | None:
    count = sum(s.count for s in bucket)
    return math.fsum(_values(bucket)) / count if count else None


_REDUCERS: Mapping[str, Mapping[str, Callable[[Sequence[_Sample]], float | None]]] = {
    "counter": {"sum": lambda bucket: math.fsum(_values(bucket))},
    "gauge": {
        "last": lambda bucket: bucket[-1].value,
        "min": lambda bucket: min(_values(bucket)),
        "max": lambda bucket: max(_values(bucket)),
        "mean": lambda bucket: math.fsum(_values(bucket)) / len(bucket),
    },
    "histogram": {
        "sum": lambda bucket: math.fsum(_values(bucket)),
        "count": lambda bucket: sum(s.count for s in bucket),
        "mean": _histogram_mean,
    },
}


def _quantile(bucket: Sequence[_Sample], q: float) -> float | None:
    """The `q` quantile of the bucket's merged observations (see the module docstring)."""
    if all(s.histogram is None for s in bucket):
        return quantile(sorted(_values(bucket)), q)
    segments = [segment for s in bucket for segment in _segments(s)]
    return _segments_quantile(segments, q)


def _segments(sample: _Sample) -> list[Segment]:
    """Where a sample's observations lie."""
    histogram = sample.histogram
    if histogram is None:
        return [(sample.value, sample.value, 1.0)]
    if histogram.quantiles:
        return _summary_segments(histogram.quantiles, sample.count)
    return _bucket_segments(histogram)


def _bucket_segments(histogram: _Histogram) -> list[Segment]:
    """Each populated bucket as a segment, clamped to the point's min and max; an open end
    with no min (max) to bound it collapses onto the bucket's finite edge."""
    edges = (-math.inf, *histogram.bounds, math.inf)
    segments: list[Segment] = []
    for index, count in enumerate(histogram.counts):
        low, high = edges[index], edges[index + 1]
        if histogram.low is not None:
            low = max(low, histogram.low)
        if histogram.high is not None:
            high = min(high, histogram.high)
        low, high = (low if math.isfinite(low) else high), (high if math.isfinite(high) else low)
        if count > 0 and math.isfinite(low) and math.isfinite(high):
            segments.append((min(low, high), high, count))
    return segments


def _summary_segments(quantiles: Sequence[tuple[float, float]], count: float) -> list[Segment]:
    """A Summary's observations spread between consecutive reported quantiles; the share below
    the lowest and above the highest sits on those values."""
    (first_q, first_v), (last_q, last_v) = quantiles[0], quantiles[-1]
    segments = [(first_v, first_v, first_q * count), (last_v, last_v, (1 - last_q) * count)]
    for (q0, v0), (q1, v1) in itertools.pairwise(quantiles):
        segments.append((v0, v1, (q1 - q0) * count))
    return [segment for segment in segments if segment[2] > 0]


def _segments_quantile(segments: Sequence[Segment], q: float) -> float | None:
    """The `q` quantile of the mixture of `segments`: the distribution split at every segment
    edge, then walked until `q` of the observations are behind."""
    total = math.fsum(weight for _, _, weight in segments)
    if total <= 0:
        return None
    edges = sorted({edge for low, high, _ in segments for edge in (low, high)})
    position = {edge: index for index, edge in enumerate(edges)}
    at = [0.0] * len(edges)  # point masses on each edge
    between = [0.0] * len(edges)  # observations spread over (edges[i], edges[i + 1])
    for low, high, weight in segments:
        first, last = position[low], position[high]
        if first == last:
            at[first] += weight
        for index in range(first, last):
            between[index] += weight * ((edges[index + 1] - edges[index]) / (high - low))
    target = q * total
    behind = 0.0
    for index, edge in enumerate(edges[:-1]):
        behind += at[index]
        if behind >= target:
            return edge
        if between[index] > 0 and behind + between[index] >= target:
            share = (target - behind) / between[index]
            return edge + (edges[index + 1] - edge) * share
        behind += between[index]
    return edges[-1]
