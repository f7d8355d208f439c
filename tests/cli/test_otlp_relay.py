"""The parent's OTLP/gRPC relay: bytes, credentials, deadline and status pass through as they
came, and nothing else of the caller's metadata does."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import grpc
import grpc.aio
import pytest
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc

from cli.otlp_relay import relay_registrations
from mcpd.runtime.config import GrpcSettings
from mcpd.runtime.server import GrpcServer

SETTINGS = GrpcSettings(shutdown_grace_s=0)


def _untyped(function: Any, *args: Any) -> Any:
    """Call generated OTLP grpc code (opentelemetry-proto ships no types for it)."""
    return function(*args)


class RecordingTraces(trace_service_pb2_grpc.TraceServiceServicer):
    """The upstream a worker stands for: records what reached it, answers or refuses."""

    def __init__(self) -> None:
        self.seen: list[tuple[trace_service_pb2.ExportTraceServiceRequest, dict[str, str]]] = []
        self.deadlines: list[float | None] = []
        self.refuse: tuple[grpc.StatusCode, str] | None = None

    async def Export(  # noqa: N802 (the generated servicer's name)
        self, request: trace_service_pb2.ExportTraceServiceRequest, context: Any
    ) -> trace_service_pb2.ExportTraceServiceResponse:
        self.seen.append((request, dict(context.invocation_metadata())))
        self.deadlines.append(context.time_remaining())
        if self.refuse is not None:
            await context.abort(*self.refuse)
        response = trace_service_pb2.ExportTraceServiceResponse()
        response.partial_success.rejected_spans = 1
        response.partial_success.error_message = "span 0: bad"
        return response


@pytest.fixture
async def relayed() -> AsyncIterator[tuple[RecordingTraces, grpc.aio.Channel]]:
    upstream_servicer = RecordingTraces()
    upstream = grpc.aio.server()
    _untyped(trace_service_pb2_grpc.add_TraceServiceServicer_to_server, upstream_servicer, upstream)
    port = upstream.add_insecure_port("127.0.0.1:0")
    await upstream.start()
    try:
        async with (
            grpc.aio.insecure_channel(f"127.0.0.1:{port}") as to_upstream,
            GrpcServer("127.0.0.1:0", relay_registrations(to_upstream), SETTINGS) as relay,
            grpc.aio.insecure_channel(f"127.0.0.1:{relay.port}") as client,
        ):
            yield upstream_servicer, client
    finally:
        await upstream.stop(0)


def _request() -> trace_service_pb2.ExportTraceServiceRequest:
    request = trace_service_pb2.ExportTraceServiceRequest()
    request.resource_spans.add().scope_spans.add().spans.add(name="chat", span_id=b"\x01" * 8)
    return request


async def test_export_reaches_the_upstream_with_credentials_and_its_answer_comes_back(
    relayed: tuple[RecordingTraces, grpc.aio.Channel],
) -> None:
    upstream, client = relayed
    metadata = (
        ("authorization", "Bearer mcpd_key"),
        ("traceparent", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"),
        ("x-other", "not forwarded"),
    )
    response = await _untyped(trace_service_pb2_grpc.TraceServiceStub, client).Export(
        _request(), metadata=metadata, timeout=30
    )

    assert response.partial_success.rejected_spans == 1
    assert response.partial_success.error_message == "span 0: bad"
    [(request, seen)] = upstream.seen
    assert request == _request()
    assert seen["authorization"] == "Bearer mcpd_key"
    assert seen["traceparent"] == metadata[1][1]
    assert "x-other" not in seen
    # The caller's deadline goes with the call.
    [remaining] = upstream.deadlines
    assert remaining is not None
    assert 0 < remaining <= 30


async def test_an_upstream_refusal_comes_back_with_its_code_and_message(
    relayed: tuple[RecordingTraces, grpc.aio.Channel],
) -> None:
    upstream, client = relayed
    upstream.refuse = (grpc.StatusCode.RESOURCE_EXHAUSTED, "ingest queue is full; retry later")

    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await _untyped(trace_service_pb2_grpc.TraceServiceStub, client).Export(
            _request(), timeout=30
        )

    assert refused.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert refused.value.details() == "ingest queue is full; retry later"
