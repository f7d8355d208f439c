"""Which role serves which gRPC service, and what each role needs to run."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import timedelta

import grpc

import services.account
import services.evaluation
import services.ingest
import services.intelligence
import services.orchestrator
import services.query
from mcpd.auth.throttle import LoginThrottle
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

# Every gRPC role authenticates callers against the control store, so every one opens storage.
STORAGE_ROLES = frozenset(GRPC_ROLES)


def peer_address(settings: Settings, role: str) -> str:
    """Where a peer role is found (MCPD_<ROLE>_ADDR)."""
    address: str = getattr(settings, f"{role}_addr")
    return address


def registrations(
    roles: Sequence[str], stores: Stores, settings: Settings, *, clock: Clock
) -> list[ServiceRegistration]:
    """The gRPC services of `roles`, wired to their dependencies."""
    found: list[ServiceRegistration] = []
    security = settings.security
    for role in roles:
        match role:
            case "ingest":
                found += services.ingest.registrations()
            case "query":
                found += services.query.registrations(
                    stores.trace,
                    stores.control,
                    storage=stores.trace.backend,
                    signup=security.signup,
                    clock=clock,
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
