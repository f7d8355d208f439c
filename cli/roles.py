"""Which role serves which gRPC service, and what each role needs to run."""

from __future__ import annotations

import secrets
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING

import grpc

import services.account
import services.evaluation
import services.intelligence
import services.orchestrator
import services.query
from cli.ingest import IngestRole, redaction_key
from cli.role_names import GRPC_ROLES, ROLES
from cli.security import is_loopback
from gateway.otlp import SERVICES as OTLP_SERVICES
from mcpd.aspects import open_catalogues
from mcpd.auth.service_identity import ServiceCredential
from mcpd.auth.throttle import LoginThrottle
from mcpd.redaction import Redactor
from mcpd.runtime.clock import Clock
from mcpd.runtime.config import Settings
from mcpd.runtime.data_dir import write_private_once
from mcpd.runtime.errors import FailedPrecondition
from mcpd.runtime.server import ServiceRegistration
from mcpd.storage import Stores
from services.ingest.transcripts import harnesses, resolve_sources
from services.query.sessions import SessionTools

if TYPE_CHECKING:
    # The MCP SDK is imported when the catalogue is made (`gateway.lazy_mcp`), not at start.
    from gateway.mcp import ToolCatalog

# Finds the channel to the process serving a proto service, by the service's full name.
ChannelFor = Callable[[str], grpc.aio.Channel]

__all__ = ["GRPC_ROLES", "ROLES", "ROLE_STORES", "SERVICE_ROLES", "ChannelFor", "stores_of"]


# The account service has no role of its own: it lives with the query role, which owns the other
# reads of the control store (audit, projects).
SERVICE_ROLES = {
    "mcpd.ingest.v1.IngestService": "ingest",
    "mcpd.query.v1.QueryService": "query",
    "mcpd.account.v1.AccountService": "query",
    "mcpd.orchestrator.v1.OrchestratorService": "orchestrator",
    "mcpd.evaluation.v1.EvaluationService": "evaluation",
    "mcpd.intelligence.v1.IntelligenceService": "intelligence",
    # OTLP/HTTP is relayed by the gateway to the ingest role's OTLP collector services.
    **dict.fromkeys(OTLP_SERVICES, "ingest"),
}

# The stores each gRPC role opens, and no other: every role authenticates callers against the
# control store; the orchestrator alone owns the run store (the query role's erasure asks it).
ROLE_STORES: Mapping[str, frozenset[str]] = {
    "ingest": frozenset({"trace", "control"}),
    "query": frozenset({"trace", "control"}),
    "orchestrator": frozenset({"run", "control"}),
    "evaluation": frozenset({"trace", "control"}),
    "intelligence": frozenset({"trace", "control"}),
}


def stores_of(roles: Iterable[str]) -> frozenset[str]:
    """The stores a process serving `roles` opens (none for the gateway alone)."""
    return frozenset().union(*(ROLE_STORES.get(role, frozenset()) for role in roles))


def peer_address(settings: Settings, role: str) -> str:
    """Where a peer role is found (MCPD_<ROLE>_ADDR)."""
    address: str = getattr(settings, f"{role}_addr")
    return address


ORCHESTRATOR_SERVICE = "mcpd.orchestrator.v1.OrchestratorService"
QUERY_SERVICE = "mcpd.query.v1.QueryService"
INGEST_SERVICE = "mcpd.ingest.v1.IngestService"


