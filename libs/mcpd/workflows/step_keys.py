"""Step keys and handler names.

A step attempt's `step_key` folds the enclosing construct into the node's id: a task `classify`
is `classify`; branch `issue` of parallel `refund` is `refund/issue`; item 3 of foreach
`classify` is `classify[3]`; body `check` of loop `poll` in iteration 7 is `poll[7]/check`. The
handler name a worker registers code under is the step key with every `[n]` removed.
"""

from __future__ import annotations

import hashlib
import re

__all__ = ["branch_key", "handler_name", "idempotency_key", "item_key", "iteration_key"]

_NUMBER = re.compile(r"\[\d+\]")


def branch_key(node_id: str, branch_id: str) -> str:
    """The key of one branch of a parallel node."""
    return f"{node_id}/{branch_id}"


def item_key(node_id: str, index: int) -> str:
    """The key of one item (0-based) of a foreach node."""
    return f"{node_id}[{index}]"


def iteration_key(node_id: str, iteration: int, body_id: str) -> str:
    """The key of a loop body in one iteration (0-based)."""
    return f"{node_id}[{iteration}]/{body_id}"


def handler_name(step_key: str) -> str:
    """The name a worker registers the code of this step under."""
    return _NUMBER.sub("", step_key)


def idempotency_key(run_id: str, step_key: str) -> str:
    """A key stable across every attempt of one step: lowercase hex SHA-256 of `run_id:step_key`."""
    return hashlib.sha256(f"{run_id}:{step_key}".encode()).hexdigest()
