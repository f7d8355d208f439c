"""The gRPC server every mcpd process runs: services, health, reflection, interceptors.

`GrpcServer` is an async context manager. Entering builds a `grpc.aio` server with the
OpenTelemetry interceptor (outermost, so the span covers everything), the error interceptor,
then the caller's interceptors (auth, admission: errors they raise are mapped too); registers
the services, `grpc.health.v1` (SERVING for "" and every service) and server reflection; binds and
starts. Leaving stops it: health turns NOT_SERVING first, so probes and watchers see the drain,
then in-flight RPCs get the grace period.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Callable, Sequence
from types import TracebackType
from typing import Any, Self, cast

import grpc
import grpc.aio
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection
from opentelemetry.instrumentation.grpc import aio_server_interceptor

from mcpd.runtime.config import GrpcSettings
from mcpd.runtime.interceptors import ErrorInterceptor

log = logging.getLogger("mcpd.runtime.grpc")

# The instrumentation package is untyped; this is the signature we rely on.
_otel_server_interceptor = cast(Callable[[], grpc.aio.ServerInterceptor], aio_server_interceptor)

_SERVING = health_pb2.HealthCheckResponse.SERVING
_NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING


@dataclasses.dataclass(frozen=True, slots=True)
class ServiceRegistration:
    """One gRPC service to serve: its full proto name and how to add its servicer.

    `full_name` is e.g. `mcpd.query.v1.QueryService`: the name health checks and reflection
    use. `add` is typically `functools.partial(add_QueryServiceServicer_to_server, servicer)`.
    """

    full_name: str
    add: Callable[[grpc.aio.Server], None]


def server_options(
    grpc_settings: GrpcSettings, *, reuse_port: bool = False
) -> list[tuple[str, int]]:
    """grpc core channel arguments for a server with `grpc_settings`; `reuse_port` lets the
    identical processes of one `mcpd serve` share its ports (SO_REUSEPORT)."""
    return [
        ("grpc.max_send_message_length", grpc_settings.max_message_bytes),
        ("grpc.max_receive_message_length", grpc_settings.max_message_bytes),
        ("grpc.keepalive_time_ms", grpc_settings.keepalive_time_ms),
        ("grpc.keepalive_timeout_ms", grpc_settings.keepalive_timeout_ms),
        # Our channels ping idle connections at keepalive_time_ms; the server's default (one
        # ping per 5 minutes without data) would answer them with GOAWAY "too_many_pings".
        ("grpc.keepalive_permit_without_calls", 1),
        ("grpc.http2.min_ping_interval_without_data_ms", grpc_settings.keepalive_time_ms // 2),
        # grpc sets SO_REUSEPORT by default on Linux, which lets a second daemon bind the same
        # port silently and steal half the connections. A busy port must be an error, unless
        # the processes sharing it are one daemon's (whose supervisor proved it free first).
        ("grpc.so_reuseport", 1 if reuse_port else 0),
    ]


class GrpcServer:
    """A started `grpc.aio` server for `registrations` at `address` (`host:port`, port 0 ok)."""

    def __init__(
        self,
        address: str,
        registrations: Sequence[ServiceRegistration],
        grpc_settings: GrpcSettings,
        *,
        interceptors: Sequence[grpc.aio.ServerInterceptor] = (),
        reuse_port: bool = False,
        also_on: Sequence[str] = (),
    ) -> None:
        names = [r.full_name for r in registrations]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise ValueError(f"services registered twice: {', '.join(duplicates)}")
        self._address = address
        self._registrations = tuple(registrations)
        self._settings = grpc_settings
        self._interceptors = tuple(interceptors)
        self._reuse_port = reuse_port
        self._also_on = tuple(also_on)
        self._server: grpc.aio.Server | None = None
        # grpc_health ships no type information; this is its aio HealthServicer.
        self._health: Any = None
        self._port: int | None = None
        self._also_ports: tuple[int, ...] = ()
        self._stopping: asyncio.Future[None] | None = None

    @property
    def port(self) -> int:
        """The bound port (the real one when the address asked for port 0)."""
        if self._port is None:
            raise RuntimeError("the server has not started")
        return self._port

    @property
    def also_ports(self) -> tuple[int, ...]:
        """The ports bound for `also_on`, in its order (the real ones for port 0)."""
        return self._also_ports

    @property
    def service_names(self) -> tuple[str, ...]:
        """Every service the server answers, health and reflection included."""
        return (
            *(r.full_name for r in self._registrations),
            health.SERVICE_NAME,
            reflection.SERVICE_NAME,
        )

    async def __aenter__(self) -> Self:
        """Build, bind and start the server."""
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        """Stop with the configured grace."""
        await self.stop()

    async def start(self) -> None:
        """Build, bind and start the server (what entering the context does)."""
        if self._server is not None:
            raise RuntimeError("the server has already started")
        server = grpc.aio.server(
            interceptors=[_otel_server_interceptor(), ErrorInterceptor(), *self._interceptors],
            options=server_options(self._settings, reuse_port=self._reuse_port),
        )
        for registration in self._registrations:
            registration.add(server)
        self._health = health.aio.HealthServicer()
        health_pb2_grpc.add_HealthServicer_to_server(self._health, server)
        reflection.enable_server_reflection(self.service_names, server)
        port, *also = (_bind(server, address) for address in (self._address, *self._also_on))
        for name in ("", *(r.full_name for r in self._registrations)):
            await self._health.set(name, _SERVING)
        await server.start()
        self._server, self._port, self._also_ports = server, port, tuple(also)
        log.debug(
            "gRPC server listening",
            extra={"address": self._address, "port": port, "services": list(self.service_names)},
        )

    async def set_serving(self, service: str, serving: bool) -> None:
        """Report `service` ("" for the whole server) as SERVING or NOT_SERVING.

        Ignored once the server is stopping: draining is NOT_SERVING for good.
        """
        if self._health is None:
            raise RuntimeError("the server has not started")
        await self._health.set(service, _SERVING if serving else _NOT_SERVING)

    async def stop(self, grace: float | None = None) -> None:
        """Stop: every health status NOT_SERVING, then stop with `grace` seconds for in-flight
        RPCs (default: the configured `shutdown_grace_s`). Idempotent; concurrent callers all
        wait for the one shutdown."""
        if self._server is None:
            return
        if self._stopping is None:
            self._stopping = asyncio.ensure_future(
                self._shutdown(
                    self._server, self._settings.shutdown_grace_s if grace is None else grace
                )
            )
        # Shielded: a caller being cancelled must not leave the server half stopped.
        await asyncio.shield(self._stopping)

    async def _shutdown(self, server: grpc.aio.Server, grace: float) -> None:
        # Health first: watchers learn NOT_SERVING while the server still talks to them.
        await self._health.enter_graceful_shutdown()
        log.debug("gRPC server draining", extra={"address": self._address, "grace_s": grace})
        await server.stop(grace)
        log.debug("gRPC server stopped", extra={"address": self._address})

    async def wait_for_termination(self) -> None:
        """Return once the server has stopped (by `stop` or otherwise)."""
        if self._server is None:
            raise RuntimeError("the server has not started")
        await self._server.wait_for_termination()


def _bind(server: grpc.aio.Server, address: str) -> int:
    """Add an insecure port at `address`; the bound port."""
    try:
        port = server.add_insecure_port(address)
    except RuntimeError as exc:
        raise OSError(f"cannot listen for gRPC on {address}: {exc}") from exc
    if port == 0:  # older grpc reports a failed bind as port 0 instead of raising
        raise OSError(f"cannot listen for gRPC on {address}")
    return port
