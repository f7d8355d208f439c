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
        lease_id: str | None = None,
        skip_locked: bool = False,
    ) -> T | None:
        """One transition of the run, decided by `act` (None when there is no such run, or it
        is held elsewhere with `skip_locked`)."""
        now = self.now()
        return self.store.transition(
            project,
            run_id,
            self.decide(act, now),
            now=now,
            lease_id=lease_id,
            skip_locked=skip_locked,
        )

    def decide(
        self, act: Callable[[Moves], T], now: int
    ) -> Callable[[RunSnapshot], tuple[RunChanges, T]]:
        """A store transition at `now` deciding with `act` over the run's moves; it wakes the
        claims held here when it leaves an attempt offerable."""

        def decide(snapshot: RunSnapshot) -> tuple[RunChanges, T]:
            moves = Moves(snapshot, self.bodies.of(snapshot.run), now, bodies=self.bodies)
            answer = act(moves)
            if any(member.offered for member in moves.family.values()):
                self.wakeups.notify()
            return moves.collect(), answer

        return decide
