"""Every move of the latch: trips, holds, clears, acknowledgements, and thin data that never
clears a trip."""

from __future__ import annotations

import pytest

from mcpd.runtime.errors import FailedPrecondition
from services.evaluation.latch import Condition, Latched, Transition, acknowledge, after_reading

NOMINAL = Latched(Condition.NOMINAL)
FRESH = Latched()
TRIPPED = Latched(Condition.TRIPPED, 100)
ACKED = Latched(Condition.ACKNOWLEDGED, 100)


@pytest.mark.parametrize(
    ("before", "breaching", "after", "transition"),
    [
        (FRESH, True, Latched(Condition.TRIPPED, 500), Transition.TRIPPED),
        (NOMINAL, True, Latched(Condition.TRIPPED, 500), Transition.TRIPPED),
        (TRIPPED, True, TRIPPED, None),
        (ACKED, True, ACKED, None),
        (FRESH, False, NOMINAL, None),
        (NOMINAL, False, NOMINAL, None),
        (TRIPPED, False, NOMINAL, Transition.CLEARED),
        (ACKED, False, NOMINAL, Transition.CLEARED),
        (FRESH, None, FRESH, None),
        (NOMINAL, None, Latched(Condition.INSUFFICIENT), None),
        (TRIPPED, None, TRIPPED, None),
        (ACKED, None, ACKED, None),
    ],
)
def test_a_reading_moves_the_latch(
    before: Latched, breaching: bool | None, after: Latched, transition: Transition | None
) -> None:
    assert after_reading(before, breaching=breaching, now=500) == (after, transition)


def test_only_a_trip_is_acknowledged_and_it_keeps_its_time() -> None:
    assert acknowledge(TRIPPED, "monitor errors") == Latched(Condition.ACKNOWLEDGED, 100)
    assert acknowledge(ACKED, "monitor errors") == ACKED
    for latched in (NOMINAL, FRESH):
        with pytest.raises(FailedPrecondition, match="monitor errors is") as refused:
            acknowledge(latched, "monitor errors")
        assert refused.value.reason == "NOT_TRIPPED"
