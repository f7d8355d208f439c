"""Objectives (SLOs): the fraction of runs that must succeed over a window, and how fast the
error budget is burning, latched between readings as monitors are.

The error budget is the fraction of runs allowed to fail, `1 - objective`. Each reading counts
the runs started, and those that failed, over three windows ending now: the whole window
(`window_days`), the last hour and the last six hours. From them:

- `success_rate`: 1 - failed / runs over the whole window;
- `budget_remaining`: 1 - (failed / runs) / budget over the whole window, negative once the
  budget is overspent;
- `burn_fast` and `burn_slow`: (failed / runs) / budget over the hour and the six hours; a rate
  of 1 spends the whole budget exactly over the whole window.

The objective breaches when `burn_fast` exceeds `evaluation.slo_fast_burn` (14.4) and
`burn_slow` exceeds `evaluation.slo_slow_burn` (6) together, the multiwindow alert of the
Google SRE workbook: a brief spike raises the first alone, a slow leak the second alone, and
neither pages anyone. Either burn window holding fewer than `min_samples` runs makes the reading
too thin to judge, which never clears a trip. Trips and clears are latched, stored and
announced exactly as a monitor's (`latch`, `webhooks`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from mcpd.model.v1 import evaluation_pb2, query_pb2
from mcpd.runtime.clock import Clock, epoch_nanos
from mcpd.storage.interfaces import WatchStates
from mcpd.storage.records import WatchState
from services.evaluation.latch import Transition, after_reading
from services.evaluation.watching import (
    Announcer,
    Watched,
    WindowReads,
    condition_number,
    latched_of,
    timestamp,
)

__all__ = ["FAST_S", "SLO", "SLOW_S", "Objectives"]

SLO = "slo"
FAST_S = 3600
SLOW_S = 6 * 3600
_NS = 1_000_000_000
_DAY_S = 86_400


@dataclass(frozen=True, slots=True)
class _Window:
    runs: int
    failed: int

    def failure(self) -> float | None:
        return self.failed / self.runs if self.runs else None


class Objectives(Watched[evaluation_pb2.Slo, evaluation_pb2.SloState]):
    """The configured objectives of every project: evaluation, listing and acknowledgement."""

    kind = SLO
    noun = "objective"
    id_field = "slo_id"
    state_type = evaluation_pb2.SloState
    watch_field = "slo"
    reading_type = evaluation_pb2.SloReading

    def __init__(
        self,
        slos: Sequence[evaluation_pb2.Slo],
        reads: WindowReads,
        states: WatchStates,
        announcer: Announcer,
        clock: Clock,
        *,
        fast_burn: float,
        slow_burn: float,
    ) -> None:
        super().__init__(slos, reads, states, announcer, clock)
        self._fast_burn = fast_burn
        self._slow_burn = slow_burn

    async def _evaluate(self, slo: evaluation_pb2.Slo, stored: WatchState | None) -> None:
        now = epoch_nanos(self._clock.now())
        # The windows are read one after another, not as one snapshot: narrowest first, so a
        # run stored meanwhile can only make a wider window hold more, never the whole window
        # fewer runs than a burn window it contains.
        fast, slow, whole = [
            await self._window(slo.project, now, seconds)
            for seconds in (FAST_S, SLOW_S, slo.window_days * _DAY_S)
        ]
        reading = evaluation_pb2.SloReading(slo_id=slo.id, at=timestamp(now), samples=whole.runs)
        budget = 1 - slo.objective
        failure = whole.failure()
        if failure is not None:
            reading.success_rate = 1 - failure
            reading.budget_remaining = 1 - failure / budget
        burns = [(w.failure() or 0.0) / budget for w in (fast, slow)]
        reading.burn_fast, reading.burn_slow = burns
        thin = min(fast.runs, slow.runs) < slo.min_samples or not fast.runs or not slow.runs
        breaching = None if thin else burns[0] > self._fast_burn and burns[1] > self._slow_burn
        latched, transition = after_reading(latched_of(stored), breaching=breaching, now=now)
        reading.condition = condition_number(latched.condition)
        reading.detail = self._detail(slo, burns, fast, slow, thin)
        await self._save(
            slo, latched, reading, transition, lambda made: _announcement(slo, made, reading)
        )

    async def _window(self, project: str, now: int, seconds: int) -> _Window:
        summary: query_pb2.AnalyticsSummary = await self._reads.summary(
            project, timestamp(now - seconds * _NS), timestamp(now)
        )
        return _Window(int(summary.trace_count), int(summary.error_count))

    def _detail(
        self,
        slo: evaluation_pb2.Slo,
        burns: Sequence[float],
        fast: _Window,
        slow: _Window,
        thin: bool,
    ) -> str:
        if thin:
            return (
                f"{fast.runs} runs in the last hour and {slow.runs} in six, fewer than the "
                f"{slo.min_samples} each burn window needs"
            )
        return (
            f"burning {burns[0]:.3g}x over the last hour (trips above {self._fast_burn:g}) and "
            f"{burns[1]:.3g}x over six hours (above {self._slow_burn:g})"
        )


def _announcement(
    slo: evaluation_pb2.Slo, transition: Transition, reading: evaluation_pb2.SloReading
) -> dict[str, object]:
    return {
        "kind": "slo",
        "transition": transition.value,
        "slo_id": slo.id,
        "name": slo.name,
        "project": slo.project,
        "at": reading.at.ToJsonString(),
        "samples": reading.samples,
        "burn_fast": reading.burn_fast,
        "burn_slow": reading.burn_slow,
        "detail": reading.detail,
    }
