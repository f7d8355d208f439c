"""`mcpd serve`: the composition root that builds a process from its roles."""

from __future__ import annotations

import asyncio
import gc
import logging
import signal
import sys
from collections.abc import Sequence
from contextlib import AsyncExitStack
from pathlib import Path

import grpc

from cli import roles as role_table
from cli.http_server import HttpServer
from cli.ingest import IngestRole, start_ingest
from cli.security import build_security
from cli.security import describe as describe_security
from gateway.app import create_app
from gateway.mcp.catalog import ToolCatalog
from mcpd.runtime.channels import open_channel
from mcpd.runtime.clock import SystemClock
from mcpd.runtime.config import Settings
from mcpd.runtime.server import GrpcServer
from mcpd.storage import Stores, open_stores
from mcpd.version import mcpd_version

log = logging.getLogger("mcpd.serve")


async def serve(settings: Settings, roles: Sequence[str]) -> None:
    """Run `roles` until SIGTERM or SIGINT, then stop every component in reverse order.

    Order matters: storage opens (and migrates) first because services need it; the gRPC server
    starts before the HTTP gateway so the gateway never accepts a request its upstream cannot
    serve; on shutdown the gateway stops taking requests first, then gRPC drains (reporting
    NOT_SERVING to probes), then storage closes.
    """
    stop = _stop_on_signals()
    async with AsyncExitStack() as stack:
        stores = await _open_stores(stack, settings, roles)
        grpc_roles = [r for r in roles if r in role_table.GRPC_ROLES]
        grpc_address = None
        banner: list[str] = []
        if grpc_roles:
            assert stores is not None, "every gRPC role opens storage"
            clock = SystemClock()
            listening = [settings.grpc_addr]
            if "gateway" in roles:
                listening.append(settings.http_addr)
            security = await build_security(settings.security, stores.control, clock, listening)
            banner.append(describe_security(security, settings.security.local_project))
            ingest = None
            if "ingest" in roles:
                ingest = await start_ingest(stack, settings, stores, clock)
            registrations = role_table.registrations(
                grpc_roles, stores, settings, clock=clock, ingest=ingest
            )
            server = await stack.enter_async_context(
                GrpcServer(
                    settings.grpc_addr,
                    registrations,
                    settings.grpc,
                    interceptors=[security.interceptor],
                )
            )
            grpc_address = _local_address(settings.grpc_addr, server.port)
            if ingest is not None:
                # OTLP/gRPC on its standard port, behind the same authentication.
                otlp = await stack.enter_async_context(
                    GrpcServer(
                        settings.otlp_grpc_addr,
                        ingest.otlp_registrations(),
                        settings.grpc,
                        interceptors=[security.interceptor],
                    )
                )
                banner.append(f"  otlp/grpc  {_local_address(settings.otlp_grpc_addr, otlp.port)}")
            if "ingest" in roles:
                # After the gRPC server, so on shutdown tailing stops before it drains.
                banner.append(await _tail_transcripts(stack, settings, stores, clock, ingest))
        http_address = None
        if "gateway" in roles:
            channel_for = await _peer_channels(stack, settings, roles, grpc_address)
            # The MCP tool descriptions name the transcript sources this deployment reads.
            app = create_app(
                channel_for,
                default_deadline_s=settings.gateway.default_deadline_s,
                mcp_tools=ToolCatalog.for_sources(role_table.session_sources(settings)),
            )
            http = await stack.enter_async_context(HttpServer(app, settings.http_addr))
            http_address = _local_address(settings.http_addr, http.port)
        _announce(roles, stores, grpc_address, http_address, banner)
        # Everything built so far lives until shutdown: keep the collector from walking it on
        # every collection (measured: a 512-span OTLP/JSON request took 27 ms without, 11 with).
        gc.freeze()
        await stop.wait()
        log.info("stopping", extra={"roles": list(roles)})
    log.info("stopped")


async def _tail_transcripts(
    stack: AsyncExitStack,
    settings: Settings,
    stores: Stores,
    clock: SystemClock,
    ingest: IngestRole | None,
) -> str:
    from cli.transcripts import start_transcript_tailing

    assert ingest is not None, "transcripts are tailed by the ingest role"
    # The home directory (where agents write transcripts) is read here, at the edge.
    return await start_transcript_tailing(
        stack, settings, stores, clock, ingest.policies, home=Path.home()
    )


def _stop_on_signals() -> asyncio.Event:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    return stop


async def _open_stores(
    stack: AsyncExitStack, settings: Settings, roles: Sequence[str]
) -> Stores | None:
    if not role_table.STORAGE_ROLES.intersection(roles):
        return None
    storage = settings.storage
    # Opening migrates, which blocks on I/O: keep it off the event loop.
    stores = await asyncio.to_thread(
        open_stores,
        storage.backend,
        data_dir=settings.data_dir,
        postgres_url=storage.postgres_url,
        clickhouse_url=storage.clickhouse_url,
    )
    stack.callback(stores.close)
    return stores


async def _peer_channels(
    stack: AsyncExitStack, settings: Settings, roles: Sequence[str], own_grpc: str | None
) -> role_table.ChannelFor:
    """One channel per peer address. Roles this process serves are reached on its own port."""

    def address_of(role: str) -> str:
        if own_grpc is not None and role in roles:
            return own_grpc
        return role_table.peer_address(settings, role)

    channels: dict[str, grpc.aio.Channel] = {}
    for address in {address_of(role) for role in role_table.GRPC_ROLES}:
        channels[address] = open_channel(address, settings.grpc)
        stack.push_async_callback(channels[address].close)
    by_service = {
        service: channels[address_of(role)] for service, role in role_table.SERVICE_ROLES.items()
    }
    return by_service.__getitem__


def _local_address(configured: str, port: int) -> str:
    host = configured.rpartition(":")[0]
    return f"{host}:{port}"


def _announce(
    roles: Sequence[str],
    stores: Stores | None,
    grpc_address: str | None,
    http: str | None,
    extra: Sequence[str],
) -> None:
    lines = [f"mcpd {mcpd_version()} serving {', '.join(roles)}"]
    if stores is not None:
        lines.append(f"  storage    {stores.trace.backend}")
    if http is not None:
        lines += [
            f"  REST       http://{http}/v1/api",
            f"  MCP        http://{http}/mcp",
            f"  OpenAPI    http://{http}/v1/api/openapi.json",
            f"  health     http://{http}/healthz",
        ]
    if grpc_address is not None:
        lines.append(f"  gRPC       {grpc_address} (reflection on)")
    lines += extra
    print("\n".join(lines), file=sys.stderr, flush=True)
