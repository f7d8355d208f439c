"""`mcpd serve`: the composition root that builds a process from its roles."""

from __future__ import annotations

import asyncio
import gc
import logging
import os
import signal
import sys
from collections.abc import Collection, Sequence
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import grpc
from starlette.types import ASGIApp

from cli import roles as role_table
from cli.children import ChildProcess, ParentLink
from cli.gateway_process import GatewayChild, StartGate, upstream
from cli.http_server import HttpServer
from cli.ingest import IngestRole, start_ingest
from cli.ingest_workers import IngestWorkers
from cli.otlp_relay import relay_registrations
from cli.security import build_security, listening_addresses, service_credential
from cli.security import describe as describe_security
from gateway.app import create_app
from mcpd.runtime.channels import open_channel, open_replicas_channel
from mcpd.runtime.clock import SystemClock
from mcpd.runtime.config import Settings
from mcpd.runtime.server import GrpcServer
from mcpd.storage import STORE_NAMES, Stores, open_stores
from mcpd.version import mcpd_version

log = logging.getLogger("mcpd.serve")


async def serve(
    settings: Settings,
    roles: Sequence[str],
    *,
    gateway: GatewayChild | None = None,
    workers: IngestWorkers | None = None,
    supervisor_fd: int | None = None,
) -> int:
    """Run `roles` until SIGTERM or SIGINT, then stop every component in reverse order; the exit
    status (non-zero when a child process died under us).

    Order matters: storage opens (and migrates) first because services need it; the gRPC server
    starts before the HTTP gateway so the gateway never accepts a request its upstream cannot
    serve; on shutdown the gateway stops taking requests first, then gRPC drains (reporting
    NOT_SERVING to probes), then storage closes.

    `gateway` is the gateway's child process (`cli.gateway_process`, spawned by the caller
    before it imported this module, so both start up at once): it is started once gRPC serves,
    instead of a gateway in this process. `workers` are the ingest workers
    (`cli.ingest_workers`, spawned by the caller too), started once gRPC serves; the gateway
    sends them the ingest requests it relays. `supervisor_fd` makes this process a gateway
    child.
    """
    stop = stop_on_signals()
    async with AsyncExitStack() as stack:
        child = gateway
        if child is not None:
            stack.push_async_callback(child.stop)
        if workers is not None:
            stack.push_async_callback(workers.stop)
        stores = await _open_stores(stack, settings, roles)
        grpc_roles = [r for r in roles if r in role_table.GRPC_ROLES]
        grpc_address = None
        banner: list[str] = []
        if grpc_roles:
            assert stores is not None, "every gRPC role opens storage"
            clock = SystemClock()
            listening = listening_addresses(
                settings, roles, ingest_workers=len(workers.pids) if workers else 0
            )
            credential = await asyncio.to_thread(service_credential, settings)
            security = await build_security(
                settings.security, stores.control, clock, listening, service=credential
            )
            # Before the servers, so it closes after they stop and before storage does.
            stack.push_async_callback(security.close)
            banner.append(describe_security(security, settings.security.local_project))
            ingest = None
            if "ingest" in roles:
                ingest = await start_ingest(stack, settings, stores, clock)
            # The roles served here are reached on this process's own port.
            peers = await _peer_channels(stack, settings, grpc_roles, settings.grpc_addr)
            registrations = role_table.registrations(
                grpc_roles,
                stores,
                settings,
                clock=clock,
                peers=peers,
                service=credential,
                ingest=ingest,
            )
            server = await stack.enter_async_context(
                GrpcServer(
                    settings.grpc_addr,
                    registrations,
                    settings.grpc,
                    interceptors=[security.interceptor],
                )
            )
            grpc_address = local_address(settings.grpc_addr, server.port)
            if workers is not None:
                assert ingest is not None, "ingest workers serve beside the ingest role"
                banner.append(await _start_workers(stack, workers, ingest, grpc_address, listening))
            if ingest is not None:
                # OTLP/gRPC on its standard port, behind the same authentication; relayed to
                # the workers when there are any (after they serve, so it never refuses).
                if workers is not None:
                    relay = open_replicas_channel(workers.addresses, settings.grpc)
                    stack.push_async_callback(relay.close)
                    otlp_services = relay_registrations(relay)
                else:
                    otlp_services = ingest.otlp_registrations()
                otlp = await stack.enter_async_context(
                    GrpcServer(
                        settings.otlp_grpc_addr,
                        otlp_services,
                        settings.grpc,
                        interceptors=[security.interceptor],
                    )
                )
                banner.append(f"  otlp/grpc  {local_address(settings.otlp_grpc_addr, otlp.port)}")
            if "ingest" in roles:
                # After the gRPC server, so on shutdown tailing stops before it drains.
                banner.append(await _tail_transcripts(stack, settings, stores, clock, ingest))
            if "query" in roles:
                _sweep_retention(stack, settings, stores, clock)
        http_address = None
        if child is not None:
            assert grpc_address is not None, "a gateway child is spawned beside gRPC roles only"
            try:
                http_address = await child.start(
                    grpc_address, grpc_roles, workers.addresses if workers else ()
                )
            except OSError:
                if not stop.is_set():
                    raise
                # Signalled while starting: the child, in our process group, may well have
                # been signalled too and stopped before serving. Stop cleanly.
                log.info("stopped while the gateway process started")
                return 0
            # Registered again (stop is idempotent; the first registration covers a failed
            # start), so that on shutdown the gateway stops before gRPC drains.
            stack.push_async_callback(child.stop)
            banner.append(f"  gateway    process {child.pid} (gRPC and storage: {os.getpid()})")
        elif "gateway" in roles:
            http_address = await _serve_gateway(
                stack,
                settings,
                roles,
                grpc_address,
                stop,
                supervisor_fd,
                workers.addresses if workers else (),
            )
            if http_address is None:
                return 0  # a supervised gateway told to stop before it served
        if supervisor_fd is None:
            _announce(roles, stores, grpc_address, http_address, banner)
        if child is not None:
            await child.open()
        # Everything built so far lives until shutdown: keep the collector from walking it on
        # every collection (measured: a 512-span OTLP/JSON request took 27 ms without, 11 with).
        gc.freeze()
        status = await _until_stopped(stop, child, workers)
        log.info("stopping", extra={"roles": list(roles)})
    log.info("stopped")
    return status


