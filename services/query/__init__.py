"""The query service: every read of stored signals, capabilities and health."""

from __future__ import annotations

from mcpd.query.v1.query_service_pb2_grpc import add_QueryServiceServicer_to_server
from mcpd.runtime.clock import Clock
from mcpd.runtime.server import ServiceRegistration
from mcpd.runtime.servicers import registration
from services.query.health import HealthReporter
from services.query.servicer import CapabilitySource, QueryServicer

__all__ = ["registrations"]


def registrations(
    store: CapabilitySource, *, storage: str, clock: Clock
) -> list[ServiceRegistration]:
    """The gRPC services this role serves."""
    health = HealthReporter(storage=storage, clock=clock)
    return [registration(QueryServicer(store, health), add_QueryServiceServicer_to_server)]
