"""Sampling: which traces a project keeps (spec: SamplingKind, `Project.sampling`).

A project's `sampling` document is a JSON object:

    {"kind": "always"}                                   the default, also when absent
    {"kind": "never"}
    {"kind": "ratio", "rate": 0.25}
    {"kind": "deterministic", "rate": 0.25}
    {"kind": "tail", "rate": 0.1, "slow_ms": 10000, "max_wait_s": 60, "settle_s": 2}

`rate` (0 to 1) is required by ratio, deterministic and tail; `slow_ms` (default 10000),
`max_wait_s` (default 60) and `settle_s` (default 2) belong to tail only.

Head decisions (`decide`) are made per span as it arrives, and always agree within a trace:

* deterministic: the OpenTelemetry TraceIdRatioBased rule, keep when the trace id's lower 64
  bits are below `round(rate * 2**64)`. Every replica, and every OpenTelemetry SDK configured
  with the same rate, keeps the same traces without coordinating.
* ratio: a random draw, made on a trace's first span and remembered (a bounded memory of
  `MEMORY_SIZE` trace ids, shared by every policy in the process so a policy reloaded from
  the control store keeps its decisions). A trace is never half-recorded within one process;
  across replicas, or for a trace outliving the memory, use deterministic.

Tail decisions (`tail_verdict`) wait for the trace: None while its root span has not ended,
or ended less than `settle_s` ago (stragglers are still arriving), unless `max_wait_s` has
passed since its first span was received; then keep every trace with an error, every trace
whose root ran for at least `slow_ms`, and the deterministic `rate` share of the rest. A root
that never ended by `max_wait_s` counts as running until now. `remember` and `decided` keep the
verdict, so spans arriving after it follow it.

Root times are the producer's clock and `now_ns` is the server's: a producer clock far behind
shortens the settle time, one far ahead lengthens it up to `max_wait_s`.
"""

from __future__ import annotations

import hashlib
import math
import random
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Final

from mcpd.runtime.errors import InvalidArgument
from mcpd.signals.batch import HeldTrace

__all__ = ["MEMORY_SIZE", "DecisionMemory", "SamplingKind", "SamplingPolicy", "keep_by_trace_id"]

MEMORY_SIZE: Final = 100_000
DEFAULT_SLOW_MS: Final = 10_000
DEFAULT_MAX_WAIT_S: Final = 60.0
DEFAULT_SETTLE_S: Final = 2.0
# A held trace is never kept waiting longer than this, whatever a project asks.
MAX_WAIT_LIMIT_S: Final = 3600.0

_TRACE_ID_LIMIT = (1 << 64) - 1
_TAIL_FIELDS = frozenset({"slow_ms", "max_wait_s", "settle_s"})


class SamplingKind(StrEnum):
    """How a project decides which traces to keep (spec: SamplingKind)."""

    ALWAYS = "always"
    NEVER = "never"
    RATIO = "ratio"
    DETERMINISTIC = "deterministic"
    TAIL = "tail"


class DecisionMemory:
    """A bounded, thread-safe memory of keep/drop decisions by trace id (least recently
    decided forgotten first)."""

    def __init__(self, capacity: int = MEMORY_SIZE) -> None:
        if capacity < 1:
            raise ValueError("a decision memory holds at least one decision")
        self._capacity = capacity
        self._decisions: OrderedDict[str, bool] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, trace_id: str) -> bool | None:
        """The decision for `trace_id`, or None when there is none (or it was forgotten)."""
        with self._lock:
            return self._decisions.get(trace_id)

    def put(self, trace_id: str, keep: bool) -> None:
        """Remember `keep` for `trace_id`."""
        with self._lock:
            self._decisions[trace_id] = keep
            self._decisions.move_to_end(trace_id)
            while len(self._decisions) > self._capacity:
                self._decisions.popitem(last=False)

    def setdefault(self, trace_id: str, decide: Callable[[], bool]) -> bool:
        """The decision for `trace_id`, made with `decide` and remembered when there is none.
        Atomic: two threads deciding one new trace agree."""
        with self._lock:
            known = self._decisions.get(trace_id)
            if known is None:
                known = decide()
                self._decisions[trace_id] = known
                while len(self._decisions) > self._capacity:
                    self._decisions.popitem(last=False)
            return known

    def __len__(self) -> int:
        with self._lock:
            return len(self._decisions)


