"""A role server: the gRPC roles of one process, and with them, in a server process of
`mcpd serve`, the gateway.

One flat stack of components, built in order on an `AsyncExitStack` and torn down in reverse:

1. storage: the stores the roles serve (migrated here unless the supervisor's server 0 did);
2. security: the auth interceptor for every address this process and its siblings bind;
3. the ingest role (pipeline, group-commit writer, tail sampler, trace sessions) and the
   orchestrator role with its timer tick and the sender of its runs' spans to ingest (in the
   primary on SQLite, in every process on PostgreSQL);
4. the gRPC server (every service of the roles) and, with ingest, the OTLP/gRPC server;
5. once-per-daemon work, in the primary only: transcript tailing, the retention sweep, the
   evaluation role's monitors and experiments, the intelligence role's derived notes and
   clustering pass;
6. the gateway (`cli.gateway_server`), when this process serves it, calling this process's
   own services on a private loopback port.

Order matters: storage opens first because everything needs it; the gRPC servers start
before the gateway so the gateway never accepts a request its upstream cannot serve; on
shutdown the gateway stops taking requests first, then gRPC drains (reporting NOT_SERVING to
probes), then the ingest writer commits what is queued, then storage closes.

`mcpd serve --service ROLE` runs one role this way (what the Kubernetes manifests run); the
server processes of `mcpd serve` (`cli.supervisor`) run every role, each on the shared ports
(SO_REUSEPORT), so a request is parsed and served whole by whichever process the kernel gives
it to: native REST, native gRPC, OTLP/HTTP and OTLP/gRPC all reach the same ingest pipeline.
"""

from __future__ import annotations

import asyncio
import gc
import logging
from collections.abc import Awaitable, Callable, Collection, Coroutine, Sequence
from contextlib import AsyncExitStack
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import services.evaluation
import services.intelligence
from cli import roles as role_table
from cli.gateway_server import StartGate, channels_for, start_gateway
from cli.ingest import IngestRole, start_ingest
from cli.process_messages import ServerPlan
from cli.security import PRIVATE_ADDRESS, build_security, listening_addresses, service_credential
from cli.security import describe as describe_security
from mcpd.auth.service_identity import ServiceCredential
from mcpd.runtime.clock import SystemClock
from mcpd.runtime.config import Settings
from mcpd.runtime.server import GrpcServer
from mcpd.storage import STORE_NAMES, Stores, open_stores
from services.orchestrator import Orchestrator, Siblings

log = logging.getLogger("mcpd.serve")


@dataclass(frozen=True, slots=True)
class Served:
    """What a started role server listens on, and its lines for the start-up banner."""

    grpc: str
    http: str | None
    banner: tuple[str, ...]
    # Opens the gateway to every request (a server process of `mcpd serve` holds them until
    # its supervisor says so); None when the gateway serves at once or is not here.
    gate: StartGate | None = None


