"""Which role serves which gRPC service, and what each role needs to run."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import grpc

import services.account
import services.evaluation
import services.ingest
import services.intelligence
import services.orchestrator
import services.query
from mcpd.runtime.clock import Clock
from mcpd.runtime.config import Settings
from mcpd.runtime.server import ServiceRegistration
from mcpd.storage import Stores

# Finds the channel to the process serving a proto service, by the service's full name.
ChannelFor = Callable[[str], grpc.aio.Channel]

GRPC_ROLES = ("ingest", "query", "orchestrator", "evaluation", "intelligence")
ROLES = (*GRPC_ROLES, "gateway")

# The account service has no role of its own: it lives with the query role, which owns the other
# reads of the control store (audit, projects).
SERVICE_ROLES = {
    "mcpd.ingest.v1.IngestService": "ingest",
    "mcpd.query.v1.QueryService": "query",
    "mcpd.account.v1.AccountService": "query",
    "mcpd.orchestrator.v1.OrchestratorService": "orchestrator",
    "mcpd.evaluation.v1.EvaluationService": "evaluation",
    "mcpd.intelligence.v1.IntelligenceService": "intelligence",
}

STORAGE_ROLES = frozenset({"query"})


def peer_address(settings: Settings, role: str) -> str:
    """Where a peer role is found (MCPD_<ROLE>_ADDR)."""
    address: str = getattr(settings, f"{role}_addr")
    return address


def registrations(
    roles: Sequence[str], stores: Stores | None, *, clock: Clock
) -> list[ServiceRegistration]:
    """The gRPC services of `roles`, wired to their dependencies."""
    found: list[ServiceRegistration] = []
    for role in roles:
        match role:
            case "ingest":
                found += services.ingest.registrations()
            case "query":
                assert stores is not None, "the query role needs storage"
                found += services.query.registrations(
                    stores.trace, storage=stores.trace.backend, clock=clock
                )
                found += services.account.registrations()
            case "orchestrator":
                found += services.orchestrator.registrations()
            case "evaluation":
                found += services.evaluation.registrations()
            case "intelligence":
                found += services.intelligence.registrations()
            case "gateway":
                pass
            case _:
                raise ValueError(f"unknown role {role!r}")
    return found
