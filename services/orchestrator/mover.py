"""What every transition of a run shares: the run store, the pinned definition bodies, the
clock, the lease length, and the wakeups of claims held in this process."""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol, TypeVar

from mcpd.runtime.clock import Clock, epoch_nanos
from mcpd.storage.interfaces import DefinitionReads, RunTransitions
from mcpd.storage.run_records import RunChanges, RunSnapshot
from services.orchestrator.bodies import Bodies
from services.orchestrator.wakeups import Wakeups
from services.orchestrator.walk import Moves

__all__ = ["Mover", "MoverStore"]

T = TypeVar("T")
_NS_PER_MS = 1_000_000


class MoverStore(DefinitionReads, RunTransitions, Protocol):
    """What transitions need of the run store."""


class Mover:
    """Transitions of runs over one store and clock."""

    def __init__(
        self, store: MoverStore, clock: Clock, wakeups: Wakeups, *, lease_ttl_ms: int
    ) -> None:
        self.store = store
        self.bodies = Bodies(store)
        self.clock = clock
        self.wakeups = wakeups
        self.lease_ttl_ns = lease_ttl_ms * _NS_PER_MS

    def now(self) -> int:
        return epoch_nanos(self.clock.now())

    def move(
        self,
        project: str,
        run_id: str,
        act: Callable[[Moves], T],
        *,
        skip_locked: bool = False,
    ) -> T | None:
        """One transition of the run, decided by `act` (None when there is no such run, or it
        is held elsewhere with `skip_locked`)."""
        now = self.now()
        offered: list[bool] = []
        decide = self.decide(act, now, offered)
        answer = self.store.transition(project, run_id, decide, now=now, skip_locked=skip_locked)
        self.wake_if(offered)
        return answer

    def move_lease(self, project: str, lease_id: str, act: Callable[[Moves], T]) -> T | None:
        """One transition of the run the lease belongs to, decided by `act` with the lease in
        its moves (None when there is no such lease)."""
        now = self.now()
        offered: list[bool] = []
        decide = self.decide(act, now, offered)
        answer = self.store.lease_transition(project, lease_id, decide, now=now)
        self.wake_if(offered)
        return answer

    def claim(
        self,
        project: str,
        *,
        run_id: str | None,
        limit: int,
        act: Callable[[list[tuple[str, int]]], Callable[[Moves], T]],
    ) -> list[T | None]:
        """One transaction that reads up to `limit` offerable attempts (of `run_id` alone when
        given) and moves each of their runs by `act(its [(step_key, attempt)])`, skipping runs
        whose tree another transaction holds."""
        now = self.now()
        offered: list[bool] = []
        answers = self.store.claim_each(
            project,
            run_id=run_id,
            limit=limit,
            decide=lambda wanted: self.decide(act(wanted), now, offered),
            now=now,
        )
        self.wake_if(offered)
        return answers

    def decide(
        self, act: Callable[[Moves], T], now: int, offered: list[bool]
    ) -> Callable[[RunSnapshot], tuple[RunChanges, T]]:
        """A store transition at `now` deciding with `act` over the run's moves; it records in
        `offered` whether it left an attempt offerable (for `wake_if`, once it committed)."""

        def decide(snapshot: RunSnapshot) -> tuple[RunChanges, T]:
            moves = Moves(snapshot, self.bodies.of(snapshot.run), now, bodies=self.bodies)
            answer = act(moves)
            if any(member.offered for member in moves.family.values()):
                offered.append(True)
            return moves.collect(), answer

        return decide

    def wake_if(self, offered: list[bool]) -> None:
        """Wake the claims held here when a committed transition left work offerable (woken
        before the commit, a claim would look, see nothing yet, and wait again)."""
        if offered:
            self.wakeups.notify()
