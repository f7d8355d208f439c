"""The REST transcoder: an ASGI app that turns each HTTP request into one unary gRPC call.

Route, bind, call, encode. The upstream call goes through a generic
`channel.unary_unary("/pkg.Service/Method")` with the request and response classes of the
descriptor, so the gateway needs no stub per service and no code per RPC.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Awaitable, Callable, Iterable
from typing import TYPE_CHECKING

import grpc
import grpc.aio
from google.api import httpbody_pb2
from google.protobuf.message import Message
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.types import Receive, Scope, Send

from gateway.rest import errors
from gateway.rest.binding import bind_request
from gateway.rest.catalog import Rpc
from gateway.rest.routes import MethodNotAllowed, Router
from gateway.rest.templates import PathTemplate
from mcpd import codec
from mcpd.runtime.errors import InvalidArgument, McpdError, quoted
from mcpd.runtime.errors_grpc import rpc_failure_from

if TYPE_CHECKING:
    from gateway.access import AccessCheck

log = logging.getLogger("mcpd.gateway")

ChannelFor = Callable[[str], grpc.aio.Channel]
"""Finds the channel to the process serving a proto service, by the service's full name."""

Endpoint = Callable[[Request], Awaitable[Response]]
"""A plain HTTP endpoint served beside the RPCs (the OpenAPI document)."""

TIMEOUT_HEADER = "x-mcpd-timeout"
"""Request header: the caller's deadline in seconds; capped, and defaulted when absent."""

FORWARDED_HEADERS = ("authorization", "traceparent", "tracestate")
"""Headers passed to the upstream as gRPC metadata: credentials and W3C trace context."""

CLIENT_ADDRESS_METADATA = "x-forwarded-for"


def _serialize(message: Message) -> bytes:
    return message.SerializeToString()


