"""The evaluation service's RPCs: scorers and scoring passes, datasets, experiments and their
comparison, monitors and SLOs. Each RPC hands its request to the part that owns it."""

from __future__ import annotations

import asyncio
from typing import Any

import grpc

from mcpd.evaluation.v1 import evaluation_service_pb2, evaluation_service_pb2_grpc
from mcpd.model.v1 import evaluation_pb2
from services.evaluation.datasets import Datasets
from services.evaluation.experiments import Experiments
from services.evaluation.monitors import Monitors
from services.evaluation.objectives import Objectives
from services.evaluation.scorers import scorer_info
from services.evaluation.scoring import Scoring

Context = grpc.aio.ServicerContext[Any, Any]


class EvaluationServicer(evaluation_service_pb2_grpc.EvaluationServiceServicer):
    """Every EvaluationService RPC, over the parts that own them."""

    def __init__(
        self,
        scoring: Scoring,
        datasets: Datasets,
        experiments: Experiments,
        monitors: Monitors,
        objectives: Objectives,
    ) -> None:
        self._scoring = scoring
        self._datasets = datasets
        self._experiments = experiments
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

    async def CreateDataset(
        self, request: evaluation_pb2.Dataset, context: Context
    ) -> evaluation_pb2.Dataset:
        return await self._datasets.create(request)

    async def ListDatasets(
        self, request: evaluation_service_pb2.ListDatasetsRequest, context: Context
    ) -> evaluation_service_pb2.ListDatasetsResponse:
        return await self._datasets.page(request)

    async def GetDataset(
        self, request: evaluation_service_pb2.GetDatasetRequest, context: Context
    ) -> evaluation_pb2.Dataset:
        return await self._datasets.get(request.project, request.dataset_id)

    async def ListDatasetItems(
        self, request: evaluation_service_pb2.ListDatasetItemsRequest, context: Context
    ) -> evaluation_service_pb2.ListDatasetItemsResponse:
        return await self._datasets.items(request)

    async def AddDatasetItems(
        self, request: evaluation_service_pb2.AddDatasetItemsRequest, context: Context
    ) -> evaluation_pb2.ItemsAdded:
        return await self._datasets.add(request)

    async def CaptureToDataset(
        self, request: evaluation_service_pb2.CaptureToDatasetRequest, context: Context
    ) -> evaluation_pb2.CaptureResult:
        return await self._datasets.capture(request)

    async def CreateExperiment(
        self, request: evaluation_pb2.Experiment, context: Context
    ) -> evaluation_pb2.Experiment:
        return await self._experiments.create(request)

    async def ListExperiments(
        self, request: evaluation_service_pb2.ListExperimentsRequest, context: Context
    ) -> evaluation_service_pb2.ListExperimentsResponse:
        return await self._experiments.page(request)

    async def GetExperiment(
        self, request: evaluation_service_pb2.GetExperimentRequest, context: Context
    ) -> evaluation_pb2.Experiment:
        return await self._experiments.get(request.project, request.experiment_id)

    async def CompareExperiments(
        self, request: evaluation_service_pb2.CompareExperimentsRequest, context: Context
    ) -> evaluation_pb2.ExperimentComparison:
        return await self._experiments.compare(request)

    async def FinishExperiment(
        self, request: evaluation_service_pb2.FinishExperimentRequest, context: Context
    ) -> evaluation_pb2.Experiment:
        return await self._experiments.finish(request)

    async def RecordExperimentRuns(
        self, request: evaluation_service_pb2.RecordExperimentRunsRequest, context: Context
    ) -> evaluation_service_pb2.RecordExperimentRunsResponse:
        return await self._experiments.record_runs(request)

    async def CancelExperiment(
        self, request: evaluation_service_pb2.CancelExperimentRequest, context: Context
    ) -> evaluation_pb2.Experiment:
        return await self._experiments.cancel(request)

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
