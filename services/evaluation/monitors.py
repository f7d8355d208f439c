"""Monitors: saved conditions the daemon evaluates on a schedule, latched between readings.

Each evaluation of an enabled monitor reads its watch over the window that ends now and is
`window_seconds` long, from the query service:

- `error_rate`: the fraction of the window's runs that failed;
- `latency_p95`: the runs' duration at the 95th percentile, in milliseconds;
- `cost`: the window's total spend;
- `trace_count`: how many runs started in the window;
- `score_mean`: the mean of the window's scores from `scorer_id` (samples: those scores);

and over the runs the orchestrator holds (`run_watches`, the window's runs being those that
ended in it or, still running, moved in it):

- `step_count_divergence`: the highest modified z-score of a run's step count against the
  usual count of its definition version (samples: the runs measured against a baseline);
- `run_repetition`: the mean of the most attempts a run made at one node (samples: the runs
  that made an attempt).

A reading with fewer than `min_samples` samples (runs, or scores for `score_mean`) is too thin to
judge, and so is one with no value (no run, so no percentile). `trace_count` is the exception:
its value is the count itself, so `min_samples` does not apply and a silent window reads 0,
which trips a monitor that compares `below`. The reading is breaching when the value is above
the threshold (`compare: above`) or below it (`below`); the latch (`latch`) decides the
condition, which is stored with the reading, so a restart resumes where it was. A trip and a
clear are announced to the monitor's webhook (`webhooks`), never waited for.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from google.protobuf.timestamp_pb2 import Timestamp

from mcpd.model.v1 import enums_pb2, evaluation_pb2
from mcpd.runtime.clock import Clock, epoch_nanos
from mcpd.storage.interfaces import WatchStates
from mcpd.storage.records import WatchState
from services.evaluation import run_watches
from services.evaluation.latch import Transition, after_reading
from services.evaluation.watching import (
    Announcer,
    RunShapeReads,
    Watched,
    WindowReads,
    condition_number,
    latched_of,
    timestamp,
)

__all__ = ["MONITOR", "Monitors"]

MONITOR = "monitor"

_NS = 1_000_000_000


@dataclass(frozen=True, slots=True)
class _Reading:
    value: float | None
    samples: int
    breaching: bool | None
    detail: str


class Monitors(Watched[evaluation_pb2.Monitor, evaluation_pb2.MonitorState]):
    """The configured monitors of every project: evaluation, listing and acknowledgement."""

    kind = MONITOR
    noun = "monitor"
    id_field = "monitor_id"
    state_type = evaluation_pb2.MonitorState
    watch_field = "monitor"
    reading_type = evaluation_pb2.MonitorReading

    def __init__(
        self,
        watches: Sequence[evaluation_pb2.Monitor],
        reads: WindowReads,
        states: WatchStates,
        announcer: Announcer,
        clock: Clock,
        *,
        runs: RunShapeReads | None = None,
    ) -> None:
        """`reads` reads the trace watches' windows, `runs` the run watches' (none: a run watch
        reads as insufficient, saying so)."""
        super().__init__(watches, reads, states, announcer, clock)
        self._runs = runs

    async def _evaluate(self, monitor: evaluation_pb2.Monitor, stored: WatchState | None) -> None:
        now = epoch_nanos(self._clock.now())
        reading = await self._read(monitor, now)
        breaching = reading.breaching
        latched, transition = after_reading(latched_of(stored), breaching=breaching, now=now)
        last = evaluation_pb2.MonitorReading(
            monitor_id=monitor.id,
            at=timestamp(now),
            samples=reading.samples,
            condition=condition_number(latched.condition),
            detail=reading.detail,
        )
        if reading.value is not None:
            last.value = reading.value
        await self._save(
            monitor, latched, last, transition, lambda made: _announcement(monitor, made, last)
        )

    async def _read(self, monitor: evaluation_pb2.Monitor, now: int) -> _Reading:
        start, end = timestamp(now - monitor.window_seconds * _NS), timestamp(now)
        if monitor.watch in _RUN_WATCHES:
            return await self._read_runs(monitor, start, end)
        if monitor.watch == enums_pb2.MONITOR_WATCH_SCORE_MEAN:
            value, samples = await self._reads.score_mean(
                monitor.project, monitor.scorer_id, start, end
            )
            return _judged(monitor, value, samples, "scores")
        summary = await self._reads.summary(monitor.project, start, end)
        runs = int(summary.trace_count)
        match monitor.watch:
            case enums_pb2.MONITOR_WATCH_TRACE_COUNT:
                return _judged(monitor, float(runs), runs, "runs", applies_min=False)
            case enums_pb2.MONITOR_WATCH_ERROR_RATE:
                value = summary.error_rate if runs else None
            case enums_pb2.MONITOR_WATCH_LATENCY_P95:
                has = runs and summary.latency.HasField("p95")
                value = summary.latency.p95 if has else None
            case enums_pb2.MONITOR_WATCH_COST:
                value = summary.total_cost
            case _:
                return _Reading(None, 0, None, "this watch is not evaluated by this daemon yet")
        return _judged(monitor, value, runs, "runs")

    async def _read_runs(
        self, monitor: evaluation_pb2.Monitor, start: Timestamp, end: Timestamp
    ) -> _Reading:
        if self._runs is None:
            return _Reading(None, 0, None, "this process reads no runs from an orchestrator")
        shapes = await self._runs.run_shapes(
            monitor.project,
            start,
            end,
            limit=run_watches.WINDOW_RUNS,
            baseline=run_watches.BASELINE_RUNS,
        )
        if monitor.watch == enums_pb2.MONITOR_WATCH_STEP_COUNT_DIVERGENCE:
            measured = run_watches.divergence(shapes)
        else:
            measured = run_watches.repetition(shapes)
        if measured.value is None:
            return _Reading(None, measured.samples, None, measured.note)  # the note says why
        judged = _judged(monitor, measured.value, measured.samples, "runs")
        return _Reading(
            judged.value, judged.samples, judged.breaching, f"{judged.detail}; {measured.note}"
        )


_RUN_WATCHES = frozenset(
    {enums_pb2.MONITOR_WATCH_STEP_COUNT_DIVERGENCE, enums_pb2.MONITOR_WATCH_RUN_REPETITION}
)


def _judged(
    monitor: evaluation_pb2.Monitor,
    value: float | None,
    samples: int,
    unit: str,
    *,
    applies_min: bool = True,
) -> _Reading:
    if value is None or (applies_min and samples < monitor.min_samples):
        detail = f"{samples} {unit} in the window, fewer than the {monitor.min_samples} needed"
        if value is None and samples >= monitor.min_samples:
            detail = f"no {unit} in the window to measure"
        return _Reading(value, samples, None, detail)
    above = monitor.compare == enums_pb2.MONITOR_COMPARE_ABOVE
    breaching = value > monitor.threshold if above else value < monitor.threshold
    side = "above" if value > monitor.threshold else "below"
    if value == monitor.threshold:
        side = "at"
    detail = f"{_watch(monitor)} {value:g} is {side} the threshold {monitor.threshold:g}"
    return _Reading(value, samples, breaching, f"{detail} ({samples} {unit})")


def _watch(monitor: evaluation_pb2.Monitor) -> str:
    name = enums_pb2.MonitorWatch.Name(monitor.watch).removeprefix("MONITOR_WATCH_").lower()
    return f"{name} of {monitor.scorer_id}" if monitor.HasField("scorer_id") else name


def _announcement(
    monitor: evaluation_pb2.Monitor,
    transition: Transition,
    reading: evaluation_pb2.MonitorReading,
) -> dict[str, object]:
    body: dict[str, object] = {
        "kind": "monitor",
        "transition": transition.value,
        "monitor_id": monitor.id,
        "name": monitor.name,
        "project": monitor.project,
        "at": reading.at.ToJsonString(),
        "samples": reading.samples,
        "detail": reading.detail,
    }
    if reading.HasField("value"):
        body["value"] = reading.value
    return body
