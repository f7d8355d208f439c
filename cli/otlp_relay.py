"""OTLP/gRPC relayed to the ingest workers, as the gateway relays OTLP/HTTP.

With `ingest.workers`, the parent's OTLP/gRPC port (4317) serves the three collector services
by passing each `Export` on to the workers (one channel, grpc's `round_robin`): the request
goes as the bytes it came in, with the caller's credentials and trace context, under the
caller's deadline, and the worker's answer (partial success included) or status comes back as
it is. The parent's own interceptors have authenticated the call already; the worker
authenticates it again from the same credentials, so a worker never ingests for a caller the
parent would refuse.
"""

from __future__ import annotations

import functools

import grpc
import grpc.aio

from gateway.otlp import SIGNALS, Signal
from gateway.rest import FORWARDED_HEADERS
from mcpd.runtime.server import ServiceRegistration


def relay_registrations(channel: grpc.aio.Channel) -> list[ServiceRegistration]:
    """The OTLP collector services, each `Export` relayed over `channel`."""
    return [
        ServiceRegistration(signal.service, functools.partial(_add_relay, signal, channel))
        for signal in SIGNALS
    ]


def _add_relay(signal: Signal, channel: grpc.aio.Channel, server: grpc.aio.Server) -> None:
    call: grpc.aio.UnaryUnaryMultiCallable[bytes, bytes] = channel.unary_unary(signal.grpc_path)

    async def export(request: bytes, context: grpc.aio.ServicerContext[bytes, bytes]) -> bytes:
        metadata = tuple(
            (key, value)
            for key, value in context.invocation_metadata() or ()
            if key in FORWARDED_HEADERS and isinstance(value, str)
        )
        try:
            return await call(request, timeout=context.time_remaining(), metadata=metadata)
        except grpc.aio.AioRpcError as error:
            trailing = tuple(error.trailing_metadata() or ())
            await context.abort(error.code(), error.details() or "", trailing)

    # No serializers: bytes in, bytes out.
    handler: grpc.RpcMethodHandler[bytes, bytes] = grpc.unary_unary_rpc_method_handler(export)
    method = signal.grpc_path.rsplit("/", 1)[1]
    server.add_generic_rpc_handlers(
        (grpc.method_handlers_generic_handler(signal.service, {method: handler}),)
    )
