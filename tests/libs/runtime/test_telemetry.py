"""Telemetry: what is exported where, and the gRPC interceptors' trace propagation."""

from __future__ import annotations

import asyncio
import functools
import json
import subprocess
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc.aio
import pytest
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc

from mcpd.runtime.config import GrpcSettings
from mcpd.runtime.server import GrpcServer, ServiceRegistration
from mcpd.runtime.telemetry import build_tracer_provider

REPO = Path(__file__).resolve().parents[3]


class _Collector(trace_service_pb2_grpc.TraceServiceServicer):
    """An OTLP/gRPC trace receiver that keeps what it is sent."""

    def __init__(self) -> None:
        self.requests: list[trace_service_pb2.ExportTraceServiceRequest] = []

    async def Export(  # noqa: N802 - the OTLP RPC name
        self,
        request: trace_service_pb2.ExportTraceServiceRequest,
        context: grpc.aio.ServicerContext[Any, Any],
    ) -> trace_service_pb2.ExportTraceServiceResponse:
        self.requests.append(request)
        return trace_service_pb2.ExportTraceServiceResponse()


@dataclass
class _Receiver:
    endpoint: str
    collector: _Collector = field(repr=False)

    def spans(self) -> list[tuple[str, str]]:
        """(service.name, span name) of everything received."""
        found = []
        for request in self.collector.requests:
            for resource_spans in request.resource_spans:
                attributes = {
                    a.key: a.value.string_value for a in resource_spans.resource.attributes
                }
                for scope_spans in resource_spans.scope_spans:
                    found += [(attributes["service.name"], s.name) for s in scope_spans.spans]
        return found


@pytest.fixture
async def receiver() -> AsyncIterator[_Receiver]:
    collector = _Collector()
    registration = ServiceRegistration(
        "opentelemetry.proto.collector.trace.v1.TraceService",
        functools.partial(trace_service_pb2_grpc.add_TraceServiceServicer_to_server, collector),
    )
    async with GrpcServer(
        "127.0.0.1:0", [registration], GrpcSettings(shutdown_grace_s=0)
    ) as server:
        yield _Receiver(f"http://127.0.0.1:{server.port}", collector)


async def test_spans_are_exported_to_the_given_endpoint(receiver: _Receiver) -> None:
    provider = build_tracer_provider("mcpd-test", otlp_endpoint=receiver.endpoint)
    with provider.get_tracer("test").start_as_current_span("unit of work"):
        pass
    # Shutdown flushes synchronously; in a thread, so the receiver on this loop can answer.
    await asyncio.to_thread(provider.shutdown)
    assert receiver.spans() == [("mcpd-test", "unit of work")]


async def test_without_an_endpoint_nothing_is_exported_whatever_the_environment(
    receiver: _Receiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The SDK's own variable must not switch export on: the caller decides, at the edge.
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.endpoint)
    monkeypatch.setenv("OTEL_TRACES_EXPORTER", "otlp")
    provider = build_tracer_provider("mcpd-test", otlp_endpoint=None)
    with provider.get_tracer("test").start_as_current_span("quiet") as span:
        assert span.get_span_context().is_valid
        assert span.resource.attributes["service.name"] == "mcpd-test"  # type: ignore[attr-defined]
    await asyncio.to_thread(provider.shutdown)
    assert receiver.spans() == []


@pytest.mark.e2e  # a child interpreter
def test_global_setup_and_trace_propagation_between_channel_and_server() -> None:
    """In a fresh interpreter, since the global tracer provider can be set once per process."""
    result = subprocess.run(
        [sys.executable, "-m", "tests.libs.runtime.otel_probe"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["second_configure_refused"] is True
    spans = {span["kind"]: span for span in report["spans"]}
    client, server = spans["CLIENT"], spans["SERVER"]
    method = "/mcpd.query.v1.QueryService/GetCapabilities"
    assert client["name"] == server["name"] == method
    assert {client["service"], server["service"]} == {"mcpd-probe"}
    assert server["trace_id"] == client["trace_id"]
    assert server["parent_id"] == client["span_id"]
    # A log line written inside the handler carries the server span.
    [line] = [line for line in report["logs"] if line["msg"] == "handling"]
    assert (line["trace_id"], line["span_id"]) == (server["trace_id"], server["span_id"])
