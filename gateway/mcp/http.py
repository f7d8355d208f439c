"""MCP over Streamable HTTP at `/mcp`: stateless, JSON responses, credentials forwarded.

Stateless: every POST is served on its own (no `Mcp-Session-Id`), so any gateway replica can
answer any request and nothing needs session pinning. Responses are plain JSON (no SSE stream):
the tools answer once and send nothing in between. The SDK's session manager needs a running
task group; `run()` provides it and belongs in the app's lifespan.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import urlsplit

from mcp.server import Server
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import Message, Receive, Scope, Send

from gateway.jsonrpc import transport_refusal
from gateway.mcp.server import Caller
from gateway.paths import MCP_PATH
from gateway.rest import CLIENT_ADDRESS_METADATA, FORWARDED_HEADERS
from mcpd.auth.metadata import is_loopback_host
from mcpd.runtime.errors import InvalidArgument

PROJECT_HEADER = "x-mcpd-project"
"""Request header: the project selector, for keys that reach several projects."""

MAX_BODY_BYTES = 1024 * 1024
"""The largest MCP request body: a JSON-RPC message with a tool's arguments, which are small."""


def caller_from_request(request: Request | None) -> Caller:
    """The `authorization` and W3C trace headers as gRPC metadata, the client's address as
    `x-forwarded-for` (never relayed from the caller), and the `X-Mcpd-Project` selector."""
    if request is None:
        return Caller()
    metadata: list[tuple[str, str | bytes]] = []
    for name in FORWARDED_HEADERS:
        value = request.headers.get(name)
        if value is None:
            continue
        # gRPC metadata values are printable ASCII; grpc would refuse anything else mid-call.
        if not value.isascii() or not value.isprintable():
            raise InvalidArgument(f"{name}: header value must be printable ASCII", field=name)
        metadata.append((name, value))
    if request.client is not None:
        metadata.append((CLIENT_ADDRESS_METADATA, request.client.host))
    return Caller(tuple(metadata), request.headers.get(PROJECT_HEADER, "").strip())


class McpHttpEndpoint:
    """The ASGI app answering `/mcp`.

    Only POST is served: stateless, there is no session to DELETE, and a GET stream would
    stay open with nothing ever to deliver, so both answer 405 (which the spec allows).

    DNS-rebinding guard: a request that reached a loopback address and carries an `Origin`
    (browsers always send one on POST) is refused unless that origin is itself loopback, so a
    web page cannot drive a local, unauthenticated mcpd. Agent clients send no `Origin`.

    A body over `max_body_bytes` is refused with 413 before the SDK parses any of it (the SDK
    reads a body whole, whatever its size).
    """

    def __init__(self, server: Server[Any], *, max_body_bytes: int = MAX_BODY_BYTES) -> None:
        self._manager = StreamableHTTPSessionManager(app=server, stateless=True, json_response=True)
        self._running = False
        self._max_body_bytes = max_body_bytes

    @contextlib.asynccontextmanager
    async def run(self) -> AsyncIterator[None]:
        """Serve while the context is open (once per endpoint: the SDK's manager is one-shot)."""
        async with self._manager.run():
            self._running = True
            try:
                yield
            finally:
                self._running = False

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """ASGI entry point."""
        if scope["type"] != "http":
            raise RuntimeError(f"the MCP endpoint serves HTTP, not {scope['type']}")
        refusal = self._refusal(Request(scope))
        if refusal is not None:
            await refusal(scope, receive, send)
            return
        body = await _read_body(receive, self._max_body_bytes)
        if body is None:
            too_large = transport_refusal(
                413, f"the request body exceeds {self._max_body_bytes} bytes"
            )
            await too_large(scope, receive, send)
            return
        await self._manager.handle_request(scope, _replay(body, receive), send)

    def _refusal(self, request: Request) -> Response | None:
        if not self._running:
            return transport_refusal(
                503, "the MCP endpoint is not running (app lifespan not started)"
            )
        if request.method != "POST":
            return transport_refusal(
                405, f"{MCP_PATH} accepts POST only (stateless)", headers={"Allow": "POST"}
            )
        origin = request.headers.get("origin")
        server = request.scope.get("server")
        if origin and server and is_loopback_host(server[0]) and not _is_loopback_origin(origin):
            return transport_refusal(403, f"origin {origin} may not call a loopback mcpd")
        return None


async def _read_body(receive: Receive, limit: int) -> bytes | None:
    """The request body, or None as soon as it exceeds `limit` bytes (the rest is not read)."""
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return b"".join(chunks)  # the client left: the SDK sees an empty body and refuses
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            return None
        chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks)


def _replay(body: bytes, receive: Receive) -> Receive:
    """A `receive` that hands over `body` once, then waits on the real one (for a disconnect)."""
    pending = [{"type": "http.request", "body": body, "more_body": False}]

    async def replay() -> Message:
        if pending:
            return pending.pop()
        return await receive()

    return replay


def _is_loopback_origin(origin: str) -> bool:
    try:
        host = urlsplit(origin).hostname
    except ValueError:
        return False
    return host is not None and is_loopback_host(host)
