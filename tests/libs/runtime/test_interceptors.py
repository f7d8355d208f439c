"""The error interceptor, seen from a real client: statuses, ErrorInfo, no leaks."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import grpc
import grpc.aio
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from mcpd.query.v1 import query_service_pb2, query_service_pb2_grpc
from mcpd.runtime.config import GrpcSettings
from mcpd.runtime.errors import Unauthenticated
from mcpd.runtime.errors_grpc import RpcFailure, rpc_failure_from
from mcpd.runtime.server import GrpcServer
from tests.libs.runtime.conftest import STREAM_SERVICE, FakeQueryServicer, Running, registrations


async def _capabilities_failure(running: Running, project: str) -> RpcFailure:
    query = query_service_pb2_grpc.QueryServiceStub(running.channel)
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await query.GetCapabilities(
            query_service_pb2.GetCapabilitiesRequest(project=project), timeout=10
        )
    return rpc_failure_from(caught.value)


async def test_success_passes_through(running: Running) -> None:
    query = query_service_pb2_grpc.QueryServiceStub(running.channel)
    response = await query.GetCapabilities(query_service_pb2.GetCapabilitiesRequest(project="x"))
    assert response.backend == "x"


async def test_mcpd_error_becomes_its_status_with_error_info(running: Running) -> None:
    failure = await _capabilities_failure(running, "invalid")
    assert failure == RpcFailure(
        code=grpc.StatusCode.INVALID_ARGUMENT,
        message="limit must be positive",
        reason="INVALID_ARGUMENT",
        field="limit",
        metadata={},
    )


async def test_custom_reason_and_metadata_survive(running: Running) -> None:
    failure = await _capabilities_failure(running, "missing")
    assert (failure.code, failure.reason, failure.field, failure.metadata) == (
        grpc.StatusCode.NOT_FOUND,
        "PROJECT_NOT_FOUND",
        None,
        {"id": "p1"},
    )


async def test_unexpected_exception_is_internal_and_does_not_leak(
    running: Running, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.ERROR, logger="mcpd.runtime.grpc"):
        failure = await _capabilities_failure(running, "boom")
    assert failure.code == grpc.StatusCode.INTERNAL
    assert failure.message == "internal error"
    assert failure.reason == "INTERNAL"
    assert "hunter2" not in repr(failure)
    # The log has the stack and the same incident id the caller got.
    incident = failure.metadata["incident_id"]
    [record] = [r for r in caplog.records if getattr(r, "incident_id", None) == incident]
    assert record.exc_info is not None
    assert isinstance(record.exc_info[1], RuntimeError)
    assert record.__dict__["rpc"] == "/mcpd.query.v1.QueryService/GetCapabilities"


async def test_grpc_abort_passes_through(running: Running) -> None:
    failure = await _capabilities_failure(running, "abort")
    assert (failure.code, failure.message, failure.reason) == (
        grpc.StatusCode.PERMISSION_DENIED,
        "aborted by handler",
        "PERMISSION_DENIED",  # no ErrorInfo: the reason falls back to the code's name
    )


async def test_abort_with_sends_error_info(running: Running) -> None:
    failure = await _capabilities_failure(running, "abort_with")
    assert (failure.code, failure.message, failure.reason, failure.field) == (
        grpc.StatusCode.NOT_FOUND,
        "gone",
        "NOT_FOUND",
        "project",
    )


async def test_an_exception_after_abort_keeps_the_first_status(running: Running) -> None:
    failure = await _capabilities_failure(running, "aborted_then_raise")
    assert (failure.code, failure.message) == (grpc.StatusCode.FAILED_PRECONDITION, "first word")


async def test_unimplemented_method_is_unimplemented(running: Running) -> None:
    query = query_service_pb2_grpc.QueryServiceStub(running.channel)
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await query.ListTraces(query_service_pb2.ListTracesRequest(), timeout=10)
    failure = rpc_failure_from(caught.value)
    assert (failure.code, failure.reason) == (grpc.StatusCode.UNIMPLEMENTED, "UNIMPLEMENTED")
    assert "ListTraces" in failure.message


async def test_unknown_method_is_unimplemented(running: Running) -> None:
    method: grpc.aio.UnaryUnaryMultiCallable[bytes, bytes] = running.channel.unary_unary(
        "/mcpd.nope.v1.Nothing/Do"
    )
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await method(b"", timeout=10)
    assert caught.value.code() == grpc.StatusCode.UNIMPLEMENTED


async def _stream(running: Running, request: str) -> tuple[list[bytes], RpcFailure | None]:
    method: grpc.aio.UnaryStreamMultiCallable[bytes, bytes] = running.channel.unary_stream(
        f"/{STREAM_SERVICE}/Count"
    )
    call = method(request.encode(), timeout=10)
    received: list[bytes] = []
    try:
        async for message in call:
            received.append(message)
    except grpc.aio.AioRpcError as exc:
        return received, rpc_failure_from(exc)
    return received, None


async def test_streaming_handlers_stream_and_map_errors(running: Running) -> None:
    assert await _stream(running, "3") == ([b"0", b"1", b"2"], None)

    received, failure = await _stream(running, "2:invalid")
    assert received == [b"0", b"1"]
    assert failure is not None
    assert (failure.code, failure.field) == (grpc.StatusCode.INVALID_ARGUMENT, "cursor")

    received, failure = await _stream(running, "1:boom")
    assert received == [b"0"]
    assert failure is not None
    assert (failure.code, failure.message) == (grpc.StatusCode.INTERNAL, "internal error")


async def test_health_watch_streams_through_the_interceptors(running: Running) -> None:
    watch = health_pb2_grpc.HealthStub(running.channel).Watch(health_pb2.HealthCheckRequest())
    assert (await watch.read()).status == health_pb2.HealthCheckResponse.SERVING
    watch.cancel()


async def test_cancellation_reaches_the_handler_and_is_not_reported_as_an_error(
    running: Running, caplog: pytest.LogCaptureFixture
) -> None:
    query = query_service_pb2_grpc.QueryServiceStub(running.channel)
    with caplog.at_level(logging.DEBUG, logger="mcpd.runtime.grpc"):
        call = query.GetCapabilities(query_service_pb2.GetCapabilitiesRequest(project="hang"))
        # Cancelling before the handler runs would test nothing.
        await asyncio.wait_for(running.servicer.hang_started.wait(), timeout=10)
        assert call.cancel()
        await asyncio.wait_for(running.servicer.cancelled.wait(), timeout=10)
        with pytest.raises(asyncio.CancelledError):
            await call
    assert [r for r in caplog.records if r.levelno >= logging.WARNING] == []


class _RefuseEverything(grpc.aio.ServerInterceptor):
    """An auth-like interceptor that refuses before any handler exists."""

    async def intercept_service(self, continuation: Any, handler_call_details: Any) -> Any:
        raise Unauthenticated("no key", reason="MISSING_API_KEY")


async def test_errors_raised_by_later_interceptors_are_mapped() -> None:
    settings = GrpcSettings(shutdown_grace_s=0)
    servicer = FakeQueryServicer()
    async with (
        GrpcServer(
            "127.0.0.1:0", registrations(servicer), settings, interceptors=[_RefuseEverything()]
        ) as server,
        grpc.aio.insecure_channel(f"127.0.0.1:{server.port}") as channel,
    ):
        query = query_service_pb2_grpc.QueryServiceStub(channel)
        with pytest.raises(grpc.aio.AioRpcError) as unary:
            await query.GetCapabilities(query_service_pb2.GetCapabilitiesRequest(), timeout=10)
        watch = health_pb2_grpc.HealthStub(channel).Watch(health_pb2.HealthCheckRequest())
        with pytest.raises(grpc.aio.AioRpcError) as streaming:
            await watch.read()
    for caught in (unary, streaming):
        failure = rpc_failure_from(caught.value)
        assert (failure.code, failure.message, failure.reason) == (
            grpc.StatusCode.UNAUTHENTICATED,
            "no key",
            "MISSING_API_KEY",
        )
