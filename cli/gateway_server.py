"""The gateway: REST, OTLP/HTTP and MCP over HTTP, calling the gRPC services.

Its stack is small: one gRPC channel per peer address, the ASGI app (`gateway.app`), and the
HTTP server. A server process of `mcpd serve` starts it after its own gRPC services, reaching
them on its private loopback port (`cli.role_server`); `mcpd serve --service gateway` runs it
alone, reaching each role at `MCPD_<ROLE>_ADDR`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from contextlib import AsyncExitStack
from typing import TYPE_CHECKING

import grpc

from cli import roles as role_table
from cli.http_server import HttpServer
from mcpd.runtime.channels import open_channel
from mcpd.runtime.config import Settings

if TYPE_CHECKING:
    from starlette.types import ASGIApp, Receive, Scope, Send

    from gateway.mcp import ToolCatalog

__all__ = ["StartGate", "channels_for", "start_gateway"]


def channels_for(
    stack: AsyncExitStack, settings: Settings, own: Mapping[str, str]
) -> role_table.ChannelFor:
    """The channel to each proto service's role: at `own[role]` for roles given there, at the
    configured peer address (`MCPD_<ROLE>_ADDR`) for the rest; one channel per address, closed
    by `stack`."""

    def address_of(role: str) -> str:
        return own.get(role) or role_table.peer_address(settings, role)

    channels: dict[str, grpc.aio.Channel] = {}
    for address in {address_of(role) for role in role_table.GRPC_ROLES}:
        channels[address] = open_channel(address, settings.grpc)
        stack.push_async_callback(channels[address].close)
    by_service = {
        service: channels[address_of(role)] for service, role in role_table.SERVICE_ROLES.items()
    }
    return by_service.__getitem__


async def start_gateway(
    stack: AsyncExitStack,
    settings: Settings,
    channel_for: role_table.ChannelFor,
    address: str,
    *,
    reuse_port: bool = False,
    gate: StartGate | None = None,
) -> str:
    """Serve the gateway at `address` until `stack` closes; the address it listens on. With
    `gate`, requests wait until it opens."""
    from gateway.app import create_app

    def mcp_tools() -> ToolCatalog:
        # The MCP tool descriptions name the transcript sources this deployment reads.
        return role_table.tool_catalog(role_table.session_sources(settings))

    app: ASGIApp = create_app(
        channel_for, default_deadline_s=settings.gateway.default_deadline_s, mcp_tools=mcp_tools
    )
    if gate is not None:
        app = gate.wrap(app)
    http = await stack.enter_async_context(HttpServer(app, address, reuse_port=reuse_port))
    return f"{address.rpartition(':')[0]}:{http.port}"


class StartGate:
    """Holds HTTP requests until `open` (see `cli.process_messages`: `Open`)."""

    def __init__(self) -> None:
        self._open = asyncio.Event()

    def open(self) -> None:
        self._open.set()

    def wrap(self, app: ASGIApp) -> ASGIApp:
        """`app` behind the gate (the app's lifespan passes: it runs before anything serves)."""

        async def gated(scope: Scope, receive: Receive, send: Send) -> None:
            if scope["type"] != "lifespan" and not self._open.is_set():
                await self._open.wait()
            await app(scope, receive, send)

        return gated
