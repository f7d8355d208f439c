"""The OTLP/gRPC receivers in process: a real server, the real stubs and the SDK's exporter."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any

import grpc.aio
import pytest
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from opentelemetry.proto.collector.logs.v1 import logs_service_pb2, logs_service_pb2_grpc
from opentelemetry.proto.collector.metrics.v1 import (
    metrics_service_pb2,
    metrics_service_pb2_grpc,
)
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc
from opentelemetry.sdk.trace.export import SpanExportResult

from mcpd.model.v1 import enums_pb2, telemetry_pb2
from mcpd.runtime.channels import open_channel
from mcpd.runtime.config import GrpcSettings
from mcpd.runtime.errors_grpc import rpc_failure_from
from mcpd.runtime.server import GrpcServer
from services.ingest import otlp
from services.ingest.admission import Admission
from services.ingest.incoming import IncomingBatch
from services.ingest.otlp import CanIngest, otlp_registrations
from services.ingest.tests.otlp.producers import SpanRecorder, export_spans

SPAN, LOG, METRIC = (
    enums_pb2.SIGNAL_TYPE_SPAN,
    enums_pb2.SIGNAL_TYPE_LOG,
    enums_pb2.SIGNAL_TYPE_METRIC,
)


@dataclass
class FakeIngestor:
    """Refuses what the mapping refused, plus `also_refuse`, and records every batch; admits by
    `admission`, and holds each request (`entered` set) until `release` is set."""

    also_refuse: list[telemetry_pb2.IngestError] = field(default_factory=list)
    batches: list[IncomingBatch] = field(default_factory=list)
    admission: Admission = field(default_factory=lambda: Admission(1 << 30))
    release: asyncio.Event = field(default_factory=asyncio.Event)
    entered: asyncio.Event = field(default_factory=asyncio.Event)

    def __post_init__(self) -> None:
        self.release.set()

    def admit(self, size: int) -> AbstractContextManager[None]:
        return self.admission.admit(size)

    async def ingest(self, incoming: IncomingBatch) -> telemetry_pb2.IngestResult:
        self.entered.set()
        await self.release.wait()
        self.batches.append(incoming)
        errors = [*incoming.refused, *self.also_refuse]
        rows = len(incoming.spans) + len(incoming.logs) + len(incoming.metrics)
        return telemetry_pb2.IngestResult(
            accepted=max(0, rows - len(self.also_refuse)), rejected=len(errors), errors=errors
        )


@dataclass
class Served:
    address: str
    channel: grpc.aio.Channel
    ingestor: FakeIngestor

    @property
    def traces(self) -> Any:
        return _stub(trace_service_pb2_grpc.TraceServiceStub, self.channel)


def _stub(stub: Any, channel: grpc.aio.Channel) -> Any:
    """A generated OTLP stub (opentelemetry-proto ships no types for its grpc modules)."""
    return stub(channel)


@pytest.fixture
async def served() -> AsyncIterator[Served]:
    ingestor = FakeIngestor()
    settings = GrpcSettings(shutdown_grace_s=0.0)
    async with GrpcServer("127.0.0.1:0", otlp_registrations(ingestor), settings) as server:
        address = f"127.0.0.1:{server.port}"
        channel = open_channel(address, settings)
        try:
            yield Served(address, channel, ingestor)
        finally:
            await channel.close()


def test_the_public_surface_is_pinned() -> None:
    assert otlp.__all__ == [
        "ADDED_ATTRIBUTES",
        "EVENTS_KEY",
        "CanIngest",
        "LogsReceiver",
        "MetricsReceiver",
        "TraceReceiver",
        "map_logs",
        "map_metrics",
        "map_traces",
        "otlp_registrations",
    ]


def test_registrations_name_the_three_collector_services() -> None:
    ingestor: CanIngest = FakeIngestor()
    assert [registration.full_name for registration in otlp_registrations(ingestor)] == [
        "opentelemetry.proto.collector.trace.v1.TraceService",
        "opentelemetry.proto.collector.logs.v1.LogsService",
        "opentelemetry.proto.collector.metrics.v1.MetricsService",
    ]


def _three_spans() -> trace_service_pb2.ExportTraceServiceRequest:
    recorder = SpanRecorder({"service.name": "svc"})
    for name in ("a", "b", "c"):
        recorder.tracer().start_span(name).end()
    return export_spans(recorder)


async def test_a_fully_accepted_export_has_no_partial_success(served: Served) -> None:
    response = await served.traces.Export(_three_spans())
    assert response == trace_service_pb2.ExportTraceServiceResponse()
    [batch] = served.ingestor.batches
    assert [(index, row["name"]) for index, row in batch.spans] == [(0, "a"), (1, "b"), (2, "c")]


async def test_refusals_become_partial_success(served: Served) -> None:
    request = _three_spans()
    request.resource_spans[0].scope_spans[0].spans[1].span_id = b"\x00"
    served.ingestor.also_refuse = [
        telemetry_pb2.IngestError(signal=SPAN, index=index, message=f"refused {index}")
        for index in (0, 2, 5, 9)
    ]
    response = await served.traces.Export(request)
    assert response.partial_success.rejected_spans == 5
    assert response.partial_success.error_message == (
        "span 1: span_id must be 8 bytes (16 hex characters), got 1 bytes; "
        "span 0: refused 0; span 2: refused 2; and 2 more"
    )


async def test_a_rejection_without_errors_still_says_how_many(served: Served) -> None:
    class CountOnly(FakeIngestor):
        async def ingest(self, incoming: IncomingBatch) -> telemetry_pb2.IngestResult:
            return telemetry_pb2.IngestResult(rejected=2)

    settings = GrpcSettings(shutdown_grace_s=0.0)
    async with GrpcServer("127.0.0.1:0", otlp_registrations(CountOnly()), settings) as server:
        channel = open_channel(f"127.0.0.1:{server.port}", settings)
        try:
            response = await _stub(trace_service_pb2_grpc.TraceServiceStub, channel).Export(
                _three_spans()
            )
        finally:
            await channel.close()
    assert (response.partial_success.rejected_spans, response.partial_success.error_message) == (
        2,
        "2 spans rejected",
    )


async def test_logs_and_metrics_report_their_own_counts(served: Served) -> None:
    logs_request = logs_service_pb2.ExportLogsServiceRequest()
    records = logs_request.resource_logs.add().scope_logs.add().log_records
    records.add(time_unix_nano=1, severity_number=9)
    records.add()  # no time at all
    logs = await _stub(logs_service_pb2_grpc.LogsServiceStub, served.channel).Export(logs_request)
    assert (logs.partial_success.rejected_log_records, logs.partial_success.error_message) == (
        1,
        "log 1: the record has neither time_unix_nano nor observed_time_unix_nano: "
        "a log line needs the time it was emitted",
    )

    metrics_request = metrics_service_pb2.ExportMetricsServiceRequest()
    metric = metrics_request.resource_metrics.add().scope_metrics.add().metrics.add(name="g")
    metric.gauge.data_points.add(time_unix_nano=1, as_int=3)
    metric.gauge.data_points.add(as_int=4)
    metrics = await _stub(metrics_service_pb2_grpc.MetricsServiceStub, served.channel).Export(
        metrics_request
    )
    assert (
        metrics.partial_success.rejected_data_points,
        metrics.partial_success.error_message,
    ) == (1, "metric 1: a data point of g has no time_unix_nano")
    assert [len(batch.logs) for batch in served.ingestor.batches] == [1, 0]
    assert [len(batch.metrics) for batch in served.ingestor.batches] == [0, 1]


async def test_the_sdk_grpc_exporter_delivers(served: Served) -> None:
    recorder = SpanRecorder({"service.name": "exported", "mcpd.project": "shop"})
    with recorder.tracer().start_as_current_span(
        "chat", attributes={"gen_ai.operation.name": "chat", "gen_ai.usage.input_tokens": 9}
    ):
        pass
    exporter = OTLPSpanExporter(endpoint=served.address, insecure=True)
    try:
        # The exporter is blocking; the server runs on this event loop.
        result = await asyncio.to_thread(exporter.export, recorder.spans())
    finally:
        exporter.shutdown()
    assert result is SpanExportResult.SUCCESS
    [batch] = served.ingestor.batches
    [(_, row)] = batch.spans
    assert (row["project"], row["service_name"], row["kind"], row["input_tokens"]) == (
        "shop",
        "exported",
        "model_inference",
        9,
    )


async def test_past_the_admission_bound_an_export_is_refused_with_a_retry_delay(
    served: Served,
) -> None:
    request = _three_spans()
    served.ingestor.admission = Admission(request.ByteSize())
    served.ingestor.release.clear()
    held = asyncio.ensure_future(served.traces.Export(request))
    await served.ingestor.entered.wait()
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await served.traces.Export(request)
    assert refused.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    failure = rpc_failure_from(refused.value)
    assert (failure.reason, failure.retry_after_s) == ("INGEST_BUSY", 1.0)
    served.ingestor.release.set()
    assert await held == trace_service_pb2.ExportTraceServiceResponse()
    # Once the first is answered there is room again; the refused one was never mapped.
    assert await served.traces.Export(request) == trace_service_pb2.ExportTraceServiceResponse()
    assert len(served.ingestor.batches) == 2
    assert served.ingestor.admission.pending_bytes == 0