def registrations(
    roles: Sequence[str],
    stores: Stores,
    settings: Settings,
    *,
    clock: Clock,
    peers: ChannelFor,
    service: ServiceCredential,
    ingest: IngestRole | None = None,
    orchestrator: services.orchestrator.Orchestrator | None = None,
    watches: Watches | None = None,
    evaluation: services.evaluation.Evaluation | None = None,
    intelligence: services.intelligence.Intelligence | None = None,
) -> list[ServiceRegistration]:
    """The gRPC services of `roles`, wired to their dependencies; `peers` finds the process
    serving another service, which a role calls presenting `service`, the service credential;
    `ingest` and `orchestrator` are those roles, built before their services, when this process
    serves them (one is made here otherwise), and `watches` and `evaluation` the evaluation role's
    monitors and objectives and its other parts, built before its services when this process
    runs them in the background, and `intelligence` the intelligence role's parts likewise."""
    found: list[ServiceRegistration] = []
    security = settings.security
    for role in roles:
        match role:
            case "ingest":
                assert ingest is not None, "the ingest role is started before its services"
                found += ingest.registrations(clock)
            case "query":
                found += services.query.registrations(
                    stores.trace,
                    stores.control,
                    storage=stores.trace.backend,
                    signup=security.signup,
                    clock=clock,
                    sessions=session_tools(stores, settings, clock=clock),
                    hash_user=Redactor(key=redaction_key(settings)).hash_identifier,
                    runs=services.query.OrchestratorRuns(
                        peers(ORCHESTRATOR_SERVICE), service.metadata("query")
                    ),
                    ingest_lag=ingest.lag if ingest is not None else None,
                )
                throttle = LoginThrottle(
                    clock,
                    max_failures=security.login_max_failures,
                    window_s=security.login_window_s,
                )
                accounts = services.account.Accounts(
                    stores.control,
                    clock,
                    throttle,
                    signup_enabled=security.signup,
                    session_ttl=timedelta(hours=security.session_ttl_hours),
                )
                found += services.account.registrations(accounts)
            case "orchestrator":
                if orchestrator is None:
                    orchestrator = services.orchestrator.Orchestrator(
                        stores.run,
                        stores.control,
                        clock=clock,
                        lease_ttl_ms=settings.orchestrator.lease_ttl_ms,
                    )
                found += orchestrator.registrations()
            case "evaluation":
                if watches is None:
                    watches = evaluation_watches(settings, stores, clock, peers, service, None)
                if evaluation is None:
                    evaluation = evaluation_parts(settings, stores, clock, peers, service)
                found += services.evaluation.registrations(
                    evaluation, watches.monitors, watches.objectives
                )
            case "intelligence":
                if intelligence is None:
                    intelligence = intelligence_parts(settings, stores, clock, peers, service)
                found += services.intelligence.registrations(intelligence)
            case "gateway":
                pass
            case _:
                raise ValueError(f"unknown role {role!r}")
    return found


def evaluation_parts(
    settings: Settings,
    stores: Stores,
    clock: Clock,
    peers: ChannelFor,
    service: ServiceCredential,
) -> services.evaluation.Evaluation:
    """The evaluation role's scoring, datasets and experiments: runs are read from the query
    service, scores stored through ingest and experiment runs started on the orchestrator, with
    the service credential; datasets and experiments live in the trace store."""
    calls = service.metadata("evaluation")
    return services.evaluation.evaluation(
        services.evaluation.QueryReads(peers(QUERY_SERVICE), calls),
        services.evaluation.IngestScores(peers(INGEST_SERVICE), calls),
        services.evaluation.OrchestratorRuns(peers(ORCHESTRATOR_SERVICE), calls),
        stores.trace,
        stores.trace,
        clock=clock,
        judge=settings.evaluation,
        prices=stores.control,
    )


def intelligence_parts(
    settings: Settings, stores: Stores, clock: Clock, peers: ChannelFor, service: ServiceCredential
) -> services.intelligence.Intelligence:
    """The intelligence role's servicer, clustering pass and derived notes over the trace
    store's notes and themes and the control store's aspects (synced when built: blocking);
    derived notes are stored through ingest with the service credential."""
    catalogues = open_catalogues(
        settings, stores.control, clock, ttl_s=settings.ingest.policy_ttl_s
    )
    calls = service.metadata("intelligence")
    notes = services.intelligence.IngestNotes(peers(INGEST_SERVICE), calls)
    runs = services.intelligence.OrchestratorRuns(peers(ORCHESTRATOR_SERVICE), calls)
    return services.intelligence.intelligence(
        settings.intelligence, stores.trace, catalogues, notes, runs, clock
    )


