"""Metric rows from OTLP metrics recorded through the SDK, one row per data point."""

from __future__ import annotations

import math

from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
)
from opentelemetry.proto.metrics.v1.metrics_pb2 import DataPointFlags, Metric
from opentelemetry.sdk.metrics import Counter, Histogram
from opentelemetry.sdk.metrics.export import AggregationTemporality
from opentelemetry.sdk.metrics.view import (
    ExplicitBucketHistogramAggregation,
    ExponentialBucketHistogramAggregation,
    View,
)

from mcpd.model.v1 import enums_pb2, telemetry_pb2
from mcpd.runtime.ids import ID_LENGTH
from mcpd.signals.rows import MetricRow
from services.ingest.otlp import map_metrics
from services.ingest.tests.otlp.producers import SpanRecorder, meter_provider

METRIC_COLUMNS = MetricRow.__required_keys__ | MetricRow.__optional_keys__
RESOURCE = {"service.name": "agent", "mcpd.project": "p", "deployment.environment.name": "prod"}
T0 = 1_767_225_600_000_000_000


def rows(request: ExportMetricsServiceRequest) -> dict[str, list[MetricRow]]:
    batch = map_metrics(request)
    assert list(batch.refused) == []
    assert [index for index, _ in batch.metrics] == list(range(len(batch.metrics)))
    by_name: dict[str, list[MetricRow]] = {}
    for _, row in batch.metrics:
        by_name.setdefault(row["name"], []).append(row)
    return by_name


def test_a_cumulative_counter_is_a_gauge_of_its_running_total() -> None:
    with meter_provider(RESOURCE) as (provider, collect):
        counter = provider.get_meter("m").create_counter("tokens", unit="{token}")
        counter.add(5, {"model": "gpt-4o"})
        counter.add(7, {"model": "gpt-4o"})
        counter.add(1, {"model": "o3"})
        got = rows(collect())
    first, second = sorted(got["tokens"], key=lambda row: row["value"])
    assert set(first) == METRIC_COLUMNS
    assert (first["kind"], first["value"], first["labels"], first["unit"]) == (
        "gauge",
        1.0,
        {"model": "o3"},
        "{token}",
    )
    assert (second["value"], second["labels"]) == (12.0, {"model": "gpt-4o"})
    assert (first["project"], first["service_name"], first["environment"]) == ("p", "agent", "prod")
    assert first["buckets"] is None
    assert first["received_at"] is None
    assert len(first["metric_id"]) == ID_LENGTH
    assert first["timestamp"] > 0


def test_a_delta_counter_is_a_counter() -> None:
    delta: dict[type, AggregationTemporality] = {Counter: AggregationTemporality.DELTA}
    with meter_provider(temporality=delta) as (provider, collect):
        counter = provider.get_meter("m").create_counter("requests")
        counter.add(3)
        [row] = rows(collect())["requests"]
    assert (row["kind"], row["value"], row["labels"], row["unit"]) == ("counter", 3.0, None, None)


def test_up_down_counters_and_gauges_are_gauges() -> None:
    with meter_provider() as (provider, collect):
        meter = provider.get_meter("m")
        meter.create_up_down_counter("queue.depth").add(-2)
        meter.create_gauge("temperature", unit="Cel").set(21.5)
        got = rows(collect())
    assert [(row["kind"], row["value"]) for row in got["queue.depth"]] == [("gauge", -2.0)]
    assert [(row["kind"], row["value"], row["unit"]) for row in got["temperature"]] == [
        ("gauge", 21.5, "Cel")
    ]


def test_a_histogram_carries_its_buckets_and_an_exemplar() -> None:
    views = [
        View(
            instrument_name="latency",
            aggregation=ExplicitBucketHistogramAggregation(boundaries=[10.0, 100.0]),
        )
    ]
    delta: dict[type, AggregationTemporality] = {Histogram: AggregationTemporality.DELTA}
    recorder = SpanRecorder()
    with meter_provider(views=views, temporality=delta) as (provider, collect):
        histogram = provider.get_meter("m").create_histogram("latency", unit="ms")
        with recorder.tracer().start_as_current_span("op") as span:
            histogram.record(4.0)
        histogram.record(50.0)
        histogram.record(500.0)
        [row] = rows(collect())["latency"]
    assert (row["kind"], row["value"], row["unit"]) == ("histogram", 554.0, "ms")
    assert row["buckets"] == {
        "bounds": [10.0, 100.0],
        "counts": [1, 1, 1],
        "count": 3,
        "sum": 554.0,
        "min": 4.0,
        "max": 500.0,
        "temporality": "delta",
    }
    context = span.get_span_context()
    assert (row["trace_id"], row["span_id"]) == (
        f"{context.trace_id:032x}",
        f"{context.span_id:016x}",
    )


def test_an_sdk_exponential_histogram_becomes_consistent_explicit_buckets() -> None:
    views = [View(instrument_name="size", aggregation=ExponentialBucketHistogramAggregation())]
    values = [0.0, 1.0, 3.0, 3.5, 1000.0]
    with meter_provider(views=views) as (provider, collect):
        histogram = provider.get_meter("m").create_histogram("size")
        for value in values:
            histogram.record(value)
        [row] = rows(collect())["size"]
    buckets = row["buckets"]
    assert row["kind"] == "histogram"
    assert row["value"] == sum(values)
    assert (buckets["count"], buckets["sum"], buckets["min"], buckets["max"]) == (
        5,
        sum(values),
        0.0,
        1000.0,
    )
    bounds, counts = buckets["bounds"], buckets["counts"]
    assert bounds == sorted(set(bounds))
    assert len(counts) == len(bounds) + 1
    assert sum(counts) == 5
    for value in values:  # every observation falls in a bucket that holds a count
        position = next((i for i, bound in enumerate(bounds) if value <= bound), len(bounds))
        assert counts[position] > 0, value


