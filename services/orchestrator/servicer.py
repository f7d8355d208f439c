"""Durable workflow runs: definitions, runs, events, workers and leases."""

from __future__ import annotations

import asyncio
from typing import Any

import grpc

from mcpd.model.v1 import runs_pb2
from mcpd.orchestrator.v1 import orchestrator_service_pb2, orchestrator_service_pb2_grpc
from mcpd.runtime.errors import InvalidArgument
from mcpd.storage.interfaces import RunSubjectErasure
from services.orchestrator.causes import Causes
from services.orchestrator.definitions import Definitions
from services.orchestrator.events import Events
from services.orchestrator.leases import Leases
from services.orchestrator.runs import Runs
from services.orchestrator.shapes import Shapes

Context = grpc.aio.ServicerContext[Any, Any]


class OrchestratorServicer(orchestrator_service_pb2_grpc.OrchestratorServiceServicer):
    """Definitions, starting, cancelling and reading runs, events and signals, workers, claims
    and leases, the run store's erasure and the run shapes the evaluation service reads. The
    auth interceptor has resolved each request's project."""

    def __init__(
        self,
        erasure: RunSubjectErasure,
        definitions: Definitions,
        runs: Runs,
        leases: Leases,
        events: Events,
        causes: Causes,
        shapes: Shapes,
        lease_ttl_ms: int,
    ) -> None:
        self._erasure = erasure
        self._definitions = definitions
        self._runs = runs
        self._leases = leases
        self._events = events
        self._causes = causes
        self._shapes = shapes
        self._lease_ttl_ms = lease_ttl_ms

    async def CreateDefinition(
        self, request: runs_pb2.DefinitionDocument, context: Context
    ) -> runs_pb2.DefinitionVersion:
        (placed,) = await asyncio.to_thread(self._definitions.create, request.project, [request])
        return placed

    async def ListDefinitions(
        self, request: orchestrator_service_pb2.ListDefinitionsRequest, context: Context
    ) -> orchestrator_service_pb2.ListDefinitionsResponse:
        return await asyncio.to_thread(self._definitions.list, request)

    async def GetDefinitionVersion(
        self, request: orchestrator_service_pb2.GetDefinitionVersionRequest, context: Context
    ) -> runs_pb2.Definition:
        return await asyncio.to_thread(self._definitions.get, request)

    async def StartRun(self, request: runs_pb2.StartRunRequest, context: Context) -> runs_pb2.Run:
        return await asyncio.to_thread(self._runs.start, request)

    async def ListRuns(
        self, request: orchestrator_service_pb2.ListRunsRequest, context: Context
    ) -> runs_pb2.RunListResponse:
        return await asyncio.to_thread(self._runs.list, request)

    async def GetRun(
        self, request: orchestrator_service_pb2.GetRunRequest, context: Context
    ) -> runs_pb2.RunDetail:
        return await asyncio.to_thread(self._runs.get, request)

    async def CancelRun(
        self, request: orchestrator_service_pb2.CancelRunRequest, context: Context
    ) -> runs_pb2.Run:
        return await asyncio.to_thread(self._runs.cancel, request)

    async def GetStepCause(
        self, request: orchestrator_service_pb2.GetStepCauseRequest, context: Context
    ) -> runs_pb2.StepCause:
        return await asyncio.to_thread(self._causes.cause, request)

    async def SignalRun(
        self, request: orchestrator_service_pb2.SignalRunRequest, context: Context
    ) -> runs_pb2.EventReceipt:
        return await asyncio.to_thread(self._events.signal, request)

    async def PublishEvent(
        self, request: runs_pb2.PublishEventRequest, context: Context
    ) -> runs_pb2.EventReceipt:
        return await asyncio.to_thread(self._events.publish, request)

    async def ListRunEvents(
        self, request: orchestrator_service_pb2.ListRunEventsRequest, context: Context
    ) -> runs_pb2.RunEventPage:
        return await asyncio.to_thread(self._runs.events, request)

    async def RegisterWorker(
        self, request: runs_pb2.WorkerRegistration, context: Context
    ) -> runs_pb2.WorkerRegistered:
        if not request.worker_id:
            raise InvalidArgument("worker_id is required: who is registering", field="worker_id")
        registered = await asyncio.to_thread(
            self._definitions.create,
            request.project,
            list(request.definitions),
            prefix="definitions",
        )
        return runs_pb2.WorkerRegistered(
            worker_id=request.worker_id,
            registered=registered,
            lease_ttl_ms=self._lease_ttl_ms,
            heartbeat_ms=self._lease_ttl_ms // 3,
        )

    async def Claim(
        self, request: runs_pb2.ClaimRequest, context: Context
    ) -> runs_pb2.ClaimResponse:
        return await self._leases.claim(request, context.time_remaining())

    async def MarkStarted(
        self, request: orchestrator_service_pb2.LeaseRequest, context: Context
    ) -> runs_pb2.LeaseState:
        return await asyncio.to_thread(self._leases.started, request)

    async def Heartbeat(
        self, request: orchestrator_service_pb2.LeaseRequest, context: Context
    ) -> runs_pb2.LeaseState:
        return await asyncio.to_thread(self._leases.heartbeat, request)

    async def CompleteStep(
        self, request: orchestrator_service_pb2.CompleteStepRequest, context: Context
    ) -> runs_pb2.StepAck:
        return await asyncio.to_thread(self._leases.complete, request)

    async def FailStep(
        self, request: orchestrator_service_pb2.FailStepRequest, context: Context
    ) -> runs_pb2.StepAck:
        return await asyncio.to_thread(self._leases.fail, request)

    async def EraseSubjectRuns(
        self, request: orchestrator_service_pb2.EraseSubjectRunsRequest, context: Context
    ) -> orchestrator_service_pb2.EraseSubjectRunsResponse:
        # The auth interceptor has admitted only a calling service, and resolved the project.
        erased = await asyncio.to_thread(
            self._erasure.erase_subject, request.project, list(request.user_ids)
        )
        return orchestrator_service_pb2.EraseSubjectRunsResponse(
            runs_erased=erased.runs_erased,
            runs_in_flight=erased.runs_in_flight,
            in_flight_roots=erased.in_flight_roots,
        )

    async def GetRunOutcomes(
        self, request: orchestrator_service_pb2.GetRunOutcomesRequest, context: Context
    ) -> orchestrator_service_pb2.GetRunOutcomesResponse:
        # The auth interceptor has admitted only a calling service, and resolved the project.
        return await asyncio.to_thread(self._runs.outcomes, request)

    async def GetRunShapes(
        self, request: orchestrator_service_pb2.GetRunShapesRequest, context: Context
    ) -> orchestrator_service_pb2.GetRunShapesResponse:
        # The auth interceptor has admitted only a calling service, and resolved the project.
        return await asyncio.to_thread(self._shapes.read, request)
