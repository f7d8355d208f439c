"""OTLP metrics -> metric rows (`map_metrics`): one row per data point.

* Sum, monotonic, delta temporality -> counter (each point is an increment: sums aggregate).
* Sum, monotonic, cumulative temporality -> gauge: each point is a running total since the
  series started, so the latest value is the answer and summing points would count every
  increment again in every later point.
* Sum, non-monotonic (an up-down counter) -> gauge.
* Gauge -> gauge.
* Histogram -> histogram; value = the sum of the observations; buckets = explicit bounds and
  counts, count, sum, min, max, temporality.
* ExponentialHistogram -> histogram, its buckets converted to explicit upper bounds.
* Summary -> histogram with one bucket holding every observation, and its quantiles.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any, cast

from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
)
from opentelemetry.proto.metrics.v1.metrics_pb2 import (
    AggregationTemporality,
    DataPointFlags,
    Exemplar,
    ExponentialHistogramDataPoint,
    HistogramDataPoint,
    Metric,
    NumberDataPoint,
    SummaryDataPoint,
)

from mcpd.model.v1 import enums_pb2
from mcpd.runtime.ids import new_id
from mcpd.signals.rows import MetricRow
from services.ingest.incoming import IncomingBatch, refusal
from services.ingest.otlp._correlation import ResourceContext, resource_context
from services.ingest.otlp._values import RecordError, attributes, optional_span_id, trace_id_hex

_METRIC = enums_pb2.SIGNAL_TYPE_METRIC
_DELTA = AggregationTemporality.AGGREGATION_TEMPORALITY_DELTA
_CUMULATIVE = AggregationTemporality.AGGREGATION_TEMPORALITY_CUMULATIVE
_NO_RECORDED_VALUE = DataPointFlags.DATA_POINT_FLAGS_NO_RECORDED_VALUE_MASK
_TEMPORALITY = {_DELTA: "delta", _CUMULATIVE: "cumulative"}

Point = NumberDataPoint | HistogramDataPoint | ExponentialHistogramDataPoint | SummaryDataPoint


def map_metrics(request: ExportMetricsServiceRequest) -> IncomingBatch:
    """Every OTLP data point as a metric row, or as a refusal naming its index.

    The index of a point counts every data point of every metric, across resource and scope
    groups, in order.
    """
    batch = IncomingBatch()
    index = 0
    for resource_metrics in request.resource_metrics:
        context = resource_context(resource_metrics.resource)
        for scope_metrics in resource_metrics.scope_metrics:
            for metric in scope_metrics.metrics:
                kind, points, temporality = _shape(metric)
                for point in points:
                    try:
                        row = _row(metric, kind, temporality, point, context)
                    except RecordError as reason:
                        batch.refused.append(refusal(_METRIC, index, reason))
                    else:
                        batch.metrics.append((index, row))
                    index += 1
    return batch


def _shape(metric: Metric) -> tuple[str, Iterable[Point], str | None]:
    """(spec MetricKind, data points, temporality name) of a metric."""
    which = metric.WhichOneof("data")
    if which == "sum":
        total = metric.sum
        temporality = total.aggregation_temporality
        if total.is_monotonic and temporality == _DELTA:
            return "counter", total.data_points, "delta"
        return "gauge", total.data_points, _TEMPORALITY.get(temporality)
    if which == "gauge":
        return "gauge", metric.gauge.data_points, None
    if which == "histogram":
        histogram = metric.histogram
        return (
            "histogram",
            histogram.data_points,
            _TEMPORALITY.get(histogram.aggregation_temporality),
        )
    if which == "exponential_histogram":
        exponential = metric.exponential_histogram
        return (
            "histogram",
            exponential.data_points,
            _TEMPORALITY.get(exponential.aggregation_temporality),
        )
    if which == "summary":
        return "histogram", metric.summary.data_points, None
    return "gauge", (), None  # a metric with no data has no points to store


def _row(
    metric: Metric, kind: str, temporality: str | None, point: Point, context: ResourceContext
) -> MetricRow:
    if not metric.name:
        raise RecordError("the metric has no name")
    if not point.time_unix_nano:
        raise RecordError(f"a data point of {metric.name} has no time_unix_nano")
    if point.flags & _NO_RECORDED_VALUE:
        raise RecordError(f"a data point of {metric.name} is flagged as having no recorded value")
    buckets: dict[str, Any] | None = None
    if isinstance(point, NumberDataPoint):
        value = _number(metric.name, point)
    elif isinstance(point, HistogramDataPoint):
        value, buckets = _histogram(metric.name, point, temporality)
    elif isinstance(point, ExponentialHistogramDataPoint):
        value, buckets = _exponential(point, temporality)
    else:
        value, buckets = _summary(point)
    if not math.isfinite(value):
        raise RecordError(f"a data point of {metric.name} has a value that is not finite: {value}")
    trace_id, span_id = (
        _exemplar(point.exemplars) if not isinstance(point, SummaryDataPoint) else (None, None)
    )
    row: dict[str, Any] = {
        "project": context.project,
        **context.columns,
        "metric_id": new_id(),
        "name": metric.name,
        "kind": kind,
        "value": value,
        "unit": metric.unit or None,
        "timestamp": point.time_unix_nano,
        "labels": attributes(point.attributes) or None,
        "buckets": buckets,
        "trace_id": trace_id,
        "span_id": span_id,
        "received_at": None,  # the pipeline stamps it
    }
    return cast(MetricRow, row)


def _number(name: str, point: NumberDataPoint) -> float:
    which = point.WhichOneof("value")
    if which == "as_double":
        return point.as_double
    if which == "as_int":
        return float(point.as_int)
    raise RecordError(f"a data point of {name} has neither as_double nor as_int")


def _histogram(
    name: str, point: HistogramDataPoint, temporality: str | None
) -> tuple[float, dict[str, Any]]:
    bounds = list(point.explicit_bounds)
    counts = list(point.bucket_counts)
    if counts and len(counts) != len(bounds) + 1:
        raise RecordError(
            f"a histogram point of {name} has {len(counts)} bucket_counts for "
            f"{len(bounds)} explicit_bounds; it needs {len(bounds) + 1}"
        )
    total = point.sum if point.HasField("sum") else None
    buckets = {
        "bounds": bounds,
        "counts": counts,
        "count": point.count,
        "sum": total,
        "min": point.min if point.HasField("min") else None,
        "max": point.max if point.HasField("max") else None,
        "temporality": temporality,
    }
    return (total if total is not None else 0.0), buckets


def _exponential(
    point: ExponentialHistogramDataPoint, temporality: str | None
) -> tuple[float, dict[str, Any]]:
    """Explicit buckets for an exponential histogram point.

    With base = 2 ** (2 ** -scale), positive bucket i holds (base**i, base**(i+1)] and negative
    bucket i holds [-base**(i+1), -base**i); the zero bucket holds [-threshold, threshold].
    Every populated range becomes an explicit bucket bounded above by its upper edge, ranges
    ascending, and a final (last edge, +inf) bucket holding nothing.
    """
    base = 2.0 ** (2.0**-point.scale)
    ranges: list[tuple[float, int]] = []  # (upper edge, count), ascending
    negative = point.negative
    for position in range(len(negative.bucket_counts) - 1, -1, -1):
        ranges.append((-(base ** (negative.offset + position)), negative.bucket_counts[position]))
    if point.zero_count or point.zero_threshold:
        ranges.append((point.zero_threshold, point.zero_count))
    positive = point.positive
    for position, count in enumerate(positive.bucket_counts):
        ranges.append((base ** (positive.offset + position + 1), count))
    bounds: list[float] = []
    counts: list[int] = []
    for upper, count in ranges:
        if bounds and upper <= bounds[-1]:
            counts[-1] += count  # rounding collapsed two edges: merge rather than disorder
            continue
        bounds.append(upper)
        counts.append(count)
    counts.append(0)
    total = point.sum if point.HasField("sum") else None
    buckets = {
        "bounds": bounds,
        "counts": counts,
        "count": point.count,
        "sum": total,
        "min": point.min if point.HasField("min") else None,
        "max": point.max if point.HasField("max") else None,
        "temporality": temporality,
        "scale": point.scale,
    }
    return (total if total is not None else 0.0), buckets


def _summary(point: SummaryDataPoint) -> tuple[float, dict[str, Any]]:
    quantiles = {q.quantile: q.value for q in point.quantile_values}
    buckets = {
        "bounds": [],
        "counts": [point.count],
        "count": point.count,
        "sum": point.sum,
        "min": quantiles.get(0.0),
        "max": quantiles.get(1.0),
        "quantiles": [
            {"quantile": quantile, "value": value} for quantile, value in sorted(quantiles.items())
        ],
    }
    return point.sum, buckets


def _exemplar(exemplars: Iterable[Exemplar]) -> tuple[str | None, str | None]:
    """The trace and span of the first exemplar that names a valid trace."""
    for exemplar in exemplars:
        if not exemplar.trace_id:
            continue
        try:
            return (
                trace_id_hex(exemplar.trace_id, "exemplar trace_id"),
                optional_span_id(exemplar.span_id, "exemplar span_id"),
            )
        except RecordError:
            continue
    return None, None
