"""ErasureResult: what an erasure removed, and why the counts may not be the whole answer.

The trace store's counts make up `deleted`; runs and aspect notes are reported beside it, as the
spec says. Runs belong to the orchestrator, which owns the run store: the query service asks it
over gRPC (`OrchestratorRuns`, the internal EraseSubjectRuns, with the service credential).
Dataset items captured from erased traces are emptied in place (`dataset_items_erased`,
`datasets`); theme labels and examples copied from erased notes go with them
(`theme_labels_erased`, `theme_examples_erased`).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Protocol

import grpc
import grpc.aio

from mcpd.model.v1 import query_pb2
from mcpd.orchestrator.v1 import orchestrator_service_pb2, orchestrator_service_pb2_grpc
from mcpd.runtime.errors import Unavailable
from mcpd.runtime.errors_grpc import rpc_failure_from
from mcpd.signals.queries import ErasureCounts

log = logging.getLogger("mcpd.query")


class RunErasureFigures(Protocol):
    """What the orchestrator removed from the run store for one subject."""

    @property
    def runs_erased(self) -> int: ...

    @property
    def runs_in_flight(self) -> int: ...

    @property
    def in_flight_roots(self) -> Sequence[str]: ...


class RunEraser(Protocol):
    """The orchestrator's erasure of one subject's runs."""

    async def erase_subject_runs(
        self, project: str, user_ids: Sequence[str], *, deadline_s: float | None
    ) -> RunErasureFigures:
        """Remove the subject's ended run trees; count the ones still live. `deadline_s` is what
        is left of the caller's deadline. Raises Unavailable when the orchestrator did not answer
        with what it erased."""
        ...


class OrchestratorRuns:
    """A RunEraser calling the orchestrator's internal EraseSubjectRuns over `channel`, with
    `metadata` presenting the service credential (`ServiceCredential.metadata`)."""

    def __init__(self, channel: grpc.aio.Channel, metadata: Sequence[tuple[str, str]]) -> None:
        self._stub = orchestrator_service_pb2_grpc.OrchestratorServiceStub(channel)
        self._metadata = tuple(metadata)

    async def erase_subject_runs(
        self, project: str, user_ids: Sequence[str], *, deadline_s: float | None
    ) -> RunErasureFigures:
        """Ask the orchestrator to erase the subject's runs (see `RunEraser`)."""
        request = orchestrator_service_pb2.EraseSubjectRunsRequest(
            project=project, user_ids=user_ids
        )
        call = self._stub.EraseSubjectRuns(request, metadata=self._metadata, timeout=deadline_s)
        try:
            response: orchestrator_service_pb2.EraseSubjectRunsResponse = await call
        except grpc.aio.AioRpcError as error:
            # The caller's credential was fine; whatever failed is between two services, so
            # the caller is told to retry, and the operator finds the reason in the log.
            failure = rpc_failure_from(error)
            log.error(
                "the orchestrator did not erase a subject's runs: %s: %s",
                failure.reason,
                failure.message,
                extra={"project": project, "reason": failure.reason},
            )
            raise Unavailable(
                f"the orchestrator did not erase the subject's runs ({failure.reason}); nothing "
                "was erased: send the erasure again",
                reason="RUN_ERASURE_UNAVAILABLE",
            ) from None
        return response


def erasure_result(
    project: str, counts: ErasureCounts, runs: RunErasureFigures | None
) -> query_pb2.ErasureResult:
    """The reply: per-signal counts, their total, runs and notes, and the note when needed."""
    signals = (counts.traces, counts.spans, counts.logs, counts.metrics, counts.scores)
    result = query_pb2.ErasureResult(
        project=project,
        traces=counts.traces,
        spans=counts.spans,
        logs=counts.logs,
        metrics=counts.metrics,
        scores=counts.scores,
        feedback=counts.feedback,
        deleted=sum(signals) + counts.feedback,
        aspect_notes_erased=counts.aspect_notes,
        dataset_items_erased=counts.dataset_items,
        datasets=counts.datasets,
        theme_labels_erased=counts.theme_labels,
        theme_examples_erased=counts.theme_examples,
        unmatchable_identifiers=0,
    )
    notes: list[str] = []
    if counts.deletes_pending:
        result.deletes_pending = True
        notes.append(
            "The storage backend applies these deletes in the background: the counts are "
            "what matched, and the rows leave the disk when the backend has run the deletes."
        )
    if runs is not None:
        result.runs_erased = runs.runs_erased
        result.runs_in_flight = runs.runs_in_flight
        if runs.runs_in_flight:
            roots = ", ".join(runs.in_flight_roots)
            notes.append(
                f"{runs.runs_in_flight} runs attributed to this person were left untouched "
                f"because their workflow has not ended (root runs: {roots}). Cancel them or "
                "let them end, then send the erasure again."
            )
    if notes:
        result.note = " ".join(notes)
    return result
