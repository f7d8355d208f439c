"""Derived outcome notes: the `outcome` aspect's notes, written by the daemon with no model, one
per ended trace, in a small fixed vocabulary of sentences that cluster well (the same ending
is the same sentence, so it is one weighted point of the clustering).

- a run (its root a `workflow_run` span) that succeeded: "The workflow run succeeded.", or
  "The workflow run succeeded but took an unusual number of steps." when the divergence watch's
  measure calls its step count an outlier (`mcpd.workflows.modified_z` of at least
  `OUTLIER_Z` against its version's baseline); cancelled: "The workflow run was cancelled.";
  timed out: "The workflow run timed out.";
- a run that failed: "The workflow run failed: a step failed with a {class} error." with the
  first failed step's error class, or "The workflow run failed." when none is known; either
  ends "... on what an earlier step produced." instead when the failed step's cause chain names
  a silent producer (an ancestor that succeeded, as did every step between);
- a trace in error: "The trace ended in a {kind} error." with its first failed span's error
  kind, or "The trace ended in an error.";
- a trace that ended well: "The trace ended, but some of its steps failed." when spans failed,
  else "The trace ended without errors."

Before every pass (`passes.ThemePass`), for every project whose `outcome` aspect is enabled,
every complete trace that ended in the pass window and has no outcome note yet gets one through
ingest, with the service credential: validated, sketched and filed under the trace's entity as
any note. A note is written once: a span that arrives after it does not change it. A note's id
derives from its trace and a batch's ingest key from its notes, so a batch sent twice (a pass
that failed after ingest stored it) is stored once.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Protocol

from mcpd.model.v1 import telemetry_pb2
from mcpd.runtime.clock import Clock, epoch_nanos
from mcpd.signals.messages import timestamp_of
from mcpd.storage.aspect_records import AspectRecord
from mcpd.storage.interfaces import ThemeRecords
from mcpd.storage.theme_records import TraceEnding

__all__ = ["OUTCOME", "NoteWrites", "OutcomeNotes", "RunFacts", "outcome_sentence"]

log = logging.getLogger("mcpd.intelligence")

OUTCOME = "outcome"
_PAGE = 500
_RUN_ENDINGS = {
    "succeeded": "The workflow run succeeded.",
    "cancelled": "The workflow run was cancelled.",
    "timed_out": "The workflow run timed out.",
}


def outcome_sentence(ending: TraceEnding, *, silent: bool = False, unusual: bool = False) -> str:
    """The outcome note of a trace that ended (see the module docstring); `silent` when its
    failed step's cause chain names a silent producer, `unusual` when its step count is an
    outlier for its version."""
    known = [kind for kind in ending.error_classes if kind]
    if ending.root_kind == "workflow_run" and ending.run_status is not None:
        if ending.run_status == "succeeded" and unusual:
            return "The workflow run succeeded but took an unusual number of steps."
        if ending.run_status in _RUN_ENDINGS:
            return _RUN_ENDINGS[ending.run_status]
        if known:
            failure = f"The workflow run failed: a step failed with a {known[0]} error"
        else:
            failure = "The workflow run failed"
        return f"{failure} on what an earlier step produced." if silent else f"{failure}."
    if ending.status == "error":
        if known:
            return f"The trace ended in a {known[0]} error."
        return "The trace ended in an error."
    if ending.error_count or ending.error_classes:
        return "The trace ended, but some of its steps failed."
    return "The trace ended without errors."


class RunFacts(Protocol):
    """What the orchestrator says about a run: whether a failed step's cause chain names a
    silent producer, and which of a window's succeeded runs took an unusual number of steps."""

    async def silent_producer(self, project: str, run_id: str, step_key: str) -> bool: ...

    async def unusual_runs(self, project: str, window: tuple[int, int]) -> set[str]: ...


class NoteWrites(Protocol):
    """Where derived notes are stored: the ingest service."""

    async def write(self, notes: Sequence[telemetry_pb2.AspectNote], *, ingest_key: str) -> None:
        """Store `notes` as one batch under `ingest_key`."""
        ...


class OutcomeNotes:
    """Writes the derived outcome notes of the traces that ended (see the module docstring);
    `aspects` reads a project's catalogue."""

    def __init__(
        self,
        store: ThemeRecords,
        notes: NoteWrites,
        runs: RunFacts,
        aspects: Callable[[str], Mapping[str, AspectRecord]],
        clock: Clock,
    ) -> None:
        self._store = store
        self._notes = notes
        self._runs = runs
        self._aspects = aspects
        self._clock = clock

    async def write(self, window: tuple[int, int]) -> int:
        """Write the notes of the complete traces that ended in `window` and have none; how
        many were written."""
        written = 0
        for project in await asyncio.to_thread(self._store.trace_projects):
            written += await self._project(project, window)
        return written

    async def _project(self, project: str, ended: tuple[int, int]) -> int:
        aspect = (await asyncio.to_thread(self._aspects, project)).get(OUTCOME)
        if aspect is None or not aspect.enabled:
            return 0
        written = 0
        after: str | None = None
        unusual: set[str] | None = None
        while True:
            page = await asyncio.to_thread(
                self._store.ended_traces, project, ended, aspect=OUTCOME, after=after, limit=_PAGE
            )
            if not page:
                return written
            if unusual is None and any(ending.run_id for ending in page):
                unusual = await self._runs.unusual_runs(project, ended)
            notes = [
                self._note(
                    project,
                    aspect.version,
                    ending,
                    await self._sentence(project, ending, unusual or set()),
                )
                for ending in page
            ]
            await self._notes.write(notes, ingest_key=_ingest_key(notes))
            written += len(notes)
            after = page[-1].trace_id

    async def _sentence(self, project: str, ending: TraceEnding, unusual: set[str]) -> str:
        silent = False
        if ending.run_status == "failed" and ending.run_id and ending.failed_step:
            silent = await self._runs.silent_producer(project, ending.run_id, ending.failed_step)
        return outcome_sentence(ending, silent=silent, unusual=ending.run_id in unusual)

    def _note(
        self, project: str, version: int, ending: TraceEnding, text: str
    ) -> telemetry_pb2.AspectNote:
        note = telemetry_pb2.AspectNote(
            note_id=_note_id(ending.trace_id),
            trace_id=ending.trace_id,
            aspect=OUTCOME,
            text=text,
            definition_version=version,
            created_at=timestamp_of(epoch_nanos(self._clock.now())),
        )
        note.correlation.project = project
        return note


def _note_id(trace_id: str) -> str:
    return f"outcome-{trace_id}"


def _ingest_key(notes: Sequence[telemetry_pb2.AspectNote]) -> str:
    digest = hashlib.sha256()
    for note in notes:
        digest.update(note.note_id.encode())
        digest.update(note.text.encode())
    return f"outcome-notes-{digest.hexdigest()[:32]}"
