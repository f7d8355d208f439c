"""ErasureResult: what an erasure removed, and why the counts may not be the whole answer.

The trace store's counts make up `deleted`; runs (from the run store, when this daemon serves
runs) and aspect notes are reported beside it, as the spec says. Datasets are not served by
this daemon yet, so `dataset_items_erased` stays absent and `datasets` empty.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from mcpd.model.v1 import query_pb2
from mcpd.signals.queries import ErasureCounts


class RunErasureFigures(Protocol):
    """What the run store removed for one subject."""

    @property
    def runs_erased(self) -> int: ...

    @property
    def runs_in_flight(self) -> int: ...

    @property
    def in_flight_roots(self) -> Sequence[str]: ...


class RunEraser(Protocol):
    """The run store's erasure (`RunStore.erase_subject`)."""

    def erase_subject(self, project: str, user_ids: Sequence[str]) -> RunErasureFigures:
        """Remove the subject's ended run trees; count the ones still live."""
        ...


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