def _hand_built(metric: Metric) -> ExportMetricsServiceRequest:
    request = ExportMetricsServiceRequest()
    scope = request.resource_metrics.add().scope_metrics.add()
    scope.metrics.add().CopyFrom(metric)
    return request


def test_exponential_buckets_convert_to_explicit_upper_bounds() -> None:
    metric = Metric(name="latency")
    point = metric.exponential_histogram.data_points.add(
        time_unix_nano=T0, scale=0, count=7, sum=4.5, zero_count=1
    )
    point.positive.offset = 0
    point.positive.bucket_counts.extend([1, 2])  # (1, 2] and (2, 4]
    point.negative.offset = 1
    point.negative.bucket_counts.extend([3])  # [-4, -2)
    [row] = rows(_hand_built(metric))["latency"]
    assert row["buckets"] == {
        "bounds": [-2.0, 0.0, 2.0, 4.0],
        "counts": [3, 1, 1, 2, 0],
        "count": 7,
        "sum": 4.5,
        "min": None,
        "max": None,
        "temporality": None,
        "scale": 0,
    }


def test_a_summary_is_a_one_bucket_histogram_with_its_quantiles() -> None:
    metric = Metric(name="rpc.duration", unit="ms")
    point = metric.summary.data_points.add(time_unix_nano=T0, count=10, sum=250.0)
    for quantile, value in ((0.0, 3.0), (0.5, 20.0), (0.99, 90.0), (1.0, 95.0)):
        point.quantile_values.add(quantile=quantile, value=value)
    [row] = rows(_hand_built(metric))["rpc.duration"]
    assert (row["kind"], row["value"], row["timestamp"]) == ("histogram", 250.0, T0)
    assert row["buckets"] == {
        "bounds": [],
        "counts": [10],
        "count": 10,
        "sum": 250.0,
        "min": 3.0,
        "max": 95.0,
        "quantiles": [
            {"quantile": 0.0, "value": 3.0},
            {"quantile": 0.5, "value": 20.0},
            {"quantile": 0.99, "value": 90.0},
            {"quantile": 1.0, "value": 95.0},
        ],
    }


def test_refused_points_are_named_by_their_index_across_metrics() -> None:
    request = ExportMetricsServiceRequest()
    scope = request.resource_metrics.add().scope_metrics.add()
    gauge = scope.metrics.add(name="g")
    gauge.gauge.data_points.add(time_unix_nano=T0, as_double=1.0)  # 0: fine
    gauge.gauge.data_points.add(as_double=2.0)  # 1: no time
    gauge.gauge.data_points.add(time_unix_nano=T0)  # 2: no value
    gauge.gauge.data_points.add(time_unix_nano=T0, as_double=math.nan)  # 3: NaN
    flags = DataPointFlags.DATA_POINT_FLAGS_NO_RECORDED_VALUE_MASK
    gauge.gauge.data_points.add(time_unix_nano=T0, as_int=1, flags=flags)  # 4: stale marker
    histogram = scope.metrics.add(name="h")
    histogram.histogram.data_points.add(  # 5: three counts for one bound
        time_unix_nano=T0, count=3, sum=1.0, explicit_bounds=[1.0], bucket_counts=[1, 1, 1]
    )
    nameless = request.resource_metrics.add().scope_metrics.add().metrics.add()
    nameless.sum.data_points.add(time_unix_nano=T0, as_int=1)  # 7: no name
    # Added after the nameless metric, but it sits in the first resource, so it counts first.
    gauge_two = scope.metrics.add(name="g2")
    gauge_two.gauge.data_points.add(time_unix_nano=T0, as_int=7)  # 6: fine
    batch = map_metrics(request)
    # Points count in request order: g (0-4), h (5), g2 (6) in the first resource, then the
    # nameless metric (7) in the second.
    assert [(index, row["name"], row["value"]) for index, row in batch.metrics] == [
        (0, "g", 1.0),
        (6, "g2", 7.0),
    ]
    metric = enums_pb2.SIGNAL_TYPE_METRIC
    assert list(batch.refused) == [
        telemetry_pb2.IngestError(
            signal=metric, index=1, message="a data point of g has no time_unix_nano"
        ),
        telemetry_pb2.IngestError(
            signal=metric, index=2, message="a data point of g has neither as_double nor as_int"
        ),
        telemetry_pb2.IngestError(
            signal=metric, index=3, message="a data point of g has a value that is not finite: nan"
        ),
        telemetry_pb2.IngestError(
            signal=metric,
            index=4,
            message="a data point of g is flagged as having no recorded value",
        ),
        telemetry_pb2.IngestError(
            signal=metric,
            index=5,
            message="a histogram point of h has 3 bucket_counts for 1 explicit_bounds; it needs 2",
        ),
        telemetry_pb2.IngestError(signal=metric, index=7, message="the metric has no name"),
    ]
