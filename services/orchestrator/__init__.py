"""The orchestrator service: durable runs with their definitions, events, workers and leases."""

from __future__ import annotations

from mcpd.orchestrator.v1.orchestrator_service_pb2_grpc import (
    add_OrchestratorServiceServicer_to_server,
)
from mcpd.runtime.server import ServiceRegistration
from mcpd.runtime.servicers import registration
from services.orchestrator.servicer import OrchestratorServicer

__all__ = ["registrations"]


def registrations() -> list[ServiceRegistration]:
    """The gRPC services this role serves."""
    return [registration(OrchestratorServicer(), add_OrchestratorServiceServicer_to_server)]
