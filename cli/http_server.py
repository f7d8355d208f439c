"""Runs the gateway's ASGI app with uvicorn inside the daemon's own event loop."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Generator
from types import TracebackType

import uvicorn
from starlette.types import ASGIApp

from cli.listeners import reuse_port_socket


class _EmbeddedUvicorn(uvicorn.Server):
    # The daemon owns SIGTERM/SIGINT and stops every component in order; uvicorn must not
    # install handlers of its own (it would re-raise the signal after its own shutdown).
    @contextlib.contextmanager
    def capture_signals(self) -> Generator[None, None, None]:
        yield


class HttpServer:
    """An async context manager serving `app` on host:port until the context exits; with
    `reuse_port`, on a socket shared with the other server processes of `mcpd serve`
    (`cli.listeners`).

    The app's lifespan runs (the MCP endpoint's session manager lives in it): its startup
    completes before the port is bound, and its shutdown runs after the last connection closed.
    """

    def __init__(self, app: ASGIApp, address: str, *, reuse_port: bool = False) -> None:
        host, _, port = address.rpartition(":")
        config = uvicorn.Config(
            app,
            host=host.strip("[]"),
            port=int(port),
            log_config=None,
            access_log=False,
            lifespan="on",
            # The gateway is the edge: the client address is the socket's, never a header's
            # (per-address login throttling must not be spoofable).
            proxy_headers=False,
            timeout_graceful_shutdown=5,
        )
        self._address = address
        self._reuse_port = reuse_port
        self._server = _EmbeddedUvicorn(config)
        self._task: asyncio.Task[None] | None = None

    @property
    def port(self) -> int:
        """The bound port (useful when the address asked for port 0)."""
        sockets = [s for server in self._server.servers for s in server.sockets]
        return int(sockets[0].getsockname()[1])

    async def __aenter__(self) -> HttpServer:
        # Start in the caller's task so a port already in use fails `mcpd serve` at once;
        # uvicorn reports a failed bind, and a failed app startup, by raising SystemExit.
        self._server.config.load()
        self._server.lifespan = self._server.config.lifespan_class(self._server.config)
        sockets = [reuse_port_socket(self._address)] if self._reuse_port else None
        try:
            await self._server.startup(sockets=sockets)
        except SystemExit as exc:
            if self._server.lifespan.should_exit:
                raise OSError(f"the HTTP app on {self._address} failed to start") from exc
            raise OSError(f"cannot listen on {self._address}") from exc
        self._task = asyncio.create_task(self._server.main_loop())
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._server.should_exit = True
        if self._task is not None:
            await self._task
            self._task = None
            await self._server.shutdown()
