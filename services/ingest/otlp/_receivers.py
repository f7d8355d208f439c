"""The OTLP/gRPC collector services: Export for traces, logs and metrics.

Thin servicers: each decodes nothing itself (grpc did), has the request admitted (refused at
once when the process holds as much ingest work as it may), maps it to an IncomingBatch, hands
it to the injected ingestor and reports what was refused as OTLP partial success. The access
rule (scope ingest) is enforced by the AuthInterceptor before Export runs.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import Any, Protocol, TypeAlias

import grpc.aio
from opentelemetry.proto.collector.logs.v1 import logs_service_pb2, logs_service_pb2_grpc
from opentelemetry.proto.collector.metrics.v1 import (
    metrics_service_pb2,
    metrics_service_pb2_grpc,
)
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc

from mcpd.model.v1 import enums_pb2, telemetry_pb2
from mcpd.runtime.server import ServiceRegistration
from mcpd.runtime.servicers import registration
from services.ingest.incoming import IncomingBatch
from services.ingest.otlp._logs import map_logs
from services.ingest.otlp._metrics import map_metrics
from services.ingest.otlp._spans import map_traces

_Context: TypeAlias = "grpc.aio.ServicerContext[Any, Any]"

# How many refusals error_message spells out; the count is always complete.
SHOWN_ERRORS = 3


class CanIngest(Protocol):
    """What the receivers need from the ingest pipeline."""

    def admit(self, size: int) -> AbstractContextManager[None]:
        """Hold a request of `size` bytes for the block, or raise ResourceExhausted."""
        ...

    async def ingest(self, incoming: IncomingBatch) -> telemetry_pb2.IngestResult:
        """Validate, redact, price, sample and store `incoming`; say what was refused."""
        ...


def error_message(result: telemetry_pb2.IngestResult, noun: str) -> str:
    """The partial-success message: the first few refusals, and how many more there were."""
    shown = [
        f"{_signal_name(error.signal)} {error.index}: {error.message}"
        for error in result.errors[:SHOWN_ERRORS]
    ]
    if not shown:
        return f"{result.rejected} {noun} rejected"
    more = len(result.errors) - len(shown)
    if more > 0:
        shown.append(f"and {more} more")
    return "; ".join(shown)


def _signal_name(signal: enums_pb2.SignalType.ValueType) -> str:
    try:
        return enums_pb2.SignalType.Name(signal).removeprefix("SIGNAL_TYPE_").lower()
    except ValueError:
        return "record"


class TraceReceiver(trace_service_pb2_grpc.TraceServiceServicer):
    """`opentelemetry.proto.collector.trace.v1.TraceService`."""

    def __init__(self, ingestor: CanIngest) -> None:
        self._ingestor = ingestor

    async def Export(  # noqa: N802 - the generated RPC name
        self, request: trace_service_pb2.ExportTraceServiceRequest, context: _Context
    ) -> trace_service_pb2.ExportTraceServiceResponse:
        """Ingest every span; rejected ones are counted and described in partial_success."""
        with self._ingestor.admit(request.ByteSize()):
            result = await self._ingestor.ingest(map_traces(request))
        response = trace_service_pb2.ExportTraceServiceResponse()
        if result.rejected:
            response.partial_success.rejected_spans = result.rejected
            response.partial_success.error_message = error_message(result, "spans")
        return response


class LogsReceiver(logs_service_pb2_grpc.LogsServiceServicer):
    """`opentelemetry.proto.collector.logs.v1.LogsService`."""

    def __init__(self, ingestor: CanIngest) -> None:
        self._ingestor = ingestor

    async def Export(  # noqa: N802 - the generated RPC name
        self, request: logs_service_pb2.ExportLogsServiceRequest, context: _Context
    ) -> logs_service_pb2.ExportLogsServiceResponse:
        """Ingest every log record; rejected ones are reported in partial_success."""
        with self._ingestor.admit(request.ByteSize()):
            result = await self._ingestor.ingest(map_logs(request))
        response = logs_service_pb2.ExportLogsServiceResponse()
        if result.rejected:
            response.partial_success.rejected_log_records = result.rejected
            response.partial_success.error_message = error_message(result, "log records")
        return response


class MetricsReceiver(metrics_service_pb2_grpc.MetricsServiceServicer):
    """`opentelemetry.proto.collector.metrics.v1.MetricsService`."""

    def __init__(self, ingestor: CanIngest) -> None:
        self._ingestor = ingestor

    async def Export(  # noqa: N802 - the generated RPC name
        self, request: metrics_service_pb2.ExportMetricsServiceRequest, context: _Context
    ) -> metrics_service_pb2.ExportMetricsServiceResponse:
        """Ingest every data point; rejected ones are reported in partial_success."""
        with self._ingestor.admit(request.ByteSize()):
            result = await self._ingestor.ingest(map_metrics(request))
        response = metrics_service_pb2.ExportMetricsServiceResponse()
        if result.rejected:
            response.partial_success.rejected_data_points = result.rejected
            response.partial_success.error_message = error_message(result, "data points")
        return response


def otlp_registrations(ingestor: CanIngest) -> list[ServiceRegistration]:
    """The three OTLP collector services, for the OTLP port and for the main gRPC server."""
    return [
        registration(
            TraceReceiver(ingestor), trace_service_pb2_grpc.add_TraceServiceServicer_to_server
        ),
        registration(
            LogsReceiver(ingestor), logs_service_pb2_grpc.add_LogsServiceServicer_to_server
        ),
        registration(
            MetricsReceiver(ingestor),
            metrics_service_pb2_grpc.add_MetricsServiceServicer_to_server,
        ),
    ]
