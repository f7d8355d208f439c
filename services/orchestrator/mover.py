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

    def decide(self, act: Callable[[Moves], T]) -> Callable[[RunSnapshot], tuple[RunChanges, T]]:
        """A store transition deciding with `act` over the run's moves; it wakes the claims
        held here when it leaves an attempt offerable."""

        def decide(snapshot: RunSnapshot) -> tuple[RunChanges, T]:
            moves = Moves(snapshot, self.bodies.of(snapshot.run), self.now())
            answer = act(moves)
            if moves.offered:
                self.wakeups.notify()
            return moves.changes, answer

        return decide
