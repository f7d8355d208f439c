"""The services the evaluation role calls, over gRPC with the service credential: the query
service for the runs a pass scores and the windows monitors and objectives read (`QueryReads`),
the orchestrator for the shapes of the runs the run watches read (`OrchestratorShapes`), the
ingest service for the scores (`IngestScores`).

A failure between two services is not the caller's: it is logged and answered as Unavailable,
so the caller retries (a pass's scores are idempotent; a watch is read again next round)."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TypeVar

import grpc
import grpc.aio
from google.protobuf.timestamp_pb2 import Timestamp

from mcpd.codec import enum_names
from mcpd.ingest.v1.ingest_service_pb2_grpc import IngestServiceStub
from mcpd.model.v1 import enums_pb2, query_pb2, runs_pb2, telemetry_pb2
from mcpd.orchestrator.v1 import orchestrator_service_pb2
from mcpd.orchestrator.v1.orchestrator_service_pb2_grpc import OrchestratorServiceStub
from mcpd.query.v1 import query_service_pb2
from mcpd.query.v1.query_service_pb2_grpc import QueryServiceStub
from mcpd.runtime.cursors import MAX_PAGE
from mcpd.runtime.errors import FailedPrecondition, Unavailable
from mcpd.runtime.errors_grpc import rpc_failure_from
from mcpd.signals.messages import value_of
from mcpd.storage.evaluation_records import DatasetItemRow
from services.evaluation.experiments import ExperimentPlan

__all__ = ["IngestScores", "OrchestratorRuns", "OrchestratorShapes", "QueryReads"]

log = logging.getLogger("mcpd.evaluation")
CALL_TIMEOUT_S = 30.0
_RUN_STATUS = enum_names(enums_pb2.RunStatus.DESCRIPTOR)
# The most runs one GetRunOutcomes call names (the orchestrator's bound).
MAX_OUTCOMES = 100
_Request = TypeVar("_Request")
_Response = TypeVar("_Response")


class QueryReads:
    """`TraceReads` and `WindowReads` over the query service at `channel`, presenting
    `metadata`."""

    def __init__(self, channel: grpc.aio.Channel, metadata: Sequence[tuple[str, str]]) -> None:
        self._stub = QueryServiceStub(channel)
        self._metadata = tuple(metadata)

    async def newest(self, project: str, *, since: Timestamp | None, limit: int) -> list[str]:
        found: list[str] = []
        request = query_service_pb2.ListTracesRequest(project=project, order_by="-start_time")
        if since is not None:
            getattr(request, "from").CopyFrom(since)
        while len(found) < limit:
            request.limit = min(limit - len(found), MAX_PAGE)
            page: query_pb2.TraceListResponse = await _call(
                self._stub.ListTraces, request, self._metadata, "list the runs to score"
            )
            found += [trace.trace_id for trace in page.traces]
            if not page.page.has_more:
                break
            request.cursor = page.page.next_cursor
        return found[:limit]

    async def detail(self, project: str, trace_id: str) -> query_pb2.TraceDetail | None:
        request = query_service_pb2.GetTraceRequest(project=project, trace_id=trace_id)
        try:
            detail: query_pb2.TraceDetail = await self._stub.GetTrace(
                request, metadata=self._metadata, timeout=CALL_TIMEOUT_S
            )
        except grpc.aio.AioRpcError as error:
            if error.code() == grpc.StatusCode.NOT_FOUND:
                return None
            raise _unavailable(error, "read a run to score") from None
        return detail

    async def summary(
        self, project: str, start: Timestamp, end: Timestamp
    ) -> query_pb2.AnalyticsSummary:
        request = query_service_pb2.GetAnalyticsSummaryRequest(project=project, to=end)
        getattr(request, "from").CopyFrom(start)
        summary: query_pb2.AnalyticsSummary = await _call(
            self._stub.GetAnalyticsSummary, request, self._metadata, "read a monitor's window"
        )
        return summary

    async def score_mean(
        self, project: str, scorer_id: str, start: Timestamp, end: Timestamp
    ) -> tuple[float | None, int]:
        """One GetScoreStats call: the query service answers from its rollups, however many
        scores the window holds."""
        request = query_service_pb2.GetScoreStatsRequest(
            project=project, scorer_id=scorer_id, to=end
        )
        getattr(request, "from").CopyFrom(start)
        stats: query_service_pb2.GetScoreStatsResponse = await _call(
            self._stub.GetScoreStats, request, self._metadata, "read a monitor's scores"
        )
        return (stats.mean if stats.HasField("mean") else None), int(stats.count)


class OrchestratorShapes:
    """`RunShapeReads` over the orchestrator's internal GetRunShapes at `channel`, presenting
    `metadata`."""

    def __init__(self, channel: grpc.aio.Channel, metadata: Sequence[tuple[str, str]]) -> None:
        self._stub = OrchestratorServiceStub(channel)
        self._metadata = tuple(metadata)

    async def run_shapes(
        self, project: str, start: Timestamp, end: Timestamp, *, limit: int, baseline: int
    ) -> orchestrator_service_pb2.GetRunShapesResponse:
        request = orchestrator_service_pb2.GetRunShapesRequest(
            project=project, to=end, limit=limit, baseline=baseline
        )
        getattr(request, "from").CopyFrom(start)
        shapes: orchestrator_service_pb2.GetRunShapesResponse = await _call(
            self._stub.GetRunShapes, request, self._metadata, "read a monitor's runs"
        )
        return shapes


class IngestScores:
    """`ScoreWrites` through the ingest service at `channel`, presenting `metadata`."""

    def __init__(self, channel: grpc.aio.Channel, metadata: Sequence[tuple[str, str]]) -> None:
        self._stub = IngestServiceStub(channel)
        self._metadata = tuple(metadata)

    async def write(self, scores: Sequence[telemetry_pb2.Score], *, ingest_key: str) -> int:
        batch = telemetry_pb2.IngestBatch(scores=scores, ingest_key=ingest_key)
        result: telemetry_pb2.IngestResult = await _call(
            self._stub.Ingest, batch, self._metadata, "store the scores"
        )
        if result.errors:
            first = result.errors[0]
            log.error("ingest refused %d scores: %s", result.rejected, first.message)
            raise Unavailable(
                f"ingest refused {result.rejected} of the scores ({first.message}); none of "
                "this pass's other scores is lost: run the pass again",
                reason="SCORES_REFUSED",
            )
        return int(result.accepted + result.duplicate)


async def _call(
    method: grpc.aio.UnaryUnaryMultiCallable[_Request, _Response],
    request: _Request,
    metadata: tuple[tuple[str, str], ...],
    what: str,
) -> _Response:
    try:
        return await method(request, metadata=metadata, timeout=CALL_TIMEOUT_S)
    except grpc.aio.AioRpcError as error:
        raise _unavailable(error, what) from None


def _unavailable(error: grpc.aio.AioRpcError, what: str) -> Unavailable:
    failure = rpc_failure_from(error)
    log.error(
        "evaluation could not %s: %s: %s",
        what,
        failure.reason,
        failure.message,
        extra={"reason": failure.reason},
    )
    return Unavailable(
        f"evaluation could not {what} ({failure.reason}); nothing was stored: try again",
        reason="EVALUATION_UNAVAILABLE",
    )


# A start refused for what it asks (a definition gone, an input its schema refuses): the item's
# run can never start, so the item fails; any other failure is retried next round.
_REFUSALS = frozenset(
    {
        grpc.StatusCode.INVALID_ARGUMENT,
        grpc.StatusCode.NOT_FOUND,
        grpc.StatusCode.FAILED_PRECONDITION,
        grpc.StatusCode.ALREADY_EXISTS,
    }
)


class OrchestratorRuns:
    """`experiments.RunControl` over the orchestrator service at `channel`, presenting
    `metadata`."""

    def __init__(self, channel: grpc.aio.Channel, metadata: Sequence[tuple[str, str]]) -> None:
        self._stub = OrchestratorServiceStub(channel)
        self._metadata = tuple(metadata)

    async def start(
        self, project: str, plan: ExperimentPlan, item: DatasetItemRow, experiment_id: str
    ) -> tuple[str, str]:
        request = runs_pb2.StartRunRequest(
            project=project,
            definition_id=plan.definition_id,
            input=value_of(item.input),
            idempotency_key=f"experiment:{experiment_id}:{item.item_id}",
        )
        if plan.definition_version is not None:
            request.version = plan.definition_version
        request.correlation.experiment_id = experiment_id
        try:
            run: runs_pb2.Run = await self._stub.StartRun(
                request, metadata=self._metadata, timeout=CALL_TIMEOUT_S
            )
        except grpc.aio.AioRpcError as error:
            if error.code() in _REFUSALS:
                raise FailedPrecondition(
                    f"the orchestrator refused the run: {rpc_failure_from(error).message}"
                ) from None
            raise _unavailable(error, "start an experiment's run") from None
        return run.run_id, run.trace_id

    async def outcomes(self, project: str, run_ids: Sequence[str]) -> dict[str, str]:
        found: dict[str, str] = {}
        for first in range(0, len(run_ids), MAX_OUTCOMES):
            request = orchestrator_service_pb2.GetRunOutcomesRequest(
                project=project, run_ids=run_ids[first : first + MAX_OUTCOMES]
            )
            answer: orchestrator_service_pb2.GetRunOutcomesResponse = await _call(
                self._stub.GetRunOutcomes, request, self._metadata, "read an experiment's runs"
            )
            found.update((run.run_id, _RUN_STATUS.by_number[run.status]) for run in answer.runs)
        return found

    async def cancel(self, project: str, run_id: str) -> None:
        request = orchestrator_service_pb2.CancelRunRequest(project=project, run_id=run_id)
        try:
            await self._stub.CancelRun(request, metadata=self._metadata, timeout=CALL_TIMEOUT_S)
        except grpc.aio.AioRpcError as error:
            if error.code() != grpc.StatusCode.FAILED_PRECONDITION:
                raise _unavailable(error, "cancel an experiment's run") from None
