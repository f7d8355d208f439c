"""Derived outcome notes: the fixed vocabulary, and the writer over a real trace store, which
notes every complete trace of the window once (ingest is the edge here: a recorder)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

import pytest

from mcpd.aspects import BUILT_INS
from mcpd.model.v1 import telemetry_pb2
from mcpd.runtime.clock import ManualClock
from mcpd.signals.rows import SpanRow
from mcpd.storage.aspect_records import AspectRecord
from mcpd.storage.interfaces import TraceStore
from mcpd.storage.theme_records import TraceEnding
from services.intelligence.outcomes import OutcomeNotes, outcome_sentence
from services.intelligence.tests.notes import PROJECT, note_rows
from tests.libs.signals.samples import span


def ending(**fields: object) -> TraceEnding:
    values: dict[str, object] = {
        "trace_id": "t1",
        "status": "ok",
        "error_count": 0,
        "ended_at": 1,
        "root_kind": "agent_run",
        "run_status": None,
        "error_classes": (),
    }
    values.update(fields)
    return TraceEnding(**values)  # type: ignore[arg-type]


RUN = {"root_kind": "workflow_run"}
FAILED_STEPS = {"error_count": 1, "error_classes": ("",)}
TIMEOUT = {"status": "error", "error_classes": ("", "TimeoutError")}
FATAL = {**RUN, "run_status": "failed", "error_classes": ("", "fatal")}


@pytest.mark.parametrize(
    ("fields", "sentence"),
    [
        ({}, "The trace ended without errors."),
        (FAILED_STEPS, "The trace ended, but some of its steps failed."),
        (TIMEOUT, "The trace ended in a TimeoutError error."),
        ({"status": "error"}, "The trace ended in an error."),
        ({**RUN, "run_status": "succeeded"}, "The workflow run succeeded."),
        ({**RUN, "run_status": "cancelled"}, "The workflow run was cancelled."),
        ({**RUN, "run_status": "timed_out"}, "The workflow run timed out."),
        (FATAL, "The workflow run failed: a step failed with a fatal error."),
        ({**RUN, "run_status": "failed"}, "The workflow run failed."),
    ],
)
def test_every_ending_has_its_sentence(fields: dict[str, object], sentence: str) -> None:
    assert outcome_sentence(ending(**fields)) == sentence


class Runs:
    """The orchestrator's answers about runs (the edge of this unit): run-2's failed step has a
    silent producer, run-3 took an unusual number of steps."""

    def __init__(self) -> None:
        self.asked: list[tuple[str, str, str]] = []

    async def silent_producer(self, project: str, run_id: str, step_key: str) -> bool:
        self.asked.append((project, run_id, step_key))
        return run_id == "run-2"

    async def unusual_runs(self, project: str, window: tuple[int, int]) -> set[str]:
        return {"run-3"}


class Recorder:
    def __init__(self) -> None:
        self.batches: list[tuple[list[telemetry_pb2.AspectNote], str]] = []

    async def write(self, notes: Sequence[telemetry_pb2.AspectNote], *, ingest_key: str) -> None:
        self.batches.append((list(notes), ingest_key))


def catalogue(*, outcome_enabled: bool) -> Mapping[str, AspectRecord]:
    return {
        definition.name: replace(definition, enabled=outcome_enabled).stored_as(PROJECT, 1, 0)
        if definition.name == "outcome"
        else definition.stored_as(PROJECT, 1, 0)
        for definition in BUILT_INS
    }


def ended_trace(trace_id: str, end_ns: int, **fields: object) -> SpanRow:
    return span(
        f"root-{trace_id}",
        trace_id=trace_id,
        is_root=True,
        entity_kind="agent",
        entity_name="support-bot",
        start_time=end_ns - 1_000,
        end_time=end_ns,
        **fields,
    )


async def test_every_complete_trace_of_the_window_is_noted_once(
    trace_store: TraceStore, clock: ManualClock
) -> None:
    batch = note_rows([])
    batch.spans.extend(
        [
            ended_trace("t-ok", 1_500),
            ended_trace("t-bad", 1_600, status="error", error={"kind": "KeyError"}),
            ended_trace("t-before", 500),
        ]
    )
    trace_store.write_batches([batch])
    ingest = Recorder()
    outcomes = OutcomeNotes(
        trace_store, ingest, Runs(), lambda project: catalogue(outcome_enabled=True), clock
    )

    assert await outcomes.write((1_000, 2_000)) == 2
    [(notes, key)] = ingest.batches
    assert [(n.note_id, n.trace_id, n.aspect, n.text, n.definition_version) for n in notes] == [
        ("outcome-t-bad", "t-bad", "outcome", "The trace ended in a KeyError error.", 1),
        ("outcome-t-ok", "t-ok", "outcome", "The trace ended without errors.", 1),
    ]
    assert notes[0].correlation.project == PROJECT
    assert key.startswith("outcome-notes-")


async def test_a_switched_off_outcome_aspect_gets_no_notes(
    trace_store: TraceStore, clock: ManualClock
) -> None:
    batch = note_rows([])
    batch.spans.append(ended_trace("t-ok", 1_500))
    trace_store.write_batches([batch])
    ingest = Recorder()
    outcomes = OutcomeNotes(
        trace_store, ingest, Runs(), lambda project: catalogue(outcome_enabled=False), clock
    )

    assert await outcomes.write((1_000, 2_000)) == 0
    assert ingest.batches == []


def run_trace(trace_id: str, run_id: str, status: str, end_ns: int) -> list[SpanRow]:
    """A run's `workflow_run` root and, when it failed, its failed step."""
    root = ended_trace(
        trace_id,
        end_ns,
        kind="workflow_run",
        run_id=run_id,
        status="error" if status == "failed" else "ok",
        attributes={"mcpd.run.status": status},
    )
    if status != "failed":
        return [root]
    step = span(
        f"step-{trace_id}",
        trace_id=trace_id,
        parent_span_id=root["span_id"],
        kind="workflow_step",
        status="error",
        start_time=end_ns - 500,
        end_time=end_ns - 100,
        attributes={"mcpd.step.key": "answer", "mcpd.step.error_class": "fatal"},
    )
    return [root, step]


async def test_runs_are_noted_with_their_cause_chain_and_step_count(
    trace_store: TraceStore, clock: ManualClock
) -> None:
    batch = note_rows([])
    for trace_id, run_id, status in [
        ("t-1", "run-1", "failed"),
        ("t-2", "run-2", "failed"),
        ("t-3", "run-3", "succeeded"),
        ("t-4", "run-4", "succeeded"),
    ]:
        batch.spans.extend(run_trace(trace_id, run_id, status, 1_500))
    trace_store.write_batches([batch])
    ingest, runs = Recorder(), Runs()
    outcomes = OutcomeNotes(
        trace_store, ingest, runs, lambda project: catalogue(outcome_enabled=True), clock
    )

    assert await outcomes.write((1_000, 2_000)) == 4
    [(notes, _)] = ingest.batches
    assert [(n.trace_id, n.text) for n in notes] == [
        ("t-1", "The workflow run failed: a step failed with a fatal error."),
        (
            "t-2",
            "The workflow run failed: a step failed with a fatal error on what an earlier step"
            " produced.",
        ),
        ("t-3", "The workflow run succeeded but took an unusual number of steps."),
        ("t-4", "The workflow run succeeded."),
    ]
    assert runs.asked == [(PROJECT, "run-1", "answer"), (PROJECT, "run-2", "answer")]
