"""Native ingest of spans, logs, metrics, scores, feedback and aspect notes, and transcripts
handed over by `mcpd import`.

Thin: each RPC turns its request into rows (`mcpd.signals.messages`) and hands them to the
pipeline, which validates, redacts, prices, samples and stores them; a transcript goes to the
transcript importer (`services.ingest.transcripts.imports`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable
from datetime import UTC
from typing import Any, TypeVar

import grpc

from mcpd.ingest.v1 import ingest_service_pb2, ingest_service_pb2_grpc
from mcpd.model.v1 import enums_pb2, telemetry_pb2
from mcpd.runtime.clock import Clock, to_timestamp
from mcpd.runtime.ids import new_id
from mcpd.signals import messages
from services.ingest.incoming import IncomingBatch
from services.ingest.pipeline import IngestPipeline
from services.ingest.transcripts.imports import TranscriptImports

Row = TypeVar("Row")


class IngestServicer(ingest_service_pb2_grpc.IngestServiceServicer):
    """IngestService over the pipeline."""

    def __init__(
        self, pipeline: IngestPipeline, clock: Clock, transcripts: TranscriptImports
    ) -> None:
        self._pipeline = pipeline
        self._clock = clock
        self._transcripts = transcripts

    async def Ingest(
        self, request: telemetry_pb2.IngestBatch, context: grpc.aio.ServicerContext[Any, Any]
    ) -> telemetry_pb2.IngestResult:
        with self._pipeline.admit(request.ByteSize()):
            return await self._pipeline.ingest(_incoming(request))

    async def CreateScore(
        self, request: telemetry_pb2.Score, context: grpc.aio.ServicerContext[Any, Any]
    ) -> telemetry_pb2.Score:
        score = telemetry_pb2.Score()
        score.CopyFrom(request)
        # A score entered through this route is a person's unless it says otherwise.
        if score.source == enums_pb2.SCORE_SOURCE_UNSPECIFIED:
            score.source = enums_pb2.SCORE_SOURCE_MANUAL
        score.score_id = score.score_id or new_id()
        if not score.HasField("timestamp"):
            score.timestamp.CopyFrom(to_timestamp(self._clock.now()))
        row = messages.score_row(score)
        await self._pipeline.ingest_one(IncomingBatch(scores=[(0, row)]))
        return messages.score_message(row)

    async def CreateFeedback(
        self, request: telemetry_pb2.Feedback, context: grpc.aio.ServicerContext[Any, Any]
    ) -> telemetry_pb2.Feedback:
        feedback = telemetry_pb2.Feedback()
        feedback.CopyFrom(request)
        feedback.feedback_id = feedback.feedback_id or new_id()
        if not feedback.HasField("timestamp"):
            feedback.timestamp.CopyFrom(to_timestamp(self._clock.now()))
        row = messages.feedback_row(feedback)
        await self._pipeline.ingest_one(IncomingBatch(feedback=[(0, row)]))
        return messages.feedback_message(row)

    async def ImportTranscript(
        self,
        request: ingest_service_pb2.ImportTranscriptRequest,
        context: grpc.aio.ServicerContext[Any, Any],
    ) -> ingest_service_pb2.ImportTranscriptResponse:
        with self._pipeline.admit(request.ByteSize()):
            outcome = await asyncio.to_thread(
                self._transcripts.import_lines,
                request.project,
                harness=request.harness,
                source=request.source,
                name=request.path,
                lines=list(request.lines),
                modified_at=request.modified_at.ToDatetime(UTC),
            )
        return ingest_service_pb2.ImportTranscriptResponse(
            events=outcome.events,
            session_id=outcome.session_id,
            errors=[
                ingest_service_pb2.TranscriptError(file=e.file, line=e.line, message=e.message)
                for e in outcome.errors
            ],
        )


def _incoming(request: telemetry_pb2.IngestBatch) -> IncomingBatch:
    return IncomingBatch(
        spans=_rows(request.spans, messages.span_row),
        logs=_rows(request.logs, messages.log_row),
        metrics=_rows(request.metrics, messages.metric_row),
        scores=_rows(request.scores, messages.score_row),
        feedback=_rows(request.feedback, messages.feedback_row),
        aspect_notes=_rows(request.aspect_notes, messages.aspect_note_row),
        ingest_key=request.ingest_key if request.HasField("ingest_key") else None,
    )


def _rows(records: Iterable[Any], to_row: Callable[[Any], Row]) -> list[tuple[int, Row]]:
    return [(index, to_row(record)) for index, record in enumerate(records)]
