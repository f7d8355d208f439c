"""Durable workflow runs: definitions, runs, events, workers and leases."""

from __future__ import annotations

import asyncio
from typing import Any

import grpc

from mcpd.orchestrator.v1 import orchestrator_service_pb2, orchestrator_service_pb2_grpc
from mcpd.runtime.servicers import pending_rpcs
from mcpd.storage.interfaces import RunSubjectErasure


@pending_rpcs("the run orchestrator issue")
class OrchestratorServicer(orchestrator_service_pb2_grpc.OrchestratorServiceServicer):
    """The run store's erasure; every other RPC answers UNIMPLEMENTED until the run orchestrator
    issue lands."""

    def __init__(self, runs: RunSubjectErasure) -> None:
        self._runs = runs

    async def EraseSubjectRuns(
        self,
        request: orchestrator_service_pb2.EraseSubjectRunsRequest,
        context: grpc.aio.ServicerContext[Any, Any],
    ) -> orchestrator_service_pb2.EraseSubjectRunsResponse:
        # The auth interceptor has admitted only a calling service, and resolved the project.
        erased = await asyncio.to_thread(
            self._runs.erase_subject, request.project, list(request.user_ids)
        )
        return orchestrator_service_pb2.EraseSubjectRunsResponse(
            runs_erased=erased.runs_erased,
            runs_in_flight=erased.runs_in_flight,
            in_flight_roots=erased.in_flight_roots,
        )