@dataclass(frozen=True, slots=True)
class Watches:
    """The evaluation role's configured monitors and objectives."""

    monitors: services.evaluation.Monitors
    objectives: services.evaluation.Objectives


def evaluation_watches(
    settings: Settings,
    stores: Stores,
    clock: Clock,
    peers: ChannelFor,
    service: ServiceCredential,
    webhooks: services.evaluation.Webhooks | None,
) -> Watches:
    """The configured monitors and objectives, reading their windows from the query service
    (the run watches' from the orchestrator) with the service credential and announcing through
    `webhooks` (none: a process that does not evaluate them, and so announces nothing)."""
    calls = service.metadata("evaluation")
    windows = services.evaluation.QueryReads(peers(QUERY_SERVICE), calls)
    announcer = webhooks if webhooks is not None else services.evaluation.Webhooks()
    evaluation = settings.evaluation
    return Watches(
        services.evaluation.Monitors(
            services.evaluation.monitors_of(settings.monitors),
            windows,
            stores.control,
            announcer,
            clock,
            runs=services.evaluation.OrchestratorShapes(peers(ORCHESTRATOR_SERVICE), calls),
        ),
        services.evaluation.Objectives(
            services.evaluation.objectives_of(settings.slos),
            windows,
            stores.control,
            announcer,
            clock,
            fast_burn=evaluation.slo_fast_burn,
            slow_burn=evaluation.slo_slow_burn,
        ),
    )


CURSOR_KEY_FILE = "mcp-cursor.key"
CURSOR_KEY_BYTES = 32


def session_tools(
    stores: Stores, settings: Settings, *, clock: Clock, probe_filesystem: bool | None = None
) -> SessionTools:
    """The MCP session-search tools over this process's session read model.

    `probe_filesystem` (file_attention looking for Git boundaries on this machine) defaults to
    whether this process listens on loopback only, i.e. shares its callers' filesystem.
    """
    if probe_filesystem is None:
        probe_filesystem = is_loopback(settings.grpc_addr)
    return SessionTools(
        stores.sessions,
        clock=clock,
        cursor_key=cursor_key(settings.data_dir),
        sources=session_sources(settings),
        probe_filesystem=probe_filesystem,
    )


def tool_catalog(sources: Sequence[str]) -> ToolCatalog:
    """The MCP tools the gateway and `mcpd mcp` list: the session tools' own schemas, their
    descriptions naming the transcript `sources` (`session_sources`)."""
    from gateway.mcp import ToolCatalog

    descriptions = services.query.sessions.tool_descriptions(sources)
    return ToolCatalog(
        descriptions, services.query.sessions.INPUT_SCHEMAS, services.query.sessions.OUTPUT_SCHEMAS
    )


def session_sources(settings: Settings) -> list[str]:
    """The names of the configured transcript sources (what the tool descriptions list)."""
    resolved = resolve_sources(settings.sessions, home=Path.home(), harnesses=harnesses())
    return [source.name for source in resolved]


def cursor_key(data_dir: Path) -> bytes:
    """The secret that signs `open` cursors: 32 random bytes made once per data directory.

    Kept in `data_dir/mcp-cursor.key` (mode 0600), so cursors survive restarts and `mcpd mcp`
    (embedded) signs them like the daemon. Written to a temporary file and hard-linked into
    place, so concurrent first starts agree on one key and nobody reads a half-written file.
    Replicas that share a database but not a data directory must share this file too, or a
    cursor from one replica is refused (invalid_request: reopen the id) by the next.
    """
    path = data_dir / CURSOR_KEY_FILE
    if not path.exists():
        write_private_once(path, secrets.token_bytes(CURSOR_KEY_BYTES))
    key = path.read_bytes()
    if len(key) < CURSOR_KEY_BYTES:
        raise FailedPrecondition(
            f"{path} holds {len(key)} bytes; a cursor key needs {CURSOR_KEY_BYTES} "
            "(delete the file to make a new one: open cursors issued so far stop working)"
        )
    return key
