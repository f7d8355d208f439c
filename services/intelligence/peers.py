"""The intelligence service's calls to the other services, with the service credential: derived
notes are stored through ingest, as every note is, and what they say about runs is read from
the orchestrator (a step's cause chain, the window's run shapes)."""

from __future__ import annotations

import logging
from collections.abc import Sequence

import grpc.aio

from mcpd.ingest.v1.ingest_service_pb2_grpc import IngestServiceStub
from mcpd.model.v1 import enums_pb2, telemetry_pb2
from mcpd.orchestrator.v1 import orchestrator_service_pb2 as orchestrator
from mcpd.orchestrator.v1.orchestrator_service_pb2_grpc import OrchestratorServiceStub
from mcpd.runtime.errors import Unavailable
from mcpd.signals.messages import timestamp_of
from mcpd.workflows import BASELINE_RUNS, MIN_BASELINE, OUTLIER_Z, modified_z

__all__ = ["IngestNotes", "OrchestratorRuns"]

log = logging.getLogger("mcpd.intelligence")

CALL_TIMEOUT_S = 30.0


class IngestNotes:
    """`outcomes.NoteWrites` through the ingest service at `channel`, presenting `metadata`."""

    def __init__(self, channel: grpc.aio.Channel, metadata: Sequence[tuple[str, str]]) -> None:
        self._stub = IngestServiceStub(channel)
        self._metadata = tuple(metadata)

    async def write(self, notes: Sequence[telemetry_pb2.AspectNote], *, ingest_key: str) -> None:
        batch = telemetry_pb2.IngestBatch(aspect_notes=notes, ingest_key=ingest_key)
        result: telemetry_pb2.IngestResult = await self._stub.Ingest(
            batch, metadata=self._metadata, timeout=CALL_TIMEOUT_S
        )
        if result.errors:
            first = result.errors[0]
            log.error("ingest refused %d outcome notes: %s", result.rejected, first.message)
            raise Unavailable(
                f"ingest refused {result.rejected} outcome notes ({first.message})",
                reason="NOTES_REFUSED",
            )


# The most runs of one window whose step counts are measured (the newest).
WINDOW_RUNS = 10_000


class OrchestratorRuns:
    """`outcomes.RunFacts` from the orchestrator at `channel`, presenting `metadata`."""

    def __init__(self, channel: grpc.aio.Channel, metadata: Sequence[tuple[str, str]]) -> None:
        self._stub = OrchestratorServiceStub(channel)
        self._metadata = tuple(metadata)

    async def silent_producer(self, project: str, run_id: str, step_key: str) -> bool:
        request = orchestrator.GetStepCauseRequest(
            project=project, run_id=run_id, step_key=step_key
        )
        try:
            cause = await self._stub.GetStepCause(
                request, metadata=self._metadata, timeout=CALL_TIMEOUT_S
            )
        except grpc.aio.AioRpcError as error:
            if error.code() == grpc.StatusCode.NOT_FOUND:
                return False  # the run was erased meanwhile
            raise
        return any(link.silent_producer for link in cause.chain)

    async def unusual_runs(self, project: str, window: tuple[int, int]) -> set[str]:
        request = orchestrator.GetRunShapesRequest(
            project=project, limit=WINDOW_RUNS, baseline=BASELINE_RUNS
        )
        getattr(request, "from").CopyFrom(timestamp_of(window[0]))
        request.to.CopyFrom(timestamp_of(window[1]))
        shapes = await self._stub.GetRunShapes(
            request, metadata=self._metadata, timeout=CALL_TIMEOUT_S
        )
        baselines = {
            (line.definition_id, line.definition_version): list(line.steps_used)
            for line in shapes.baselines
            if len(line.steps_used) >= MIN_BASELINE
        }
        return {
            run.run_id
            for run in shapes.runs
            if run.status == enums_pb2.RUN_STATUS_SUCCEEDED
            and (baseline := baselines.get((run.definition_id, run.definition_version)))
            and modified_z(run.steps_used, baseline) >= OUTLIER_Z
        }
