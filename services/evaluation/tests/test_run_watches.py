"""The watches over orchestrator runs: the modified z-score and its MAD = 0 fallback checked by
hand, a version with fewer than twelve completed runs saying nothing, the value being the
highest score, repetition's mean leaving out runs that made no attempt; and each watch, as a
monitor over a real SQLite control store, a manual clock and a real webhook receiver, trips,
latches through an empty window, is acknowledged, recovers, with one POST per transition. The
runs come from a stand-in for the orchestrator (what this test isolates the monitors from)."""

from __future__ import annotations

from typing import Any

import pytest
from google.protobuf.timestamp_pb2 import Timestamp

from mcpd.model.v1 import enums_pb2
from mcpd.orchestrator.v1 import orchestrator_service_pb2 as rpc
from mcpd.runtime.clock import ManualClock
from mcpd.storage.sql.control_store import SqlControlStore
from mcpd.testing.eventually import eventually_async
from services.evaluation.monitors import Monitors
from services.evaluation.run_watches import (
    BASELINE_RUNS,
    WINDOW_RUNS,
    divergence,
    modified_z,
    repetition,
)
from services.evaluation.tests.receiver import Receiver
from services.evaluation.tests.test_monitors import Windows, _posted, _read, _Unused, monitor
from services.evaluation.webhooks import Webhooks

C = enums_pb2.MonitorCondition
SUCCEEDED = enums_pb2.RUN_STATUS_SUCCEEDED
# Twelve completed runs of `flow` v1: median 10, absolute deviations 0 0 0 1 1 1 1 2 2 2 2 5,
# so MAD 1.
USUAL = [10, 10, 10, 9, 11, 9, 11, 8, 12, 8, 12, 15]


def run(run_id: str, steps: int = 10, most: int = 1, **fields: Any) -> rpc.RunShape:
    return rpc.RunShape(
        run_id=run_id,
        definition_id=fields.pop("definition_id", "flow"),
        definition_version=fields.pop("definition_version", 1),
        status=fields.pop("status", SUCCEEDED),
        steps_used=steps,
        max_node_attempts=most,
        **fields,
    )


def shapes(
    runs: list[rpc.RunShape], baselines: dict[tuple[str, int], list[int]] | None = None
) -> rpc.GetRunShapesResponse:
    return rpc.GetRunShapesResponse(
        runs=runs,
        baselines=[
            rpc.RunStepBaseline(definition_id=d, definition_version=v, steps_used=steps)
            for (d, v), steps in (baselines or {}).items()
        ],
    )


class Runs:
    """The orchestrator's answer each window reads, set by the test."""

    def __init__(self) -> None:
        self.answer = rpc.GetRunShapesResponse()
        self.asked: list[tuple[str, int, int, int, int]] = []

    async def run_shapes(
        self, project: str, start: Timestamp, end: Timestamp, *, limit: int, baseline: int
    ) -> rpc.GetRunShapesResponse:
        self.asked.append((project, start.ToNanoseconds(), end.ToNanoseconds(), limit, baseline))
        return self.answer


def test_the_modified_z_score_against_the_median_absolute_deviation() -> None:
    assert modified_z(25, USUAL) == pytest.approx(0.6745 * 15)
    assert modified_z(7, USUAL) == pytest.approx(0.6745 * -3)
    # More than half the baseline at the median: MAD 0, taken as one step.
    assert modified_z(12, [5] * 7 + [6, 7, 40, 41, 42]) == pytest.approx(0.6745 * 7)
    assert modified_z(5, [5] * 12) == 0.0
    assert modified_z(6, [5] * 12) == pytest.approx(0.6745)


def test_divergence_reports_the_highest_score_of_the_runs_with_a_baseline() -> None:
    window = [
        run("usual", 11),
        run("runaway", 40),
        run("short", 2),
        run("young", 500, definition_version=2),  # eleven completed runs: not measured
    ]
    measured = divergence(shapes(window, {("flow", 1): USUAL, ("flow", 2): USUAL[:11]}))
    assert measured.value == pytest.approx(0.6745 * 30)
    assert measured.samples == 3
    assert measured.note == "run runaway of flow v1 took 40 steps, its version's median 10"

    thin = divergence(shapes(window[3:], {("flow", 2): USUAL[:11]}))
    assert (thin.value, thin.samples) == (None, 0)
    assert "the 12 completed runs a baseline needs" in thin.note


