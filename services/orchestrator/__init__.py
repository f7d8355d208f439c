"""The orchestrator service: durable runs with their definitions, events, workers and leases."""

from __future__ import annotations

from typing import Protocol

from mcpd.orchestrator.v1.orchestrator_service_pb2_grpc import (
    add_OrchestratorServiceServicer_to_server,
)
from mcpd.runtime.clock import Clock
from mcpd.runtime.server import ServiceRegistration
from mcpd.runtime.servicers import registration
from mcpd.storage.interfaces import RunSubjectErasure
from services.orchestrator.definitions import Definitions, DefinitionStore
from services.orchestrator.runs import Runs, RunStore
from services.orchestrator.servicer import OrchestratorServicer

__all__ = ["OrchestratorStore", "registrations"]


class OrchestratorStore(RunSubjectErasure, DefinitionStore, RunStore, Protocol):
    """What the orchestrator needs of the run store."""


def registrations(
    runs: OrchestratorStore, *, clock: Clock, lease_ttl_ms: int
) -> list[ServiceRegistration]:
    """The gRPC services this role serves, over the run store it owns."""
    servicer = OrchestratorServicer(runs, Definitions(runs, clock), Runs(runs, clock), lease_ttl_ms)
    return [registration(servicer, add_OrchestratorServiceServicer_to_server)]
