"""The three OTLP signals: their HTTP paths and the collector services that take them over gRPC."""

from __future__ import annotations

import dataclasses

from google.protobuf.descriptor import FileDescriptor
from google.protobuf.message import Message
from opentelemetry.proto.collector.logs.v1 import logs_service_pb2
from opentelemetry.proto.collector.metrics.v1 import metrics_service_pb2
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2


@dataclasses.dataclass(frozen=True, slots=True)
class Signal:
    """One OTLP signal: `POST path` carries a `request_class`, answered by a `response_class`.

    The gateway forwards it to `service` (the opentelemetry-proto collector service, served by
    the ingest role) as the unary `Export` call.
    """

    name: str
    path: str
    service: str
    request_class: type[Message]
    response_class: type[Message]

    @property
    def grpc_path(self) -> str:
        """The method path of the gRPC call (`/opentelemetry.proto....TraceService/Export`)."""
        return f"/{self.service}/Export"


def _service(file: FileDescriptor, name: str) -> str:
    return file.services_by_name[name].full_name


TRACES = Signal(
    "traces",
    "/v1/traces",
    _service(trace_service_pb2.DESCRIPTOR, "TraceService"),
    trace_service_pb2.ExportTraceServiceRequest,
    trace_service_pb2.ExportTraceServiceResponse,
)
LOGS = Signal(
    "logs",
    "/v1/logs",
    _service(logs_service_pb2.DESCRIPTOR, "LogsService"),
    logs_service_pb2.ExportLogsServiceRequest,
    logs_service_pb2.ExportLogsServiceResponse,
)
METRICS = Signal(
    "metrics",
    "/v1/metrics",
    _service(metrics_service_pb2.DESCRIPTOR, "MetricsService"),
    metrics_service_pb2.ExportMetricsServiceRequest,
    metrics_service_pb2.ExportMetricsServiceResponse,
)
SIGNALS = (TRACES, LOGS, METRICS)
