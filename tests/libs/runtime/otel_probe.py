"""Run by test_telemetry in a fresh interpreter: configure telemetry globally, make one call
from `open_channel` to a `GrpcServer`, print the finished spans and log lines as JSON."""

from __future__ import annotations

import asyncio
import functools
import io
import json
import logging
from typing import Any

import grpc.aio
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from mcpd.model.v1 import query_pb2
from mcpd.query.v1 import query_service_pb2, query_service_pb2_grpc
from mcpd.runtime.channels import open_channel
from mcpd.runtime.config import GrpcSettings
from mcpd.runtime.logging import configure_logging
from mcpd.runtime.server import GrpcServer, ServiceRegistration
from mcpd.runtime.telemetry import configure_telemetry
from mcpd.testing.eventually import eventually_async


class _Servicer(query_service_pb2_grpc.QueryServiceServicer):
    async def GetCapabilities(  # noqa: N802 - the generated RPC name
        self,
        request: query_service_pb2.GetCapabilitiesRequest,
        context: grpc.aio.ServicerContext[Any, Any],
    ) -> query_pb2.StoreCapabilities:
        logging.getLogger("mcpd.probe").info("handling")
        return query_pb2.StoreCapabilities(backend="sqlite")


def _two_spans(exporter: InMemorySpanExporter) -> None:
    assert len(exporter.get_finished_spans()) == 2


def _span(span: ReadableSpan) -> dict[str, Any]:
    context = span.get_span_context()
    assert context is not None
    return {
        "name": span.name,
        "kind": span.kind.name,
        "service": span.resource.attributes["service.name"],
        "trace_id": f"{context.trace_id:032x}",
        "span_id": f"{context.span_id:016x}",
        "parent_id": f"{span.parent.span_id:016x}" if span.parent else None,
    }


async def _call(exporter: InMemorySpanExporter) -> None:
    settings = GrpcSettings(shutdown_grace_s=0)
    servicer = _Servicer()
    registration = ServiceRegistration(
        "mcpd.query.v1.QueryService",
        functools.partial(query_service_pb2_grpc.add_QueryServiceServicer_to_server, servicer),
    )
    async with GrpcServer("127.0.0.1:0", [registration], settings) as server:
        channel = open_channel(f"127.0.0.1:{server.port}", settings)
        try:
            stub = query_service_pb2_grpc.QueryServiceStub(channel)
            await stub.GetCapabilities(query_service_pb2.GetCapabilitiesRequest(), timeout=10)
            # The client span ends in the call's done callback, a moment after the response.
            await eventually_async(lambda: _two_spans(exporter))
        finally:
            await channel.close()


def main() -> None:
    logs = io.StringIO()
    configure_logging("info", "json", stream=logs)
    shutdown = configure_telemetry("mcpd-probe", otlp_endpoint=None)
    provider = trace.get_tracer_provider()
    assert isinstance(provider, TracerProvider)
    exporter = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    try:
        configure_telemetry("mcpd-again", otlp_endpoint=None)
        refused = False
    except RuntimeError:
        refused = True
    asyncio.run(_call(exporter))
    shutdown()
    report = {
        "second_configure_refused": refused,
        "spans": [_span(span) for span in exporter.get_finished_spans()],
        "logs": [json.loads(line) for line in logs.getvalue().splitlines()],
    }
    print(json.dumps(report))


if __name__ == "__main__":
    main()
