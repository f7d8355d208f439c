"""The query service: every read of stored signals, capabilities and health.

The names below are what the composition root wires the query role from; `sessions` is the
subpackage of the MCP session tools, with a surface of its own.
"""

from __future__ import annotations

from collections.abc import Callable

from mcpd.query.v1.query_service_pb2_grpc import add_QueryServiceServicer_to_server
from mcpd.runtime.clock import Clock
from mcpd.runtime.server import ServiceRegistration
from mcpd.runtime.servicers import registration
from mcpd.signals.batch import IngestLag
from mcpd.storage.interfaces import AuditReads
from services.query import sessions
from services.query.erasure import OrchestratorRuns, RunEraser
from services.query.health import HealthReporter
from services.query.requests import HashUser
from services.query.retention import RetentionSweeper
from services.query.servicer import LAUNCH_METADATA, QueryServicer, QueryStore, SessionToolSet

__all__ = [
    "LAUNCH_METADATA",
    "OrchestratorRuns",
    "RetentionSweeper",
    "RunEraser",
    "SessionToolSet",
    "registrations",
    "sessions",
]


def registrations(
    store: QueryStore,
    audit: AuditReads,
    *,
    storage: str,
    signup: bool,
    clock: Clock,
    sessions: SessionToolSet,
    hash_user: HashUser,
    runs: RunEraser | None = None,
    ingest_lag: Callable[[], IngestLag] | None = None,
) -> list[ServiceRegistration]:
    """The gRPC services this role serves; `sessions` are the MCP session-search tools;
    `hash_user` the server's keyed hash of user ids (filters and erasure match what ingest
    stored); `runs` the orchestrator's erasure of runs; `ingest_lag` is the co-located ingest
    writer's lag, reported by health."""
    health = HealthReporter(storage=storage, clock=clock, signup=signup, ingest_lag=ingest_lag)
    servicer = QueryServicer(
        store, audit, health, sessions, clock=clock, hash_user=hash_user, runs=runs
    )
    return [registration(servicer, add_QueryServiceServicer_to_server)]
