"""OTLP requests built the way real producers build them: the OpenTelemetry SDK records the
signals and its own OTLP encoders turn them into export requests."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

from opentelemetry.exporter.otlp.proto.common._log_encoder import encode_logs
from opentelemetry.exporter.otlp.proto.common.metrics_encoder import encode_metrics
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter, SimpleLogRecordProcessor
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.metrics.view import View
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Tracer

from mcpd.signals.rows import SpanRow
from services.ingest.incoming import IncomingBatch
from services.ingest.otlp import map_traces

SCOPE = "test.instrumentation"


class SpanRecorder:
    """A TracerProvider for one resource, recording finished spans in memory."""

    def __init__(self, resource: Mapping[str, Any] | None = None) -> None:
        self.exporter = InMemorySpanExporter()
        self.provider = TracerProvider(resource=Resource.create(dict(resource or {})))
        self.provider.add_span_processor(SimpleSpanProcessor(self.exporter))

    def tracer(self, scope: str = SCOPE) -> Tracer:
        return self.provider.get_tracer(scope, "1.0.0")

    def spans(self) -> tuple[ReadableSpan, ...]:
        return self.exporter.get_finished_spans()


def export_spans(*recorders: SpanRecorder) -> ExportTraceServiceRequest:
    """One request holding every span the recorders finished, grouped by resource and scope."""
    return encode_spans([span for recorder in recorders for span in recorder.spans()])


def trace_request(
    record: Callable[[Tracer], None], resource: Mapping[str, Any] | None = None
) -> ExportTraceServiceRequest:
    """The request for whatever `record` does with a tracer under `resource`."""
    recorder = SpanRecorder(resource)
    record(recorder.tracer())
    return export_spans(recorder)


def span_row(
    attributes: Mapping[str, Any], resource: Mapping[str, Any] | None = None, name: str = "op"
) -> SpanRow:
    """The row of one span carrying `attributes` (the request must map without refusals)."""

    def record(tracer: Tracer) -> None:
        with tracer.start_as_current_span(name, attributes=dict(attributes)):
            pass

    batch = map_traces(trace_request(record, resource))
    assert batch.refused == []
    [(index, row)] = batch.spans
    assert index == 0
    return row


def rows_by_name(batch: IncomingBatch) -> dict[str, SpanRow]:
    return {row["name"]: row for _, row in batch.spans}


def log_request(
    emit: Callable[[LoggerProvider], None], resource: Mapping[str, Any] | None = None
) -> ExportLogsServiceRequest:
    """The request for whatever `emit` logs through an SDK LoggerProvider."""
    exporter = InMemoryLogRecordExporter()  # type: ignore[no-untyped-call]
    provider = LoggerProvider(resource=Resource.create(dict(resource or {})))
    provider.add_log_record_processor(SimpleLogRecordProcessor(exporter))
    emit(provider)
    return encode_logs(exporter.get_finished_logs())


@contextmanager
def meter_provider(
    resource: Mapping[str, Any] | None = None,
    *,
    views: Sequence[View] = (),
    temporality: Mapping[type, Any] | None = None,
) -> Iterator[tuple[MeterProvider, Callable[[], ExportMetricsServiceRequest]]]:
    """A MeterProvider and a function collecting what it recorded as an export request."""
    reader = InMemoryMetricReader(preferred_temporality=dict(temporality or {}))
    provider = MeterProvider(
        metric_readers=[reader], resource=Resource.create(dict(resource or {})), views=views
    )

    def collect() -> ExportMetricsServiceRequest:
        data = reader.get_metrics_data()
        assert data is not None
        return encode_metrics(data)

    try:
        yield provider, collect
    finally:
        provider.shutdown()
