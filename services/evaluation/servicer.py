"""Scorers, datasets, experiments, monitors and SLOs: all but datasets and experiments so
far."""

from __future__ import annotations

import asyncio
from typing import Any

import grpc

from mcpd.evaluation.v1 import evaluation_service_pb2, evaluation_service_pb2_grpc
from mcpd.model.v1 import evaluation_pb2
from mcpd.runtime.servicers import pending_rpcs
from services.evaluation.monitors import Monitors
from services.evaluation.objectives import Objectives
from services.evaluation.scorers import scorer_info
from services.evaluation.scoring import Scoring

Context = grpc.aio.ServicerContext[Any, Any]


@pending_rpcs("the evaluation issue")
class EvaluationServicer(evaluation_service_pb2_grpc.EvaluationServiceServicer):
    """The scorers and scoring passes; every other RPC answers UNIMPLEMENTED until the rest of
    the evaluation issue lands."""

    def __init__(self, scoring: Scoring, monitors: Monitors, objectives: Objectives) -> None:
        self._scoring = scoring
        self._monitors = monitors
        self._objectives = objectives

    async def ListScorers(
        self, request: evaluation_service_pb2.ListScorersRequest, context: Context
    ) -> evaluation_service_pb2.ListScorersResponse:
        return evaluation_service_pb2.ListScorersResponse(
            scorers=[scorer_info(scorer) for scorer in self._scoring.scorers.values()]
        )

    async def RunScorers(
        self, request: evaluation_pb2.ScoreRunRequest, context: Context
    ) -> evaluation_pb2.ScoreRunResult:
        return await self._scoring.run(request, time_left=context.time_remaining())

    async def ListMonitors(
        self, request: evaluation_service_pb2.ListMonitorsRequest, context: Context
    ) -> evaluation_service_pb2.ListMonitorsResponse:
        states = await asyncio.to_thread(self._monitors.list, request.project)
        return evaluation_service_pb2.ListMonitorsResponse(monitors=states)

    async def AcknowledgeMonitor(
        self, request: evaluation_service_pb2.AcknowledgeMonitorRequest, context: Context
    ) -> evaluation_pb2.MonitorState:
        return await asyncio.to_thread(
            self._monitors.acknowledge, request.project, request.monitor_id
        )

    async def ListSlos(
        self, request: evaluation_service_pb2.ListSlosRequest, context: Context
    ) -> evaluation_service_pb2.ListSlosResponse:
        states = await asyncio.to_thread(self._objectives.list, request.project)
        return evaluation_service_pb2.ListSlosResponse(slos=states)

    async def AcknowledgeSlo(
        self, request: evaluation_service_pb2.AcknowledgeSloRequest, context: Context
    ) -> evaluation_pb2.SloState:
        return await asyncio.to_thread(
            self._objectives.acknowledge, request.project, request.slo_id
        )
