"""Time, injected: a `Clock` protocol, the system clock, a manual clock for tests, and the
conversions between aware UTC datetimes and protobuf `Timestamp`.

Components that schedule, lease or time out take a `Clock` so tests can move time by hand
instead of sleeping.
"""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime, timedelta
from typing import Protocol, runtime_checkable

from google.protobuf import timestamp_pb2


@runtime_checkable
class Clock(Protocol):
    """Where a component reads the time."""

    def now(self) -> datetime:
        """The wall-clock time, timezone-aware, in UTC."""
        ...

    def monotonic(self) -> float:
        """Seconds on a clock that never goes back; only differences are meaningful."""
        ...


class SystemClock:
    """The real clocks of the machine."""

    def now(self) -> datetime:
        """The current UTC time."""
        return datetime.now(UTC)

    def monotonic(self) -> float:
        """`time.monotonic()`."""
        return time.monotonic()


class ManualClock:
    """A clock that moves only when told to, for tests.

    `advance` moves wall and monotonic time together; `set` jumps the wall clock alone (forwards
    or back, as NTP might), leaving monotonic time where it is.
    """

    def __init__(self, start: datetime | None = None, *, monotonic_start: float = 0.0) -> None:
        self._lock = threading.Lock()
        self._now = _require_aware(start) if start is not None else datetime(2026, 1, 1, tzinfo=UTC)
        self._monotonic = monotonic_start

    def now(self) -> datetime:
        """The current manual wall-clock time (UTC)."""
        with self._lock:
            return self._now

    def monotonic(self) -> float:
        """The current manual monotonic time."""
        with self._lock:
            return self._monotonic

    def advance(self, delta: timedelta | float) -> None:
        """Move both clocks forward by `delta` (a timedelta or seconds); never backwards."""
        seconds = delta.total_seconds() if isinstance(delta, timedelta) else float(delta)
        if seconds < 0:
            raise ValueError("a clock advances forwards only; use set() to step the wall clock")
        with self._lock:
            self._now += timedelta(seconds=seconds)
            self._monotonic += seconds

    def set(self, now: datetime) -> None:
        """Set the wall clock to `now` (timezone-aware); monotonic time is unchanged."""
        aware = _require_aware(now)
        with self._lock:
            self._now = aware


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def epoch_nanos(moment: datetime) -> int:
    """Nanoseconds since the Unix epoch for an aware datetime (a naive one raises TypeError)."""
    # Integer arithmetic: a float timestamp would round away the microseconds.
    return (moment - _EPOCH) // timedelta(microseconds=1) * 1000


def to_timestamp(value: datetime) -> timestamp_pb2.Timestamp:
    """A protobuf Timestamp for an aware datetime. Naive datetimes are refused: their zone is a
    guess, and a wrong guess silently shifts every stored time."""
    timestamp = timestamp_pb2.Timestamp()
    timestamp.FromDatetime(_require_aware(value))
    return timestamp


def from_timestamp(value: timestamp_pb2.Timestamp) -> datetime:
    """An aware UTC datetime for a protobuf Timestamp (nanoseconds truncate to microseconds)."""
    return value.ToDatetime(tzinfo=UTC)


def _require_aware(value: datetime) -> datetime:
    if value.tzinfo is None or value.utcoffset() is None:
        raise ValueError(f"a timezone-aware datetime is required, got naive {value.isoformat()}")
    return value.astimezone(UTC)
