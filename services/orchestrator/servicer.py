"""Durable workflow runs: definitions, runs, events, workers and leases."""

from __future__ import annotations

from mcpd.orchestrator.v1 import orchestrator_service_pb2_grpc
from mcpd.runtime.servicers import pending_rpcs


@pending_rpcs("the run orchestrator issue")
class OrchestratorServicer(orchestrator_service_pb2_grpc.OrchestratorServiceServicer):
    """Every RPC answers UNIMPLEMENTED until the run orchestrator issue lands."""
