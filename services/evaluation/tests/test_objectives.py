"""Objectives over a real SQLite control store, a manual clock and a real webhook receiver:
success rate, budget and both burn rates from the windows' counts; a trip only when both burn
windows exceed their rates together; min_samples per burn window; latching through a thin
window; acknowledgement; one POST per transition."""

from __future__ import annotations

from datetime import timedelta

import pytest
from google.protobuf.timestamp_pb2 import Timestamp

from mcpd.model.v1 import enums_pb2, evaluation_pb2, query_pb2
from mcpd.runtime.clock import ManualClock
from mcpd.runtime.errors import FailedPrecondition, NotFound
from mcpd.storage.sql.control_store import SqlControlStore
from mcpd.testing.eventually import eventually_async
from services.evaluation.objectives import FAST_S, SLOW_S, Objectives
from services.evaluation.tests.receiver import Receiver
from services.evaluation.webhooks import Webhooks

C = enums_pb2.MonitorCondition
WHOLE_S = 30 * 86_400


class Windows:
    """(runs, failed) for each window length in seconds, set by the test."""

    def __init__(self) -> None:
        self.counts: dict[int, tuple[int, int]] = {}

    async def summary(
        self, project: str, start: Timestamp, end: Timestamp
    ) -> query_pb2.AnalyticsSummary:
        seconds = (end.ToNanoseconds() - start.ToNanoseconds()) // 1_000_000_000
        runs, failed = self.counts.get(seconds, (0, 0))
        return query_pb2.AnalyticsSummary(trace_count=runs, error_count=failed)

    async def score_mean(
        self, project: str, scorer_id: str, start: Timestamp, end: Timestamp
    ) -> tuple[float | None, int]:
        raise AssertionError("objectives read no scores")

    def set(self, whole: tuple[int, int], slow: tuple[int, int], fast: tuple[int, int]) -> None:
        self.counts = {WHOLE_S: whole, SLOW_S: slow, FAST_S: fast}


def slo(**fields: object) -> evaluation_pb2.Slo:
    made = evaluation_pb2.Slo(
        id="answers",
        name="Answers",
        project="p",
        objective=0.99,
        window_days=30,
        min_samples=10,
        enabled=True,
    )
    for name, value in fields.items():
        setattr(made, name, value)
    return made


def objectives(
    slos: list[evaluation_pb2.Slo], windows: Windows, control: SqlControlStore, clock: ManualClock
) -> Objectives:
    return Objectives(
        slos, windows, control, Webhooks(first_delay_s=0.01), clock, fast_burn=14.4, slow_burn=6
    )


async def _read(made: Objectives, clock: ManualClock) -> evaluation_pb2.SloState:
    clock.advance(timedelta(minutes=1))
    await made.evaluate_all()
    (state,) = made.list("p")
    return state


async def test_the_reading_is_worked_out_from_the_windows(
    control: SqlControlStore, clock: ManualClock
) -> None:
    windows = Windows()
    # Budget 1 %: 30 failed of 1,000 over 30 days is 3 % (300 % of the budget spent); 2 of 100
    # over six hours burns at 2x; 20 of 100 in the hour at 20x.
    windows.set(whole=(1000, 30), slow=(100, 2), fast=(100, 20))
    state = await _read(objectives([slo()], windows, control, clock), clock)
    last = state.last
    assert last.success_rate == pytest.approx(0.97)
    assert last.budget_remaining == pytest.approx(-2.0)
    assert last.burn_fast == pytest.approx(20.0)
    assert last.burn_slow == pytest.approx(2.0)
    assert last.samples == 1000
    # The hour burns past 14.4, but six hours do not pass 6: a spike, not a trip.
    assert state.condition == C.MONITOR_CONDITION_NOMINAL
    assert last.detail == (
        "burning 20x over the last hour (trips above 14.4) and 2x over six hours (above 6)"
    )


async def test_both_windows_burning_trip_and_the_latch_holds(
    control: SqlControlStore, clock: ManualClock, receiver: Receiver, webhooks: Webhooks
) -> None:
    windows = Windows()
    made = Objectives(
        [slo(webhook=receiver.url)], windows, control, webhooks, clock, fast_burn=14.4, slow_burn=6
    )
    windows.set(whole=(1000, 50), slow=(200, 16), fast=(50, 8))  # 16x and 8x
    tripped = await _read(made, clock)
    assert tripped.condition == C.MONITOR_CONDITION_TRIPPED
    assert tripped.tripped_at == tripped.last.at
    assert tripped.slo.webhook == receiver.host

    windows.set(whole=(1000, 50), slow=(200, 16), fast=(5, 5))  # the hour is thin
    held = await _read(made, clock)
    assert (held.condition, held.tripped_at) == (C.MONITOR_CONDITION_TRIPPED, tripped.tripped_at)
    assert "fewer than the 10 each burn window needs" in held.last.detail

    assert made.acknowledge("p", "answers").condition == C.MONITOR_CONDITION_ACKNOWLEDGED
    windows.set(whole=(1000, 50), slow=(200, 16), fast=(50, 8))
    assert (await _read(made, clock)).condition == C.MONITOR_CONDITION_ACKNOWLEDGED

    windows.set(whole=(1000, 50), slow=(200, 16), fast=(50, 1))  # the hour recovered: 2x
    cleared = await _read(made, clock)
    assert cleared.condition == C.MONITOR_CONDITION_NOMINAL
    assert not cleared.HasField("tripped_at")

    def posted() -> list[tuple[str, str]]:
        found = [(body["transition"], body["slo_id"]) for body in receiver.bodies]
        assert len(found) == 2
        return found

    assert await eventually_async(posted, timeout=5, interval=0.02) == [
        ("tripped", "answers"),
        ("cleared", "answers"),
    ]
    assert receiver.bodies[0]["burn_fast"] == pytest.approx(16.0)


async def test_a_quiet_objective_is_insufficient_and_acknowledging_needs_a_trip(
    control: SqlControlStore, clock: ManualClock
) -> None:
    made = objectives([slo(), slo(id="off", enabled=False)], Windows(), control, clock)
    clock.advance(timedelta(minutes=1))
    assert await made.evaluate_all() == 1
    states = {state.slo.id: state for state in made.list("p")}
    quiet = states["answers"]
    assert quiet.condition == C.MONITOR_CONDITION_INSUFFICIENT
    assert not quiet.last.HasField("success_rate")
    assert not states["off"].HasField("last")
    with pytest.raises(FailedPrecondition):
        made.acknowledge("p", "answers")
    with pytest.raises(NotFound) as missing:
        made.acknowledge("other", "answers")
    assert missing.value.field == "slo_id"