async def _serve_gateway(
    stack: AsyncExitStack,
    settings: Settings,
    roles: Sequence[str],
    grpc_address: str | None,
    stop: asyncio.Event,
    supervisor_fd: int | None,
    ingest_workers: Sequence[str],
) -> str | None:
    """Serve the gateway in this process; its HTTP address (None: stopped before serving)."""
    parent = upstream_of = None
    if supervisor_fd is not None:
        parent = await ParentLink.open(supervisor_fd)
        stack.callback(parent.close)
        upstream_of = await upstream(parent, stop)
        if upstream_of is None:
            return None
        roles, grpc_address = upstream_of.roles, upstream_of.grpc
        ingest_workers = upstream_of.ingest
    channel_for = await _peer_channels(stack, settings, roles, grpc_address, ingest_workers)
    # The MCP tool descriptions name the transcript sources this deployment reads.
    app: ASGIApp = create_app(
        channel_for,
        default_deadline_s=settings.gateway.default_deadline_s,
        mcp_tools=role_table.tool_catalog(role_table.session_sources(settings)),
    )
    gate = None
    if upstream_of is not None:
        app = gate = StartGate(app, upstream_of.probe)
    http = await stack.enter_async_context(HttpServer(app, settings.http_addr))
    http_address = local_address(settings.http_addr, http.port)
    if parent is not None:
        assert gate is not None
        await parent.send({"http": http_address})
        parent.watch(stop, gate.on_message)
    return http_address


