"""The orchestrator service: durable runs with their definitions, events, workers and leases."""

from __future__ import annotations

from mcpd.orchestrator.v1.orchestrator_service_pb2_grpc import (
    add_OrchestratorServiceServicer_to_server,
)
from mcpd.runtime.server import ServiceRegistration
from mcpd.runtime.servicers import registration
from mcpd.storage.interfaces import RunSubjectErasure
from services.orchestrator.servicer import OrchestratorServicer

__all__ = ["registrations"]


def registrations(runs: RunSubjectErasure) -> list[ServiceRegistration]:
    """The gRPC services this role serves, over the run store it owns."""
    return [registration(OrchestratorServicer(runs), add_OrchestratorServiceServicer_to_server)]
