"""Monitors: saved conditions the daemon evaluates on a schedule, latched between readings.

Each evaluation of an enabled monitor reads its watch over the window that ends now and is
`window_seconds` long, from the query service:

- `error_rate`: the fraction of the window's runs that failed;
- `latency_p95`: the runs' duration at the 95th percentile, in milliseconds;
- `cost`: the window's total spend;
- `trace_count`: how many runs started in the window;
- `score_mean`: the mean of the window's scores from `scorer_id` (samples: those scores).

A reading with fewer than `min_samples` samples (runs, or scores for `score_mean`) is too thin to
judge, and so is one with no value (no run, so no percentile). `trace_count` is the exception:
its value is the count itself, so `min_samples` does not apply and a silent window reads 0,
which trips a monitor that compares `below`. The reading is breaching when the value is above
the threshold (`compare: above`) or below it (`below`); the latch (`latch`) decides the
condition, which is stored with the reading, so a restart resumes where it was. A trip and a
clear are announced to the monitor's webhook (`webhooks`), never waited for.
"""

from __future__ import annotations

from dataclasses import dataclass

from mcpd.model.v1 import enums_pb2, evaluation_pb2
from mcpd.runtime.clock import epoch_nanos
from mcpd.storage.records import WatchState
from services.evaluation.latch import Transition, after_reading
from services.evaluation.watching import (
    Watched,
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
