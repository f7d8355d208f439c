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

import asyncio
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from google.protobuf.timestamp_pb2 import Timestamp

from mcpd.model.v1 import enums_pb2, evaluation_pb2, query_pb2
from mcpd.runtime.clock import Clock, epoch_nanos
from mcpd.runtime.errors import NotFound, quoted
from mcpd.storage.interfaces import WatchStates
from mcpd.storage.records import WatchState
from services.evaluation.latch import Transition, acknowledge, after_reading
from services.evaluation.watching import (
    Announcer,
    condition_number,
    last_reading,
    latched_of,
    read_every,
    stored_state,
    timestamp,
    webhook_host,
)

__all__ = ["MONITOR", "Monitors", "WindowReads"]

MONITOR = "monitor"

log = logging.getLogger("mcpd.evaluation")
_NS = 1_000_000_000


class WindowReads(Protocol):
    """What a monitor reads over a window (the query service)."""

    async def summary(
        self, project: str, start: Timestamp, end: Timestamp
    ) -> query_pb2.AnalyticsSummary:
        """The runs started in [start, end): counts, errors, latency, cost."""
        ...

    async def score_mean(
        self, project: str, scorer_id: str, start: Timestamp, end: Timestamp
    ) -> tuple[float | None, int]:
        """The mean of the scores from `scorer_id` produced in [start, end), and their count."""
        ...


@dataclass(frozen=True, slots=True)
class _Reading:
    value: float | None
    samples: int
    breaching: bool | None
    detail: str


class Monitors:
    """The configured monitors of every project: evaluation, listing and acknowledgement."""

    def __init__(
        self,
        monitors: Sequence[evaluation_pb2.Monitor],
        reads: WindowReads,
        states: WatchStates,
        announcer: Announcer,
        clock: Clock,
    ) -> None:
        self._monitors = {monitor.id: monitor for monitor in monitors}
        self._reads = reads
        self._states = states
        self._announcer = announcer
        self._clock = clock

    async def run(self, stop: asyncio.Event, *, interval_s: float) -> None:
        """Read every enabled monitor every `interval_s` until `stop` is set."""
        await read_every(self.evaluate_all, "monitors", stop, interval_s)

    async def evaluate_all(self) -> int:
        """Read every enabled monitor once; how many were read."""
        enabled = [monitor for monitor in self._monitors.values() if monitor.enabled]
        ids = [monitor.id for monitor in enabled]
        stored = await asyncio.to_thread(self._states.watch_states, MONITOR, ids)
        for monitor in enabled:
            try:
                await self._evaluate(monitor, stored.get(monitor.id))
            except Exception:  # one monitor's failure must not stop the others' readings
                log.exception("monitor %s could not be read", monitor.id)
        return len(enabled)

    def list(self, project: str) -> list[evaluation_pb2.MonitorState]:
        """The project's monitors, in id order, each with its condition and last reading
        (blocking: from a worker thread)."""
        mine = sorted((m for m in self._monitors.values() if m.project == project), key=_id)
        stored = self._states.watch_states(MONITOR, [monitor.id for monitor in mine])
        return [_shown(monitor, stored.get(monitor.id)) for monitor in mine]

    def acknowledge(self, project: str, monitor_id: str) -> evaluation_pb2.MonitorState:
        """A person has seen the trip: tripped becomes acknowledged until it recovers
        (blocking: from a worker thread)."""
        monitor = self._monitors.get(monitor_id)
        if monitor is None or monitor.project != project:
            raise NotFound(f"no monitor {quoted(monitor_id)} in this project", field="monitor_id")
        state = self._states.watch_states(MONITOR, [monitor_id]).get(monitor_id)
        latched = acknowledge(latched_of(state), f"monitor {quoted(monitor_id)}")
        saved = stored_state(latched, last_reading(state, evaluation_pb2.MonitorReading))
        self._states.save_watch_state(MONITOR, monitor_id, saved)
        return _shown(monitor, saved)

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
        saved = stored_state(latched, last)
        await asyncio.to_thread(self._states.save_watch_state, MONITOR, monitor.id, saved)
        if transition is not None and monitor.HasField("webhook"):
            self._announcer.announce(monitor.webhook, _announcement(monitor, transition, last))

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


def _shown(
    monitor: evaluation_pb2.Monitor, stored: WatchState | None
) -> evaluation_pb2.MonitorState:
    """A monitor's state as the API shows it: its webhook reduced to the host."""
    latched = latched_of(stored)
    shown = evaluation_pb2.MonitorState(
        monitor=monitor, condition=condition_number(latched.condition)
    )
    last = last_reading(stored, evaluation_pb2.MonitorReading)
    if last is not None:
        shown.last.CopyFrom(last)
    if latched.tripped_at is not None:
        shown.tripped_at.CopyFrom(timestamp(latched.tripped_at))
    if monitor.HasField("webhook"):
        shown.monitor.webhook = webhook_host(monitor.webhook)
    return shown


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


def _id(monitor: evaluation_pb2.Monitor) -> str:
    return monitor.id
