"""A minimal OTLP collector (the three `Export` RPCs) on a real gRPC server, recording what it
receives and answering scripted failures and partial successes; and the gateway before it."""

from __future__ import annotations

import contextlib
import dataclasses
import functools
from collections.abc import AsyncIterator
from typing import Any

import grpc
import grpc.aio
from google.protobuf import any_pb2, duration_pb2
from google.protobuf.message import Message
from google.rpc import code_pb2, error_details_pb2, status_pb2
from grpc_status import rpc_status
from opentelemetry.proto.collector.logs.v1 import logs_service_pb2
from opentelemetry.proto.collector.metrics.v1 import metrics_service_pb2
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2
from starlette.applications import Starlette
from starlette.types import Receive, Scope, Send

from cli.http_server import HttpServer
from gateway.app import create_app
from gateway.otlp import SIGNALS, Signal
from gateway.tests.access_stub import AccessCheckStub
from mcpd.runtime.channels import open_channel
from mcpd.runtime.config import GrpcSettings
from mcpd.runtime.errors import (
    InvalidArgument,
    PermissionDenied,
    ResourceExhausted,
    Unauthenticated,
)
from mcpd.runtime.interceptors import ErrorInterceptor

Context = grpc.aio.ServicerContext[Any, Any]

REJECT_PREFIX = "reject"
"""Spans, log records (by body) and metrics whose name starts with this are rejected."""


@dataclasses.dataclass
class Export:
    """One Export call the collector received."""

    signal: str
    request: Any
    metadata: dict[str, str]


class Collector:
    """The three collector services; answers by the caller's `authorization`:

    `Bearer wrong` UNAUTHENTICATED, `Bearer forbidden` PERMISSION_DENIED, `Bearer invalid`
    INVALID_ARGUMENT (with a field), `Bearer busy` RESOURCE_EXHAUSTED (ErrorInfo
    `retry_after_s=7`), `Bearer overloaded` UNAVAILABLE (RetryInfo 2.5 s). Anything else is
    accepted, except the items named `reject...`, counted in `partial_success`.
    """

    def __init__(self) -> None:
        self.exports: list[Export] = []

    def handlers(self) -> list[grpc.GenericRpcHandler]:
        """One generic handler per collector service."""
        return [
            grpc.method_handlers_generic_handler(
                signal.service,
                {
                    "Export": grpc.unary_unary_rpc_method_handler(
                        functools.partial(self._export, signal),
                        request_deserializer=signal.request_class.FromString,
                        response_serializer=signal.response_class.SerializeToString,
                    )
                },
            )
            for signal in SIGNALS
        ]

    def last(self, signal: Signal) -> Any:
        """The last request received for `signal`."""
        found = [export.request for export in self.exports if export.signal == signal.name]
        assert found, f"no {signal.name} export received"
        return found[-1]

    async def _export(self, signal: Signal, request: Message, context: Context) -> Message:
        metadata = {k: v for k, v in context.invocation_metadata() or () if isinstance(v, str)}
        self.exports.append(Export(signal.name, request, metadata))
        match metadata.get("authorization"):
            case "Bearer wrong":
                raise Unauthenticated("unknown key", reason="UNKNOWN_KEY")
            case "Bearer forbidden":
                raise PermissionDenied("this key may not ingest", reason="SCOPE")
            case "Bearer invalid":
                raise InvalidArgument("no service.name", field="resource_spans[0].resource")
            case "Bearer busy":
                raise ResourceExhausted("queue full", metadata={"retry_after_s": "7"})
            case "Bearer overloaded":
                await _abort_with_retry_info(context)
        return _answer(signal, request)


_REJECTED_FIELD = {
    "traces": "rejected_spans",
    "logs": "rejected_log_records",
    "metrics": "rejected_data_points",
}


def _answer(signal: Signal, request: Message) -> Message:
    response = signal.response_class()
    rejected = sum(name.startswith(REJECT_PREFIX) for name in _names(signal, request))
    if rejected:
        partial = getattr(response, "partial_success")  # noqa: B009 - not on Message's type
        setattr(partial, _REJECTED_FIELD[signal.name], rejected)
        partial.error_message = f"{rejected} {signal.name} items named {REJECT_PREFIX}..."
    return response


def _names(signal: Signal, request: Message) -> list[str]:
    if isinstance(request, trace_service_pb2.ExportTraceServiceRequest):
        return [s.name for r in request.resource_spans for ss in r.scope_spans for s in ss.spans]
    if isinstance(request, logs_service_pb2.ExportLogsServiceRequest):
        return [
            lr.body.string_value
            for r in request.resource_logs
            for sl in r.scope_logs
            for lr in sl.log_records
        ]
    assert isinstance(request, metrics_service_pb2.ExportMetricsServiceRequest), signal
    return [m.name for r in request.resource_metrics for sm in r.scope_metrics for m in sm.metrics]


async def _abort_with_retry_info(context: Context) -> None:
    detail = any_pb2.Any()
    detail.Pack(
        error_details_pb2.RetryInfo(retry_delay=duration_pb2.Duration(seconds=2, nanos=500_000_000))
    )
    status = rpc_status.to_status(
        status_pb2.Status(code=code_pb2.UNAVAILABLE, message="overloaded", details=[detail])
    )
    await context.abort(status.code, status.details, status.trailing_metadata)


@dataclasses.dataclass
class Upstream:
    """The running collector and the channel the gateway reaches it by."""

    collector: Collector
    channel: grpc.aio.Channel
    asked_for: list[str]
    access: AccessCheckStub

    def channel_for(self, service: str) -> grpc.aio.Channel:
        self.asked_for.append(service)
        return self.channel

    def app(self, **options: Any) -> Starlette:
        """The gateway app, every service reached on this collector's channel."""
        return create_app(self.channel_for, **options)


@contextlib.asynccontextmanager
async def running_collector() -> AsyncIterator[Upstream]:
    """The collector on a free port, reached through a production channel (interceptors and
    all)."""
    collector = Collector()
    access = AccessCheckStub()
    server = grpc.aio.server(interceptors=[ErrorInterceptor(), access])
    server.add_generic_rpc_handlers(collector.handlers())
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    channel = open_channel(f"127.0.0.1:{port}", GrpcSettings())
    try:
        yield Upstream(collector, channel, [], access)
    finally:
        await channel.close()
        await server.stop(None)


@dataclasses.dataclass(frozen=True)
class Seen:
    """One HTTP request as the gateway received it."""

    path: str
    content_type: str | None
    content_encoding: str | None


@contextlib.asynccontextmanager
async def served_gateway(
    upstream: Upstream, seen: list[Seen] | None = None, **options: Any
) -> AsyncIterator[str]:
    """The gateway before `upstream` on a real uvicorn port; yields its base URL. Each request's
    path and body headers are appended to `seen`."""
    app = upstream.app(**options)

    async def observed(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and seen is not None:
            headers = {k.decode(): v.decode() for k, v in scope["headers"]}
            seen.append(
                Seen(scope["path"], headers.get("content-type"), headers.get("content-encoding"))
            )
        await app(scope, receive, send)

    async with HttpServer(observed, "127.0.0.1:0") as http:
        yield f"http://127.0.0.1:{http.port}"