async def serve_roles(
    stack: AsyncExitStack,
    settings: Settings,
    roles: Sequence[str],
    *,
    plan: ServerPlan | None = None,
    migrate: bool = True,
    migrated: Callable[[], Awaitable[None]] | None = None,
) -> Served:
    """Start `roles` on `stack` (see the module docstring); what they listen on.

    `plan` makes this a server process of `mcpd serve`: the shared ports, bound with
    SO_REUSEPORT, and once-per-daemon work only in its primary. `migrate` False opens storage
    as it is (another process migrated it); `migrated`, when given, is awaited right after
    storage is open (the primary tells its supervisor).
    """
    grpc_roles = [role for role in roles if role in role_table.GRPC_ROLES]
    primary = plan is None or plan.primary
    reuse_port = plan is not None
    grpc_addr = plan.grpc_addr if plan else settings.grpc_addr
    otlp_addr = plan.otlp_grpc_addr if plan else settings.otlp_grpc_addr
    http_addr = plan.http_addr if plan else settings.http_addr

    stores = await open_configured_stores(
        settings, migrate=migrate, stores=role_table.stores_of(roles)
    )
    stack.callback(stores.close)
    if migrated is not None:
        await migrated()
    clock = SystemClock()
    listening = listening_addresses(settings, roles)
    credential = await asyncio.to_thread(service_credential, settings)
    security = await build_security(
        settings.security, stores.control, clock, listening, service=credential
    )
    # Before the servers, so it closes after they stop and before storage does.
    stack.push_async_callback(security.close)
    banner: list[str] = []
    ingest = None
    if "ingest" in roles:
        ingest = await start_ingest(stack, settings, stores, clock, sweep_tail=primary)
    # A server process reaches the roles it serves itself on the shared port (any server serves
    # them); a single role reaches its peers where the configuration says.
    peers = channels_for(stack, settings, dict.fromkeys(grpc_roles, grpc_addr) if plan else {})
    orchestrator = None
    if "orchestrator" in roles:
        # Timers fire and spans leave in every process on PostgreSQL (SKIP LOCKED shares the
        # timers), in one on SQLite.
        owner = primary or stores.run.backend == "postgres"
        orchestrator = _tick_timers(stack, settings, stores, clock, tick=owner, plan=plan)
        if owner:
            outbox = orchestrator.span_outbox(
                peers(role_table.INGEST_SERVICE), credential.metadata("orchestrator")
            )
            _in_background(stack, outbox.run, name="run-spans")
    watches = evaluation = None
    if "evaluation" in roles:
        watches, evaluation = _evaluate(stack, settings, stores, clock, peers, credential, primary)
    intelligence = None
    if "intelligence" in roles:
        intelligence = await _analyse(stack, settings, stores, clock, peers, credential, primary)
    registrations = role_table.registrations(
        grpc_roles,
        stores,
        settings,
        clock=clock,
        peers=peers,
        service=credential,
        ingest=ingest,
        orchestrator=orchestrator,
        watches=watches,
        evaluation=evaluation,
        intelligence=intelligence,
    )
    server = await stack.enter_async_context(
        GrpcServer(
            grpc_addr,
            registrations,
            settings.grpc,
            interceptors=[security.interceptor],
            reuse_port=reuse_port,
            also_on=[PRIVATE_ADDRESS] if "gateway" in roles else [],
        )
    )
    grpc_address = local_address(grpc_addr, server.port)
    if ingest is not None:
        otlp = await stack.enter_async_context(
            GrpcServer(
                otlp_addr,
                ingest.otlp_registrations(),
                settings.grpc,
                interceptors=[security.interceptor],
                reuse_port=reuse_port,
            )
        )
        banner.append(f"  OTLP/gRPC  {local_address(otlp_addr, otlp.port)}")
    banner.append(describe_security(security, settings.security.local_project))
    if ingest is not None and primary:
        # After the gRPC servers, so on shutdown tailing stops before they drain.
        banner.append(await _tail_transcripts(stack, settings, stores, clock, ingest))
    if "query" in roles and primary:
        _sweep_retention(stack, settings, stores, clock)
    http = gate = None
    if "gateway" in roles:
        own = local_address(PRIVATE_ADDRESS, server.also_ports[0])
        channel_for = channels_for(stack, settings, dict.fromkeys(grpc_roles, own))
        gate = StartGate() if plan is not None else None
        http = await start_gateway(
            stack, settings, channel_for, http_addr, reuse_port=reuse_port, gate=gate
        )
    return Served(grpc=grpc_address, http=http, banner=tuple(banner), gate=gate)


async def run_until_stopped(stop: asyncio.Event) -> None:
    """Serve until `stop` is set; what was built so far lives until then."""
    # Keep the collector from walking everything built at start on every collection.
    gc.freeze()
    await stop.wait()


async def _tail_transcripts(
    stack: AsyncExitStack,
    settings: Settings,
    stores: Stores,
    clock: SystemClock,
    ingest: IngestRole,
) -> str:
    from cli.transcripts import start_transcript_tailing

    # The home directory (where agents write transcripts) is read here, at the edge.
    return await start_transcript_tailing(
        stack, settings, stores, clock, ingest.policies, home=Path.home()
    )


