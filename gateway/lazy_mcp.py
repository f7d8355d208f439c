"""`/mcp`, built in the background once the app has started.

The MCP SDK (with pydantic and its schemas) is most of what the gateway imports, and nothing but
`/mcp` needs it: the endpoint is imported and built in a worker thread after the app starts, so
the gateway serves everything else at once, and a request to `/mcp` that arrives before the
endpoint is ready waits for it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING

from starlette.types import Receive, Scope, Send

from gateway.jsonrpc import transport_refusal

if TYPE_CHECKING:
    from gateway.mcp import McpHttpEndpoint

__all__ = ["LazyMcpEndpoint"]

log = logging.getLogger("mcpd.gateway.mcp")


class LazyMcpEndpoint:
    """An ASGI app serving what `build` returns once it has been built (see the module
    docstring); `run` belongs in the app's lifespan."""

    def __init__(self, build: Callable[[], McpHttpEndpoint]) -> None:
        self._build = build
        self._endpoint: McpHttpEndpoint | None = None
        self._running = False
        self._settled = asyncio.Event()
        self._stop = asyncio.Event()

    @contextlib.asynccontextmanager
    async def run(self) -> AsyncIterator[None]:
        """Build and serve the endpoint in the background while the context is open."""
        task = asyncio.create_task(self._serve(), name="mcp-endpoint")
        self._running = True
        try:
            yield
        finally:
            self._running = False
            self._stop.set()
            await task

    async def _serve(self) -> None:
        try:
            endpoint = await asyncio.to_thread(self._build)
            async with endpoint.run():
                self._endpoint = endpoint
                self._settled.set()
                await self._stop.wait()
        except Exception:
            log.exception("the MCP endpoint could not start; /mcp answers 503")
        finally:
            self._endpoint = None
            self._settled.set()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self._running:
            await self._settled.wait()
        if self._endpoint is None:
            why = "not running (app lifespan not started)" if not self._running else "unavailable"
            await transport_refusal(503, f"the MCP endpoint is {why}")(scope, receive, send)
            return
        await self._endpoint(scope, receive, send)
