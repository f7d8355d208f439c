"""Monitors over a real SQLite control store, a manual clock and a real webhook receiver: each
trace watch trips, latches, is acknowledged, recovers and stays tripped through an empty
window; `trace_count` trips on a silent window whatever `min_samples` says; the condition
survives a restart; the receiver sees exactly one POST per transition. The windows' figures
come from a stand-in for the query service (what this test isolates the monitors from)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from google.protobuf.timestamp_pb2 import Timestamp

from mcpd.model.v1 import enums_pb2, evaluation_pb2, query_pb2
from mcpd.runtime.clock import ManualClock
from mcpd.runtime.errors import FailedPrecondition, NotFound
from mcpd.storage.sql.control_store import SqlControlStore
from mcpd.testing.eventually import eventually_async
from services.evaluation.monitors import Monitors
from services.evaluation.tests.receiver import Receiver
from services.evaluation.webhooks import Webhooks

C = enums_pb2.MonitorCondition


class Windows:
    """The figures each window reads, set by the test."""

    def __init__(self) -> None:
        self.runs = 0
        self.error_rate = 0.0
        self.p95: float | None = None
        self.cost = 0.0
        self.scores: list[float] = []
        self.asked: list[tuple[str, int, int]] = []

    async def summary(
        self, project: str, start: Timestamp, end: Timestamp
    ) -> query_pb2.AnalyticsSummary:
        self.asked.append((project, start.ToNanoseconds(), end.ToNanoseconds()))
        found = query_pb2.AnalyticsSummary(
            trace_count=self.runs, error_rate=self.error_rate, total_cost=self.cost
        )
        if self.p95 is not None:
            found.latency.p95 = self.p95
        return found

    async def score_mean(
        self, project: str, scorer_id: str, start: Timestamp, end: Timestamp
    ) -> tuple[float | None, int]:
        mean = sum(self.scores) / len(self.scores) if self.scores else None
        return mean, len(self.scores)


def monitor(watch: str, compare: str, threshold: float, **fields: Any) -> evaluation_pb2.Monitor:
    return evaluation_pb2.Monitor(
        id=f"{watch}-{compare}",
        name=f"{watch} {compare} {threshold}",
        project="p",
        watch=enums_pb2.MonitorWatch.Value(f"MONITOR_WATCH_{watch.upper()}"),
        compare=enums_pb2.MonitorCompare.Value(f"MONITOR_COMPARE_{compare.upper()}"),
        threshold=threshold,
        window_seconds=300,
        min_samples=fields.pop("min_samples", 5),
        enabled=fields.pop("enabled", True),
        **fields,
    )


async def _read(monitors: Monitors, clock: ManualClock) -> evaluation_pb2.MonitorState:
    clock.advance(timedelta(minutes=1))
    await monitors.evaluate_all()
    (state,) = monitors.list("p")
    return state


async def test_a_trip_latches_until_the_number_recovers(
    control: SqlControlStore, clock: ManualClock, receiver: Receiver, webhooks: Webhooks
) -> None:
    windows = Windows()
    errors = monitor("error_rate", "above", 0.2, webhook=receiver.url)
    monitors = Monitors([errors], windows, control, webhooks, clock)
    assert monitors.list("p")[0].condition == C.MONITOR_CONDITION_INSUFFICIENT

    windows.runs, windows.error_rate = 3, 1.0  # below min_samples: not judged
    state = await _read(monitors, clock)
    assert (state.condition, state.last.samples, state.last.value) == (
        C.MONITOR_CONDITION_INSUFFICIENT,
        3,
        1.0,
    )
    assert "fewer than the 5 needed" in state.last.detail

    windows.runs, windows.error_rate = 10, 0.5
    tripped = await _read(monitors, clock)
    assert tripped.condition == C.MONITOR_CONDITION_TRIPPED
    assert tripped.tripped_at == tripped.last.at
    assert tripped.last.detail == "error_rate 0.5 is above the threshold 0.2 (10 runs)"
    assert tripped.monitor.webhook == receiver.host  # the API shows the host alone
    await eventually_async(lambda: _posted(receiver, 1), timeout=5, interval=0.02)

    windows.runs = 0  # an empty window: silence is not recovery
    held = await _read(monitors, clock)
    assert (held.condition, held.tripped_at) == (C.MONITOR_CONDITION_TRIPPED, tripped.tripped_at)
    assert held.last.samples == 0
    assert not held.last.HasField("value")

    acknowledged = monitors.acknowledge("p", errors.id)
    assert acknowledged.condition == C.MONITOR_CONDITION_ACKNOWLEDGED
    windows.runs, windows.error_rate = 10, 0.3
    still = await _read(monitors, clock)
    assert still.condition == C.MONITOR_CONDITION_ACKNOWLEDGED

    windows.error_rate = 0.1
    cleared = await _read(monitors, clock)
    assert cleared.condition == C.MONITOR_CONDITION_NOMINAL
    assert not cleared.HasField("tripped_at")
    await eventually_async(lambda: _posted(receiver, 2), timeout=5, interval=0.02)
    assert [(b["transition"], b["monitor_id"], b["samples"]) for b in receiver.bodies] == [
        ("tripped", "error_rate-above", 10),
        ("cleared", "error_rate-above", 10),
    ]
    assert receiver.bodies[0]["value"] == 0.5
    assert receiver.bodies[1]["detail"] == "error_rate 0.1 is below the threshold 0.2 (10 runs)"


async def test_a_silent_window_trips_a_trace_count_below_whatever_min_samples_says(
    control: SqlControlStore, clock: ManualClock
) -> None:
    windows = Windows()
    silent = monitor("trace_count", "below", 1, min_samples=50)
    monitors = Monitors([silent], windows, control, _Unused(), clock)
    state = await _read(monitors, clock)
    assert (state.condition, state.last.value, state.last.samples) == (
        C.MONITOR_CONDITION_TRIPPED,
        0.0,
        0,
    )
    windows.runs = 7
    assert (await _read(monitors, clock)).condition == C.MONITOR_CONDITION_NOMINAL


Figures = dict[str, Any]
LIFECYCLES: dict[str, tuple[str, float, Figures, Figures, Figures, float]] = {
    # watch: (compare, threshold, breaching, too thin or silent, recovered, breaching value)
    "error_rate": (
        "above",
        0.2,
        {"runs": 10, "error_rate": 0.5},
        {"runs": 0},
        {"runs": 10, "error_rate": 0.1},
        0.5,
    ),
    "latency_p95": (
        "above",
        2000.0,
        {"runs": 9, "p95": 3500.0},
        {"runs": 0, "p95": None},
        {"runs": 9, "p95": 800.0},
        3500.0,
    ),
    "cost": ("above", 1.0, {"runs": 9, "cost": 2.5}, {"runs": 0}, {"runs": 9, "cost": 0.5}, 2.5),
    "score_mean": ("below", 0.8, {"scores": [0.5] * 6}, {"scores": []}, {"scores": [0.9] * 6}, 0.5),
    # A silent window is no thin reading for trace_count: it reads 0, still below.
    "trace_count": ("below", 5.0, {"runs": 2}, {"runs": 0}, {"runs": 9}, 2.0),
}


@pytest.mark.parametrize("watch", sorted(LIFECYCLES))
async def test_every_watch_trips_latches_is_acknowledged_and_recovers(
    control: SqlControlStore,
    clock: ManualClock,
    receiver: Receiver,
    webhooks: Webhooks,
    watch: str,
) -> None:
    compare, threshold, breaching, thin, recovered, value = LIFECYCLES[watch]
    windows = Windows()
    extra = {"scorer_id": "contains"} if watch == "score_mean" else {}
    configured = monitor(watch, compare, threshold, webhook=receiver.url, **extra)
    monitors = Monitors([configured], windows, control, webhooks, clock)

    def figures(values: dict[str, Any]) -> None:
        for name, figure in values.items():
            setattr(windows, name, figure)

    figures(breaching)
    tripped = await _read(monitors, clock)
    assert (tripped.condition, tripped.last.value) == (C.MONITOR_CONDITION_TRIPPED, value)
    if windows.asked:
        project, start, end = windows.asked[-1]
        assert (project, end - start) == ("p", 300 * 1_000_000_000)
    figures(thin)
    held = await _read(monitors, clock)
    assert (held.condition, held.tripped_at) == (C.MONITOR_CONDITION_TRIPPED, tripped.tripped_at)
    assert monitors.acknowledge("p", configured.id).condition == C.MONITOR_CONDITION_ACKNOWLEDGED
    figures(breaching)
    assert (await _read(monitors, clock)).condition == C.MONITOR_CONDITION_ACKNOWLEDGED
    figures(recovered)
    assert (await _read(monitors, clock)).condition == C.MONITOR_CONDITION_NOMINAL
    await eventually_async(lambda: _posted(receiver, 2), timeout=5, interval=0.02)
    assert [body["transition"] for body in receiver.bodies] == ["tripped", "cleared"]


async def test_the_condition_survives_a_restart_and_disabled_monitors_are_not_read(
    control: SqlControlStore, clock: ManualClock
) -> None:
    windows = Windows()
    windows.runs, windows.error_rate = 10, 0.9
    errors = monitor("error_rate", "above", 0.2)
    off = monitor("cost", "above", 0.0, enabled=False)
    first = Monitors([errors, off], windows, control, _Unused(), clock)
    clock.advance(timedelta(minutes=1))
    assert await first.evaluate_all() == 1
    tripped_at = first.list("p")[1].tripped_at

    again = Monitors([errors, off], windows, control, _Unused(), clock)
    states = {state.monitor.id: state for state in again.list("p")}
    assert states["error_rate-above"].condition == C.MONITOR_CONDITION_TRIPPED
    assert states["error_rate-above"].tripped_at == tripped_at
    assert states["cost-above"].condition == C.MONITOR_CONDITION_INSUFFICIENT
    assert not states["cost-above"].HasField("last")


async def test_acknowledging_names_what_it_cannot(
    control: SqlControlStore, clock: ManualClock
) -> None:
    monitors = Monitors([monitor("cost", "above", 1.0)], Windows(), control, _Unused(), clock)
    with pytest.raises(NotFound) as missing:
        monitors.acknowledge("p", "nope")
    assert missing.value.field == "monitor_id"
    with pytest.raises(NotFound):
        monitors.acknowledge("other-project", "cost-above")
    with pytest.raises(FailedPrecondition, match="insufficient"):
        monitors.acknowledge("p", "cost-above")


def _posted(receiver: Receiver, count: int) -> None:
    assert len(receiver.bodies) == count


class _Unused:
    """An announcer for monitors without a webhook: never called."""

    def announce(self, url: str, body: dict[str, object]) -> None:
        raise AssertionError("no webhook is configured")
