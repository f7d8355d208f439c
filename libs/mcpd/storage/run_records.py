"""What the run store answers that is not a spec entity.

`RunErasure` is the run store's part of an erasure request: the spec's ErasureResult carries
its counts (`runs_erased`, `runs_in_flight`) and turns `in_flight_roots` into the note that
tells an operator which run trees to cancel or wait for before sending the request again.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class RunErasure:
    """What erasing one subject did in the run store.

    `runs_erased` counts every run removed, the subject's own and the other runs of their
    trees. `runs_in_flight` counts the subject's runs left in place because some run of their
    tree has not ended, and `in_flight_roots` names those trees by root run id, sorted.
    """

    runs_erased: int = 0
    runs_in_flight: int = 0
    in_flight_roots: tuple[str, ...] = ()
