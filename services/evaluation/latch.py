"""The latch: where a monitor's (or an objective's) condition goes from one reading to the next.

A reading is breaching, within its threshold, or too thin to judge (None). The rules are the
spec's MonitorCondition:

- a breach trips a nominal or insufficient condition (a `tripped` transition, `tripped_at` set),
  and leaves a tripped or an acknowledged one as it is: tripped stays tripped until the number
  recovers;
- a reading within the threshold makes the condition nominal, clearing a tripped or an
  acknowledged one (a `cleared` transition): acknowledged returns to nominal on its own;
- too little data never clears a trip (silence is not recovery); otherwise it is insufficient,
  which is also the condition before the first reading;
- only a tripped condition can be acknowledged; acknowledging an acknowledged one changes
  nothing.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from mcpd.runtime.errors import FailedPrecondition

__all__ = ["Condition", "Latched", "Transition", "acknowledge", "after_reading"]


class Condition(enum.StrEnum):
    NOMINAL = "nominal"
    TRIPPED = "tripped"
    ACKNOWLEDGED = "acknowledged"
    INSUFFICIENT = "insufficient"


class Transition(enum.StrEnum):
    TRIPPED = "tripped"
    CLEARED = "cleared"


_BREACHED = frozenset({Condition.TRIPPED, Condition.ACKNOWLEDGED})


@dataclass(frozen=True, slots=True)
class Latched:
    """A condition, and since when it has been tripped (ns; None while it is not)."""

    condition: Condition = Condition.INSUFFICIENT
    tripped_at: int | None = None


def after_reading(
    latched: Latched, *, breaching: bool | None, now: int
) -> tuple[Latched, Transition | None]:
    """The condition after a reading (`breaching` None: too little data), and the transition
    it made, if any (see the module docstring)."""
    if breaching is None:
        if latched.condition in _BREACHED:
            return latched, None
        return Latched(Condition.INSUFFICIENT), None
    if breaching:
        if latched.condition in _BREACHED:
            return latched, None
        return Latched(Condition.TRIPPED, now), Transition.TRIPPED
    if latched.condition in _BREACHED:
        return Latched(Condition.NOMINAL), Transition.CLEARED
    return Latched(Condition.NOMINAL), None


def acknowledge(latched: Latched, what: str) -> Latched:
    """A person has seen the trip of `what` (named in the refusal of anything else)."""
    if latched.condition is Condition.TRIPPED:
        return Latched(Condition.ACKNOWLEDGED, latched.tripped_at)
    if latched.condition is Condition.ACKNOWLEDGED:
        return latched
    raise FailedPrecondition(
        f"{what} is {latched.condition.value}: only a tripped condition can be acknowledged",
        reason="NOT_TRIPPED",
    )
