"""The two watches over orchestrator runs, measured from the run shapes the orchestrator answers
(`OrchestratorService.GetRunShapes`): how far a run strays from the usual step count of its
definition version (`step_count_divergence`), and how much runs repeat themselves
(`run_repetition`).

**step_count_divergence.** A definition version's usual shape is the step counts of its newest
`BASELINE_RUNS` succeeded runs; a version with fewer than `MIN_BASELINE` of them says nothing.
Each of the window's runs of a version that has one is measured by its modified z-score
(`mcpd.workflows.modified_z`; a MAD of 0 taken as one step, so a version whose count hardly ever
varies is not tripped by one run that took a step or two more, a `when` guard that went the
other way, while a runaway still is). The reading's value is
the highest score among the measured runs (signed: a run that took fewer steps than usual
scores below 0, and never trips), and its samples are the measured runs.

**run_repetition.** For each of the window's runs, the most attempts it made at any one node of
its definition (a retry and a loop iteration of a node alike; the orchestrator counts them); the
value is the mean over the runs that made any attempt at a claimable step. One means no node ran
twice. A run that made none (it has only sleeps, waits and subworkflows, or ended before its
first step) repeated nothing and is left out of both the mean and the samples.

The window holds the runs that ended in it and those still running that moved in it, so a run
that is looping or taking far more steps than usual is seen while it runs, long before it
reaches `max_steps` or fails.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass

from mcpd.orchestrator.v1 import orchestrator_service_pb2 as rpc
from mcpd.workflows import BASELINE_RUNS, MIN_BASELINE, modified_z

__all__ = [
    "BASELINE_RUNS",
    "MIN_BASELINE",
    "WINDOW_RUNS",
    "Measured",
    "divergence",
    "modified_z",
    "repetition",
]

# The most runs of one window a reading measures (the newest).
WINDOW_RUNS = 5000


@dataclass(frozen=True, slots=True)
class Measured:
    """One reading's number (None: nothing to measure), how many runs it measured, and a note
    on what it saw, for the reading's detail."""

    value: float | None
    samples: int
    note: str


def divergence(shapes: rpc.GetRunShapesResponse) -> Measured:
    """The highest modified z-score among the window's runs whose version has a baseline."""
    baselines = {
        (found.definition_id, found.definition_version): list(found.steps_used)
        for found in shapes.baselines
    }
    highest: tuple[float, rpc.RunShape, float] | None = None
    measured = 0
    for run in shapes.runs:
        baseline = baselines.get((run.definition_id, run.definition_version), [])
        if len(baseline) < MIN_BASELINE:
            continue
        measured += 1
        score = modified_z(run.steps_used, baseline)
        if highest is None or score > highest[0]:
            highest = (score, run, statistics.median(baseline))
    if highest is None:
        note = (
            f"none of the window's {_runs(len(shapes.runs))} belongs to a definition version "
            f"with the {MIN_BASELINE} completed runs a baseline needs"
        )
        return Measured(None, 0, note + _truncated(shapes))
    score, run, median = highest
    note = (
        f"run {run.run_id} of {run.definition_id} v{run.definition_version} took "
        f"{run.steps_used} steps, its version's median {median:g}"
    )
    return Measured(score, measured, note + _truncated(shapes))


def repetition(shapes: rpc.GetRunShapesResponse) -> Measured:
    """The mean, over the window's runs that made an attempt, of the most attempts each made at
    one node."""
    most = [run for run in shapes.runs if run.max_node_attempts > 0]
    if not most:
        return Measured(None, 0, "no run in the window made an attempt" + _truncated(shapes))
    top = max(most, key=lambda run: run.max_node_attempts)
    value = sum(run.max_node_attempts for run in most) / len(most)
    note = (
        f"the most: run {top.run_id} of {top.definition_id} v{top.definition_version}, "
        f"{top.max_node_attempts} attempts at one node"
    )
    return Measured(value, len(most), note + _truncated(shapes))


def _runs(count: int) -> str:
    return "1 run" if count == 1 else f"{count} runs"


def _truncated(shapes: rpc.GetRunShapesResponse) -> str:
    return f"; the newest {len(shapes.runs)} runs of a busier window" if shapes.truncated else ""
