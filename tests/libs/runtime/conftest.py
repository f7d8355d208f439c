"""A real grpc.aio server on port 0 running a test QueryService, and a channel to it."""

from __future__ import annotations

import asyncio
import functools
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import grpc
import grpc.aio
import pytest

from mcpd.model.v1 import query_pb2
from mcpd.query.v1 import query_service_pb2, query_service_pb2_grpc
from mcpd.runtime.channels import open_channel
from mcpd.runtime.config import GrpcSettings
from mcpd.runtime.errors import InvalidArgument, NotFound
from mcpd.runtime.errors_grpc import abort_with
from mcpd.runtime.server import GrpcServer, ServiceRegistration

QUERY_SERVICE = "mcpd.query.v1.QueryService"
STREAM_SERVICE = "mcpd.test.v1.Streams"


class FakeQueryServicer(query_service_pb2_grpc.QueryServiceServicer):
    """GetCapabilities misbehaves on request, chosen by `project`; GetHealth blocks until told.

    Every other RPC is the generated base's (a plain function raising NotImplementedError),
    which the tests rely on for UNIMPLEMENTED.
    """

    def __init__(self) -> None:
        self.health_started = asyncio.Event()
        self.release_health = asyncio.Event()
        self.hang_started = asyncio.Event()
        self.cancelled = asyncio.Event()

    async def GetCapabilities(  # noqa: N802 - the generated RPC name
        self,
        request: query_service_pb2.GetCapabilitiesRequest,
        context: grpc.aio.ServicerContext[Any, Any],
    ) -> query_pb2.StoreCapabilities:
        match request.project:
            case "invalid":
                raise InvalidArgument("limit must be positive", field="limit")
            case "missing":
                raise NotFound("no such project", reason="PROJECT_NOT_FOUND", metadata={"id": "p1"})
            case "boom":
                raise RuntimeError("password=hunter2 leaked from the database driver")
            case "abort":
                await context.abort(grpc.StatusCode.PERMISSION_DENIED, "aborted by handler")
            case "abort_with":
                await abort_with(context, NotFound("gone", field="project"))
            case "aborted_then_raise":
                try:
                    await context.abort(grpc.StatusCode.FAILED_PRECONDITION, "first word")
                except grpc.aio.AbortError:
                    raise RuntimeError("raised after aborting") from None
            case "hang":
                self.hang_started.set()
                try:
                    await asyncio.Event().wait()
                except asyncio.CancelledError:
                    self.cancelled.set()
                    raise
        return query_pb2.StoreCapabilities(backend=request.project or "sqlite")

    async def GetHealth(  # noqa: N802 - the generated RPC name
        self,
        request: query_service_pb2.GetHealthRequest,
        context: grpc.aio.ServicerContext[Any, Any],
    ) -> query_pb2.HealthStatus:
        self.health_started.set()
        await self.release_health.wait()
        return query_pb2.HealthStatus(status="ok")


def _identity(data: bytes) -> bytes:
    return data


async def _count(
    request: bytes, context: grpc.aio.ServicerContext[Any, Any]
) -> AsyncIterator[bytes]:
    """Streams `n` numbers for request `n`, then fails as the request's suffix says."""
    text = request.decode()
    count, _, failure = text.partition(":")
    for index in range(int(count)):
        yield str(index).encode()
    if failure == "invalid":
        raise InvalidArgument("bad stream position", field="cursor")
    if failure == "boom":
        raise RuntimeError("stream internals")


def _add_streams(server: grpc.aio.Server) -> None:
    handler = grpc.unary_stream_rpc_method_handler(
        _count, request_deserializer=_identity, response_serializer=_identity
    )
    server.add_generic_rpc_handlers(
        [grpc.method_handlers_generic_handler(STREAM_SERVICE, {"Count": handler})]
    )


@dataclass
class Running:
    """A started server, a channel to it and the servicer behind it."""

    server: GrpcServer
    channel: grpc.aio.Channel
    servicer: FakeQueryServicer
    settings: GrpcSettings

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.server.port}"


def registrations(servicer: FakeQueryServicer) -> list[ServiceRegistration]:
    return [
        ServiceRegistration(
            QUERY_SERVICE,
            functools.partial(query_service_pb2_grpc.add_QueryServiceServicer_to_server, servicer),
        ),
        ServiceRegistration(STREAM_SERVICE, _add_streams),
    ]


@pytest.fixture
async def running() -> AsyncIterator[Running]:
    settings = GrpcSettings(shutdown_grace_s=0.0)
    servicer = FakeQueryServicer()
    async with GrpcServer("127.0.0.1:0", registrations(servicer), settings) as server:
        channel = open_channel(f"127.0.0.1:{server.port}", settings)
        try:
            yield Running(server, channel, servicer, settings)
        finally:
            await channel.close()
