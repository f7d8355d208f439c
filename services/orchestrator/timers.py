"""The timer tick: every deadline is a `timers` row, and each firing is one transition of its
run, decided again from what the run's lock shows (a timer another replica fired, or a lease a
heartbeat renewed, is no longer due and does nothing).

- `sleep`: a `sleep` or `sleep_until` node has waited long enough: it ends `succeeded`.
- `retry`: writes the next attempt as pending (or, for an `unservable` attempt already pending,
  lets claims see it again).
- `lease_expiry`: a held attempt whose lease lapsed becomes `orphaned`, with a reclaim window
  one lease long.
- `reclaim`: the window closed with no contact: the attempt returns to pending under
  `at_least_once` or when it never started; under `at_most_once` after `started` the run fails.
- `step_timeout`: the live attempt is `timed_out`; retried while attempts remain, like a
  retryable failure.
- `wait_timeout`: a wait_event's `timeout_ms` passed with no event: its `on_timeout` applies.
- `run_timeout`: the run ends `timed_out`.

The tick looks for due timers every `TICK_S`, so a timer fires within that of its due time, and
moves each one's run in its own transaction. On PostgreSQL every orchestrator process ticks
(the run lock, taken with SKIP LOCKED, shares the work); on SQLite one process does.
"""

from __future__ import annotations

import asyncio
import logging
from contextlib import suppress
from functools import partial

from mcpd.storage.run_records import AttemptRow, TimerRow
from services.orchestrator.bodies import step_at
from services.orchestrator.constructs import LIVE, retry_attempt, time_out_wait
from services.orchestrator.leases import backoff_ms
from services.orchestrator.mover import Mover
from services.orchestrator.walk import Moves, step_error

__all__ = ["TICK_S", "Timers"]

log = logging.getLogger("mcpd.orchestrator")

TICK_S = 0.05
BATCH = 200
_NS_PER_MS = 1_000_000


class Timers:
    """Firing the timers that have come due."""

    def __init__(self, mover: Mover) -> None:
        self._mover = mover
        self._store = mover.store

    async def run(self, stop: asyncio.Event) -> None:
        """Tick until `stop` is set; a failed tick is logged and the next one tries again."""
        while not stop.is_set():
            try:
                await asyncio.to_thread(self.fire_due)
            except Exception:
                log.exception("the timer tick failed; trying again")
            with suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), timeout=TICK_S)

    def fire_due(self) -> int:
        """Fire every timer due now, each in a transition of its run; how many were due."""
        now = self._mover.now()
        due = self._store.due_timers(now=now, limit=BATCH)
        for project, timer in due:
            fire = partial(self._fire_if_due, timer=timer)
            self._mover.move(project, timer["run_id"], fire, skip_locked=True)
        return len(due)

    def _fire_if_due(self, moves: Moves, *, timer: TimerRow) -> None:
        held = moves.timers.get((timer["kind"], timer["step_key"]))
        # Gone or moved since it was found: another firing or a renewal got there first.
        if held is not None and held["due_at"] <= moves.now and moves.status == "running":
            moves.clear_timer(timer["kind"], timer["step_key"])
            self._fire(moves, held)

    def _fire(self, moves: Moves, timer: TimerRow) -> None:
        kind, step_key, number = timer["kind"], timer["step_key"], timer["attempt"]
        if kind == "run_timeout":
            moves.end_run("timed_out", error="run_timeout_ms passed")
            return
        if kind == "wait_timeout":
            if step_key in moves.waits:
                time_out_wait(moves, step_key)
                moves.advance()
            return
        row = None if number is None else moves.attempt(step_key, number)
        if kind == "retry":
            if row is None and number is not None:
                retry_attempt(moves, step_key, number)
            else:
                # An unservable attempt waiting out its lease length: offerable again.
                moves.offered = True
            return
        if row is None:
            return
        if kind == "sleep" and row["status"] == "pending":
            moves.update_attempt(row, status="succeeded", ended_at=moves.now)
            moves.advance()
        elif kind == "lease_expiry" and row["status"] in ("leased", "started"):
            until = moves.now + self._mover.lease_ttl_ns
            moves.update_attempt(row, status="orphaned", orphaned_at=moves.now, reclaim_until=until)
            moves.set_timer("reclaim", step_key, number, until)
        elif kind == "reclaim" and row["status"] == "orphaned":
            self._reclaim(moves, row)
        elif kind == "step_timeout" and row["status"] in LIVE:
            self._time_out(moves, row)

    def _reclaim(self, moves: Moves, row: AttemptRow) -> None:
        if row["effect"] == "at_most_once" and row["started_at"] is not None:
            moves.end_run(
                "failed",
                error=f"step {row['step_key']} lost its lease after it started, and it is "
                "at_most_once: its body may have run",
            )
            return
        moves.update_attempt(
            row,
            status="pending",
            lease_owner=None,
            lease_id=None,
            lease_until=None,
            reclaim_until=None,
        )

    def _time_out(self, moves: Moves, row: AttemptRow) -> None:
        step_key, number = row["step_key"], row["attempt"]
        node = step_at(moves.body, step_key).step
        for kind in ("lease_expiry", "reclaim"):
            moves.clear_timer(kind, step_key)
        message = f"step_timeout_ms {node['step_timeout_ms']} passed"
        left = row["attempts_left"] or 0
        moves.event(
            "step_failed",
            {
                "step_key": step_key,
                "attempt": number,
                "class": "retryable",
                "message": message,
                "attempts_left": left,
            },
        )
        moves.update_attempt(
            row,
            status="timed_out",
            error=step_error("retryable", message),
            lease_owner=None,
            lease_id=None,
            lease_until=None,
            ended_at=moves.now,
        )
        if left > 0:
            due = moves.now + backoff_ms(node, number) * _NS_PER_MS
            moves.set_timer("retry", step_key, number + 1, due)
        moves.advance()