class RestTranscoder:
    """An ASGI app serving every `Rpc` (and a few plain endpoints) under one router."""

    def __init__(
        self,
        rpcs: Iterable[Rpc],
        channel_for: ChannelFor,
        *,
        default_deadline_s: float,
        max_deadline_s: float,
        max_body_bytes: int,
        access: AccessCheck,
        endpoints: Iterable[tuple[str, str, Endpoint]] = (),
    ) -> None:
        if not 0 < default_deadline_s <= max_deadline_s:
            raise ValueError("need 0 < default_deadline_s <= max_deadline_s")
        self._channel_for = channel_for
        self._access = access
        self._default_deadline_s = default_deadline_s
        self._max_deadline_s = max_deadline_s
        self._max_body_bytes = max_body_bytes
        self._router: Router[Rpc | Endpoint] = Router()
        for rpc in rpcs:
            self._router.add(rpc.http_method, rpc.template, rpc)
        for method, path, endpoint in endpoints:
            self._router.add(method, PathTemplate.parse(path, None), endpoint)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """ASGI entry point (HTTP; a WebSocket reaching it is refused)."""
        if scope["type"] == "websocket":
            # Closing before accepting makes the server answer the upgrade with a 403.
            await send({"type": "websocket.close", "code": 1008})
            return
        if scope["type"] != "http":
            raise RuntimeError(f"the REST transcoder serves HTTP, not {scope['type']}")
        request = Request(scope, receive)
        try:
            response = await self._dispatch(request)
        except Exception:
            # The one backstop: a bug must still answer in the one error shape, without internals.
            log.exception("unhandled error serving %s %s", request.method, request.url.path)
            response = errors.error_response(
                grpc.StatusCode.INTERNAL, "internal error", reason=errors.INTERNAL
            )
        await response(scope, receive, send)

    async def _dispatch(self, request: Request) -> Response:
        raw = request.scope.get("raw_path") or request.scope["path"].encode()
        raw_path = raw.decode("latin-1").split("?", 1)[0]
        match = self._router.match(request.method, raw_path)
        if match is None:
            return errors.error_response(
                grpc.StatusCode.NOT_FOUND,
                f"no route for {request.method} {request.url.path}",
                reason=errors.ROUTE_NOT_FOUND,
            )
        if isinstance(match, MethodNotAllowed):
            allowed = ", ".join(match.allowed)
            return errors.error_response(
                grpc.StatusCode.UNIMPLEMENTED,
                f"{request.url.path} does not accept {request.method}; it accepts {allowed}",
                reason=errors.METHOD_NOT_ALLOWED,
                http=405,
                headers={"Allow": allowed},
            )
        if not isinstance(match.target, Rpc):
            return await match.target(request)
        try:
            return await self._call(match.target, match.params, request)
        except _BodyTooLargeError as err:
            return errors.error_response(err.code, err.message, reason=err.reason, http=413)
        except McpdError as err:
            return errors.mcpd_error_response(err)

    async def _call(self, rpc: Rpc, params: dict[str, str], request: Request) -> Response:
        self._refuse_declared_oversize(request)
        metadata = forwarded_metadata(request)
        try:
            channel = self._channel_for(rpc.service.full_name)
        except LookupError:
            return errors.error_response(
                grpc.StatusCode.UNAVAILABLE,
                f"no upstream is configured for {rpc.service.full_name}",
                reason=errors.UPSTREAM_NOT_CONFIGURED,
            )
        try:
            if rpc.body and not rpc.access.open:
                # The credential first: reading and converting a body is the costly part.
                await self._access.require(channel, rpc.grpc_path, metadata)
            body = await self._read_body(request)
            message = bind_request(rpc, params, request.query_params.multi_items(), body)
            call = channel.unary_unary(
                rpc.grpc_path,
                request_serializer=_serialize,
                response_deserializer=rpc.output_class.FromString,
            )
            response = await call(message, timeout=self._timeout(request), metadata=metadata)
        except grpc.aio.AioRpcError as exc:
            return errors.failure_response(rpc_failure_from(exc))
        except grpc.aio.UsageError as exc:
            # A closed channel: the process is shutting down or the peer went away.
            return errors.error_response(grpc.StatusCode.UNAVAILABLE, str(exc))
        return _response(response)

    def _refuse_declared_oversize(self, request: Request) -> None:
        # Free to check, so before anything else (the access check included).
        declared = request.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > self._max_body_bytes:
            raise _BodyTooLargeError(f"the request body exceeds {self._max_body_bytes} bytes")

    async def _read_body(self, request: Request) -> bytes:
        # Read incrementally so an oversized body is refused without buffering all of it.
        chunks: list[bytes] = []
        size = 0
        async for chunk in request.stream():
            size += len(chunk)
            if size > self._max_body_bytes:
                raise _BodyTooLargeError(f"the request body exceeds {self._max_body_bytes} bytes")
            chunks.append(chunk)
        return b"".join(chunks)

    def _timeout(self, request: Request) -> float:
        raw = request.headers.get(TIMEOUT_HEADER)
        if raw is None:
            return self._default_deadline_s
        try:
            seconds = float(raw)
        except ValueError:
            seconds = math.nan
        if not math.isfinite(seconds) or seconds <= 0:
            raise InvalidArgument(
                f"{TIMEOUT_HEADER}: expected a positive number of seconds, got {quoted(raw)}",
                reason=errors.INVALID_HEADER,
            )
        return min(seconds, self._max_deadline_s)


def _response(message: Message) -> Response:
    # grpc-gateway's convention: an HttpBody is already the HTTP body (JSON the upstream rendered
    # itself, for one), so its bytes pass through instead of being encoded as a message.
    if isinstance(message, httpbody_pb2.HttpBody):
        media_type = message.content_type or "application/octet-stream"
        return Response(content=message.data, media_type=media_type)
    return JSONResponse(codec.encode(message))


class _BodyTooLargeError(McpdError):
    code = grpc.StatusCode.RESOURCE_EXHAUSTED
    default_reason = "BODY_TOO_LARGE"


def forwarded_metadata(request: Request) -> tuple[tuple[str, str], ...]:
    forwarded: list[tuple[str, str]] = []
    for name in FORWARDED_HEADERS:
        value = request.headers.get(name)
        if value is None:
            continue
        # gRPC metadata values are printable ASCII; grpc would refuse anything else mid-call.
        if not value.isascii() or not value.isprintable():
            raise InvalidArgument(
                f"{name}: header value must be printable ASCII", reason=errors.INVALID_HEADER
            )
        forwarded.append((name, value))
    # The caller's address, for per-address login throttling. The gateway is the edge, so it
    # states the address it sees and never relays an X-Forwarded-For the caller sent.
    if request.client is not None:
        forwarded.append((CLIENT_ADDRESS_METADATA, request.client.host))
    return tuple(forwarded)
