"""Client channels from one mcpd service to another (and from the gateway to the services)."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterable, Awaitable, Callable, Iterable, Sequence
from typing import TypeVar, cast

import grpc.aio
from opentelemetry.instrumentation.grpc import aio_client_interceptors

from mcpd.runtime.config import GrpcSettings

_Req = TypeVar("_Req")
_Resp = TypeVar("_Resp")

# The instrumentation package is untyped; this is the signature we rely on.
_otel_client_interceptors = cast(
    Callable[[], list[grpc.aio.ClientInterceptor]], aio_client_interceptors
)


class _SettleUnaryCalls(
    grpc.aio.UnaryUnaryClientInterceptor, grpc.aio.StreamUnaryClientInterceptor
):
    """Await unary responses inside the interceptor chain, so cancelling a call cancels the RPC.

    OpenTelemetry's aio client interceptor waits for a unary call's status without awaiting the
    call itself; cancelling the caller then cancels only that wait, and the RPC runs on at the
    server until its deadline (open-telemetry/opentelemetry-python-contrib#3271). Awaiting the
    call here, after OpenTelemetry's interceptor, routes the cancellation into the call. A
    failed call is returned, not raised: the caller sees the error when it awaits, and the
    OpenTelemetry span still ends with the call's status.
    """

    async def intercept_unary_unary(
        self,
        continuation: Callable[
            [grpc.aio.ClientCallDetails, _Req], Awaitable[grpc.aio.UnaryUnaryCall[_Req, _Resp]]
        ],
        client_call_details: grpc.aio.ClientCallDetails,
        request: _Req,
    ) -> grpc.aio.UnaryUnaryCall[_Req, _Resp]:
        """Start the call and wait for it to finish (successfully or not)."""
        call = await continuation(client_call_details, request)
        with contextlib.suppress(grpc.aio.AioRpcError):  # the caller gets it when it awaits
            await call
        return call

    async def intercept_stream_unary(
        self,
        continuation: Callable[
            [grpc.aio.ClientCallDetails, AsyncIterable[_Req] | Iterable[_Req]],
            Awaitable[grpc.aio.StreamUnaryCall[_Req, _Resp]],
        ],
        client_call_details: grpc.aio.ClientCallDetails,
        request_iterator: AsyncIterable[_Req] | Iterable[_Req],
    ) -> grpc.aio.StreamUnaryCall[_Req, _Resp]:
        """Start the call and wait for it to finish (successfully or not)."""
        call = await continuation(client_call_details, request_iterator)
        with contextlib.suppress(grpc.aio.AioRpcError):  # the caller gets it when it awaits
            await call
        return call


def channel_options(grpc_settings: GrpcSettings) -> list[tuple[str, int]]:
    """grpc core channel arguments for a client channel with `grpc_settings`."""
    return [
        ("grpc.max_send_message_length", grpc_settings.max_message_bytes),
        ("grpc.max_receive_message_length", grpc_settings.max_message_bytes),
        # Ping idle connections too: a peer behind a load balancer or NAT can vanish without a
        # FIN, and the next call would otherwise hang until its deadline.
        ("grpc.keepalive_time_ms", grpc_settings.keepalive_time_ms),
        ("grpc.keepalive_timeout_ms", grpc_settings.keepalive_timeout_ms),
        ("grpc.keepalive_permit_without_calls", 1),
        ("grpc.http2.max_pings_without_data", 0),
    ]


def open_channel(address: str, grpc_settings: GrpcSettings) -> grpc.aio.Channel:
    """An insecure channel to `address` (`host:port`) that traces its calls with OpenTelemetry
    (the W3C trace context travels in the call metadata).

    The caller owns it: `await channel.close()` when done (an `AsyncExitStack` callback).
    """
    return _insecure(address, channel_options(grpc_settings))


def open_replicas_channel(
    addresses: Sequence[str], grpc_settings: GrpcSettings
) -> grpc.aio.Channel:
    """One channel to several replicas of the same services, each call sent to the next one
    (grpc's `round_robin` policy, which also skips a replica that stopped answering).

    `addresses` are IP literals with ports (`127.0.0.1:41234`, `[::1]:41234`), all of one
    family: the `ipv4:`/`ipv6:` target names them all without a resolver.
    """
    if not addresses:
        raise ValueError("a replicas channel needs at least one address")
    family = "ipv6" if addresses[0].startswith("[") else "ipv4"
    if any(address.startswith("[") != (family == "ipv6") for address in addresses):
        raise ValueError(f"replica addresses mix IPv4 and IPv6: {', '.join(addresses)}")
    options: list[tuple[str, int | str]] = [
        *channel_options(grpc_settings),
        ("grpc.lb_policy_name", "round_robin"),
    ]
    return _insecure(f"{family}:{','.join(addresses)}", options)


def _insecure(target: str, options: Sequence[tuple[str, int | str]]) -> grpc.aio.Channel:
    return grpc.aio.insecure_channel(
        target,
        options=list(options),
        interceptors=[*_otel_client_interceptors(), _SettleUnaryCalls()],
    )
