"""The query service: every read of stored signals, capabilities and health."""

from __future__ import annotations

from mcpd.query.v1.query_service_pb2_grpc import add_QueryServiceServicer_to_server
from mcpd.runtime.clock import Clock
from mcpd.runtime.server import ServiceRegistration
from mcpd.runtime.servicers import registration
from services.query.health import HealthReporter
from services.query.servicer import AuditLog, CapabilitySource, QueryServicer, SessionToolSet

__all__ = ["SessionToolSet", "registrations"]


def registrations(
    store: CapabilitySource,
    audit: AuditLog,
    *,
    storage: str,
    signup: bool,
    clock: Clock,
    sessions: SessionToolSet,
) -> list[ServiceRegistration]:
    """The gRPC services this role serves; `sessions` are the MCP session-search tools."""
    health = HealthReporter(storage=storage, clock=clock, signup=signup)
    servicer = QueryServicer(store, audit, health, sessions)
    return [registration(servicer, add_QueryServiceServicer_to_server)]