async def _until_stopped(
    stop: asyncio.Event, gateway: GatewayChild | None, workers: IngestWorkers | None
) -> int:
    """Wait for SIGTERM/SIGINT, or for a child process to exit; the exit status.

    A child that exits 0 was signalled (a terminal's Ctrl-C or a service manager's SIGTERM
    reach the whole process group, often before ours arrives): stop cleanly. Any other exit is a
    crash: stop with status 1, so whatever supervises mcpd restarts all of it.
    """
    exits: list[asyncio.Future[tuple[ChildProcess, int]]] = []
    if gateway is not None:
        exits.append(asyncio.ensure_future(_exit_of(gateway.process)))
    if workers is not None:
        exits.append(asyncio.ensure_future(workers.wait()))
    stopping = asyncio.ensure_future(stop.wait())
    waited: list[asyncio.Future[Any]] = [stopping, *exits]
    try:
        await asyncio.wait(waited, return_when=asyncio.FIRST_COMPLETED)
    finally:
        stopping.cancel()
        for exiting in exits:
            exiting.cancel()
    ended = [exiting for exiting in exits if exiting.done() and not exiting.cancelled()]
    if stop.is_set() or not ended:
        return 0
    process, status = ended[0].result()
    if status == 0:
        log.info(f"the {process.role} process stopped: stopping", extra={"pid": process.pid})
        return 0
    log.error(
        f"the {process.role} process died{process.describe_exit()}: stopping with exit status 1, "
        "for a supervisor to restart mcpd",
        extra={"pid": process.pid, "returncode": status},
    )
    return 1


async def _exit_of(process: ChildProcess) -> tuple[ChildProcess, int]:
    return process, await process.wait()


async def _start_workers(
    stack: AsyncExitStack,
    workers: IngestWorkers,
    ingest: IngestRole,
    grpc_address: str,
    listening: Sequence[str],
) -> str:
    """Start the ingest workers (their sessions rebuilt, their held traces decided and their
    lag reported here); the banner line."""
    assert ingest.sessions is not None, "the parent rebuilds the workers' sessions"
    await workers.start(grpc_address, listening, ingest.sessions.notice_sessions)
    ingest.remote_lags.append(workers.lag)
    ingest.tail.add_listener(workers.tell_decisions)
    # Registered again (stop is idempotent): on shutdown they stop after the gateway, which
    # relays to them, and before this process's own ingest role and gRPC server.
    stack.push_async_callback(workers.stop)
    pids = ", ".join(str(pid) for pid in workers.pids)
    return f"  ingest     {len(workers.pids)} worker processes ({pids}) behind the gateway"


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


def _sweep_retention(
    stack: AsyncExitStack, settings: Settings, stores: Stores, clock: SystemClock
) -> None:
    """The query role deletes what aged past each project's retention window, in the
    background until shutdown (`services.query.retention`)."""
    from services.query import RetentionSweeper

    sweeper = RetentionSweeper(stores.trace, stores.control, settings.retention, clock)
    done = asyncio.Event()
    task = asyncio.create_task(sweeper.run(done), name="retention-sweeper")

    async def finish() -> None:
        done.set()
        await task

    stack.push_async_callback(finish)


def stop_on_signals() -> asyncio.Event:
    """An event set by SIGTERM or SIGINT."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    return stop


async def _open_stores(
    stack: AsyncExitStack, settings: Settings, roles: Sequence[str]
) -> Stores | None:
    needed = role_table.stores_of(roles)
    if not needed:
        return None
    stores = await open_configured_stores(settings, stores=needed)
    stack.callback(stores.close)
    return stores


async def open_configured_stores(
    settings: Settings, *, migrate: bool = True, stores: Collection[str] = STORE_NAMES
) -> Stores:
    """The `stores` (all by default) `settings.storage` places, opened (and migrated, unless
    told otherwise) off the event loop: opening blocks on I/O."""
    storage = settings.storage
    return await asyncio.to_thread(
        open_stores,
        storage.backend,
        data_dir=settings.data_dir,
        postgres_url=storage.postgres_url,
        clickhouse_url=storage.clickhouse_url,
        migrate=migrate,
        stores=stores,
    )


async def _peer_channels(
    stack: AsyncExitStack,
    settings: Settings,
    roles: Sequence[str],
    own_grpc: str | None,
    ingest_workers: Sequence[str] = (),
) -> role_table.ChannelFor:
    """One channel per peer address. Roles this process serves are reached on its own port;
    with ingest workers, the ingest services are reached on one channel to them all."""

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
    if ingest_workers:
        workers = open_replicas_channel(ingest_workers, settings.grpc)
        stack.push_async_callback(workers.close)
        for service, role in role_table.SERVICE_ROLES.items():
            if role == "ingest":
                by_service[service] = workers
    return by_service.__getitem__


def local_address(configured: str, port: int) -> str:
    """`configured` (`host:port`) with the port actually bound."""
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
        lines.append(f"  storage    {stores.describe()}")
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