def test_repetition_is_the_mean_of_the_most_attempts_of_the_runs_that_made_any() -> None:
    measured = repetition(shapes([run("a", most=1), run("b", most=5), run("c", most=0)]))
    assert (measured.value, measured.samples) == (3.0, 2)
    assert measured.note == "the most: run b of flow v1, 5 attempts at one node"
    assert repetition(shapes([run("nap", most=0)])).value is None


Figures = list[rpc.RunShape]
LIFECYCLES: dict[str, tuple[str, float, Figures, Figures, float]] = {
    # watch: (compare, threshold, breaching runs, recovered runs, breaching value)
    "step_count_divergence": (
        "above",
        3.5,
        [run("usual", 11), run("runaway", 40)],
        [run("usual", 11), run("close", 13)],
        0.6745 * 30,
    ),
    "run_repetition": (
        "above",
        2.0,
        [run("a", most=1), run("loop", most=8)],
        [run("a", most=1), run("b", most=2)],
        4.5,
    ),
}


@pytest.mark.parametrize("watch", sorted(LIFECYCLES))
async def test_each_run_watch_trips_latches_is_acknowledged_and_recovers(
    control: SqlControlStore,
    clock: ManualClock,
    receiver: Receiver,
    webhooks: Webhooks,
    watch: str,
) -> None:
    compare, threshold, breaching, recovered, value = LIFECYCLES[watch]
    runs = Runs()
    configured = monitor(watch, compare, threshold, webhook=receiver.url, min_samples=2)
    monitors = Monitors([configured], Windows(), control, webhooks, clock, runs=runs)

    def window(found: Figures) -> None:
        runs.answer = shapes(found, {("flow", 1): USUAL})

    window(breaching)
    tripped = await _read(monitors, clock)
    assert (tripped.condition, tripped.last.samples) == (C.MONITOR_CONDITION_TRIPPED, 2)
    assert tripped.last.value == pytest.approx(value)
    assert tripped.last.detail.startswith(f"{watch} ")
    assert "above the threshold" in tripped.last.detail
    project, start, end, limit, baseline = runs.asked[-1]
    assert (project, end - start, limit, baseline) == (
        "p",
        300 * 1_000_000_000,
        WINDOW_RUNS,
        BASELINE_RUNS,
    )

    window([])  # an empty window: silence is not recovery
    held = await _read(monitors, clock)
    assert (held.condition, held.tripped_at) == (C.MONITOR_CONDITION_TRIPPED, tripped.tripped_at)
    assert (held.last.samples, held.last.HasField("value")) == (0, False)
    window(breaching[1:])  # one run: fewer than min_samples, not judged either
    thin = await _read(monitors, clock)
    assert thin.condition == C.MONITOR_CONDITION_TRIPPED
    assert "fewer than the 2 needed" in thin.last.detail

    assert monitors.acknowledge("p", configured.id).condition == C.MONITOR_CONDITION_ACKNOWLEDGED
    window(breaching)
    assert (await _read(monitors, clock)).condition == C.MONITOR_CONDITION_ACKNOWLEDGED
    window(recovered)
    cleared = await _read(monitors, clock)
    assert cleared.condition == C.MONITOR_CONDITION_NOMINAL
    assert not cleared.HasField("tripped_at")
    await eventually_async(lambda: _posted(receiver, 2), timeout=5, interval=0.02)
    assert [(body["transition"], body["monitor_id"]) for body in receiver.bodies] == [
        ("tripped", configured.id),
        ("cleared", configured.id),
    ]
    assert receiver.bodies[0]["value"] == pytest.approx(value)


async def test_a_version_without_a_baseline_says_nothing(
    control: SqlControlStore, clock: ManualClock
) -> None:
    runs = Runs()
    runs.answer = shapes([run("runaway", 400)], {("flow", 1): USUAL[:11]})
    divergent = monitor("step_count_divergence", "above", 3.5, min_samples=1)
    monitors = Monitors([divergent], Windows(), control, _Unused(), clock, runs=runs)
    state = await _read(monitors, clock)
    assert (state.condition, state.last.samples) == (C.MONITOR_CONDITION_INSUFFICIENT, 0)
    assert state.last.detail == (
        "none of the window's 1 run belongs to a definition version with the 12 completed runs "
        "a baseline needs"
    )


async def test_without_an_orchestrator_a_run_watch_reads_insufficient(
    control: SqlControlStore, clock: ManualClock
) -> None:
    looping = monitor("run_repetition", "above", 2.0)
    monitors = Monitors([looping], Windows(), control, _Unused(), clock)
    state = await _read(monitors, clock)
    assert state.condition == C.MONITOR_CONDITION_INSUFFICIENT
    assert state.last.detail == "this process reads no runs from an orchestrator"