def _tick_timers(
    stack: AsyncExitStack,
    settings: Settings,
    stores: Stores,
    clock: SystemClock,
    *,
    tick: bool,
    plan: ServerPlan | None,
) -> Orchestrator:
    """The orchestrator role, firing run timers in the background until shutdown when `tick`;
    in a server process of `mcpd serve`, its claims woken by work in the sibling processes."""
    siblings = (
        None if plan is None else Siblings(str(settings.data_dir.resolve()), plan.index, plan.count)
    )
    orchestrator = Orchestrator(
        stores.run,
        stores.control,
        clock=clock,
        lease_ttl_ms=settings.orchestrator.lease_ttl_ms,
        siblings=siblings,
    )
    loop = asyncio.get_running_loop()
    orchestrator.wakeups.listen(loop)
    stack.callback(orchestrator.wakeups.close, loop)
    if tick:
        _in_background(stack, orchestrator.tick, name="run-timers")
    return orchestrator


def _evaluate(
    stack: AsyncExitStack,
    settings: Settings,
    stores: Stores,
    clock: SystemClock,
    peers: role_table.ChannelFor,
    credential: ServiceCredential,
    primary: bool,
) -> tuple[role_table.Watches, services.evaluation.Evaluation]:
    """The evaluation role's monitors and objectives and its other parts. The primary alone
    works in the background until shutdown (one reading and one announcement per transition
    per daemon): it reads the watches every `evaluation.monitor_interval_s` and announces them
    to their webhooks, and advances the experiments mcpd drives every
    `evaluation.experiment_interval_s`; every process answers the role's RPCs."""
    parts = role_table.evaluation_parts(settings, stores, clock, peers, credential)
    if not primary:
        watches = role_table.evaluation_watches(settings, stores, clock, peers, credential, None)
        return watches, parts
    webhooks = services.evaluation.Webhooks()
    watches = role_table.evaluation_watches(settings, stores, clock, peers, credential, webhooks)
    interval = settings.evaluation.monitor_interval_s
    _in_background(stack, webhooks.run, name="webhooks")
    _in_background(stack, partial(watches.monitors.run, interval_s=interval), name="monitors")
    _in_background(stack, partial(watches.objectives.run, interval_s=interval), name="slos")
    every = settings.evaluation.experiment_interval_s
    _in_background(stack, partial(parts.driver.run, interval_s=every), name="experiments")
    return watches, parts


async def _analyse(
    stack: AsyncExitStack,
    settings: Settings,
    stores: Stores,
    clock: SystemClock,
    peers: role_table.ChannelFor,
    credential: ServiceCredential,
    primary: bool,
) -> services.intelligence.Intelligence:
    """The intelligence role's parts. The primary alone writes the derived outcome notes and
    runs the clustering pass, at every multiple of `intelligence.pass_interval_s`, when
    `intelligence.pass_armed` (another replica of the role running it too writes the same
    snapshots; the store keeps one)."""
    parts = await asyncio.to_thread(
        role_table.intelligence_parts, settings, stores, clock, peers, credential
    )
    if primary and settings.intelligence.pass_armed:
        _in_background(stack, parts.run, name="theme-pass")
    return parts


def _sweep_retention(
    stack: AsyncExitStack, settings: Settings, stores: Stores, clock: SystemClock
) -> None:
    """The query role deletes what aged past each project's retention window, in the
    background until shutdown (`services.query.retention`)."""
    from services.query import RetentionSweeper

    sweeper = RetentionSweeper(stores.trace, stores.control, settings.retention, clock)
    _in_background(stack, sweeper.run, name="retention-sweeper")


def _in_background(
    stack: AsyncExitStack, work: Callable[[asyncio.Event], Coroutine[Any, Any, None]], *, name: str
) -> None:
    """Run `work` as a task until shutdown, which sets its stop event and waits for it."""
    done = asyncio.Event()
    task = asyncio.create_task(work(done), name=name)

    async def finish() -> None:
        done.set()
        await task

    stack.push_async_callback(finish)


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


def local_address(configured: str, port: int) -> str:
    """`configured` (`host:port`) with the port actually bound."""
    host = configured.rpartition(":")[0]
    return f"{host}:{port}"