# Shared by every policy of the process (see the module docstring). Trace ids are random
# 128-bit values, so one memory serves every project.
_SHARED_MEMORY = DecisionMemory()


def keep_by_trace_id(trace_id: str, rate: float) -> bool:
    """The OpenTelemetry TraceIdRatioBased decision for a hex trace id at `rate`.

    The lower 64 bits of the id (its last 16 hex digits) are compared with
    `round(rate * 2**64)`, exactly as the OpenTelemetry SDKs do. An id that is not hex (ingest
    refuses those, but this function does not rely on it) is hashed to 64 bits first.
    """
    bound = round(rate * (_TRACE_ID_LIMIT + 1))
    try:
        low = int(trace_id[-16:], 16) & _TRACE_ID_LIMIT
    except ValueError:
        digest = hashlib.blake2b(trace_id.encode("utf-8", "surrogatepass"), digest_size=8)
        low = int.from_bytes(digest.digest(), "big")
    return low < bound


@dataclass(frozen=True, slots=True)
class SamplingPolicy:
    """One project's sampling policy (see the module docstring)."""

    kind: SamplingKind = SamplingKind.ALWAYS
    rate: float = 1.0
    slow_ms: int = DEFAULT_SLOW_MS
    max_wait_s: float = DEFAULT_MAX_WAIT_S
    settle_s: float = DEFAULT_SETTLE_S
    memory: DecisionMemory = field(default=_SHARED_MEMORY, compare=False, repr=False)
    draw: Callable[[], float] = field(default=random.random, compare=False, repr=False)

    @classmethod
    def parse(
        cls,
        document: Any,
        *,
        field: str = "sampling",
        memory: DecisionMemory | None = None,
        draw: Callable[[], float] | None = None,
    ) -> SamplingPolicy:
        """The policy a `sampling` document describes (None: always). Raises InvalidArgument
        naming the bad field. `memory` and `draw` (a uniform [0, 1) source) are for tests."""
        extras: dict[str, Any] = {}
        if memory is not None:
            extras["memory"] = memory
        if draw is not None:
            extras["draw"] = draw
        if document is None:
            return cls(**extras)
        if not isinstance(document, Mapping):
            raise InvalidArgument(f"{field} must be an object with a kind", field=field)
        kind_doc = document.get("kind", SamplingKind.ALWAYS.value)
        kinds = {k.value: k for k in SamplingKind}
        kind = kinds.get(kind_doc) if isinstance(kind_doc, str) else None
        if kind is None:
            raise InvalidArgument(
                f"{field}.kind must be one of {', '.join(kinds)} (got {kind_doc!r})",
                field=f"{field}.kind",
            )
        allowed = {"kind"}
        if kind in (SamplingKind.RATIO, SamplingKind.DETERMINISTIC, SamplingKind.TAIL):
            allowed.add("rate")
        if kind is SamplingKind.TAIL:
            allowed |= _TAIL_FIELDS
        for key in document:
            if key not in allowed:
                known = key == "rate" or key in _TAIL_FIELDS
                why = f"does not apply to kind {kind.value}" if known else "is not a field"
                raise InvalidArgument(f"{field}.{key} {why}", field=f"{field}.{key}")
        if kind in (SamplingKind.ALWAYS, SamplingKind.NEVER):
            return cls(kind, **extras)
        if "rate" not in document:
            raise InvalidArgument(
                f"{field}.rate is required by kind {kind.value}", field=f"{field}.rate"
            )
        rate = _number(document["rate"], f"{field}.rate", low=0.0, high=1.0)
        if kind is not SamplingKind.TAIL:
            return cls(kind, rate, **extras)
        slow_ms = document.get("slow_ms", DEFAULT_SLOW_MS)
        if isinstance(slow_ms, bool) or not isinstance(slow_ms, int) or slow_ms < 0:
            raise InvalidArgument(
                f"{field}.slow_ms must be a whole number of milliseconds, 0 or more",
                field=f"{field}.slow_ms",
            )
        max_wait_s = _number(
            document.get("max_wait_s", DEFAULT_MAX_WAIT_S),
            f"{field}.max_wait_s",
            low=0.0,
            high=MAX_WAIT_LIMIT_S,
            low_open=True,
        )
        settle_s = _number(
            document.get("settle_s", DEFAULT_SETTLE_S),
            f"{field}.settle_s",
            low=0.0,
            high=max_wait_s,
        )
        return cls(kind, rate, slow_ms, max_wait_s, settle_s, **extras)

    def to_json(self) -> dict[str, Any]:
        """The policy as its document form (defaults written out)."""
        document: dict[str, Any] = {"kind": self.kind.value}
        if self.kind in (SamplingKind.RATIO, SamplingKind.DETERMINISTIC, SamplingKind.TAIL):
            document["rate"] = self.rate
        if self.kind is SamplingKind.TAIL:
            document.update(
                slow_ms=self.slow_ms, max_wait_s=self.max_wait_s, settle_s=self.settle_s
            )
        return document

    @property
    def is_tail(self) -> bool:
        """Whether traces are held and decided by `tail_verdict` rather than `decide`."""
        return self.kind is SamplingKind.TAIL

    def decide(self, trace_id: str) -> bool:
        """Whether to keep the span of `trace_id` arriving now (head sampling). Raises
        ValueError for a tail policy, whose traces are held and decided by `tail_verdict`."""
        kind = self.kind
        if kind is SamplingKind.ALWAYS:
            return True
        if kind is SamplingKind.NEVER:
            return False
        if kind is SamplingKind.DETERMINISTIC:
            return keep_by_trace_id(trace_id, self.rate)
        if kind is SamplingKind.RATIO:
            rate, draw = self.rate, self.draw
            return self.memory.setdefault(trace_id, lambda: draw() < rate)
        raise ValueError("a tail policy decides held traces with tail_verdict, not decide")

    def tail_verdict(self, held: HeldTrace, now_ns: int) -> bool | None:
        """None while `held` should keep waiting, else whether to keep it (see the module
        docstring)."""
        timed_out = now_ns - held.first_received_at >= _nanos(self.max_wait_s)
        if not timed_out:
            if held.root_end_time is None:
                return None
            if now_ns - held.root_end_time < _nanos(self.settle_s):
                return None
        if held.error_count > 0:
            return True
        if held.root_start_time is not None:
            end = held.root_end_time if held.root_end_time is not None else now_ns
            if end - held.root_start_time >= self.slow_ms * 1_000_000:
                return True
        return keep_by_trace_id(held.trace_id, self.rate)

    def remember(self, trace_id: str, keep: bool) -> None:
        """Keep a decision about `trace_id`, so its stragglers follow it."""
        self.memory.put(trace_id, keep)

    def decided(self, trace_id: str) -> bool | None:
        """The remembered decision about `trace_id`, or None."""
        return self.memory.get(trace_id)


def _number(value: Any, at: str, *, low: float, high: float, low_open: bool = False) -> float:
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not math.isfinite(value)
        or value < low
        or (low_open and value == low)
        or value > high
    ):
        bound = f"more than {low:g}" if low_open else f"from {low:g}"
        raise InvalidArgument(
            f"{at} must be a number {bound} to {high:g} (got {value!r})", field=at
        )
    return float(value)


def _nanos(seconds: float) -> int:
    return int(seconds * 1_000_000_000)
