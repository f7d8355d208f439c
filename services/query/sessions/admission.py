"""Admission control: a bound on tool calls running at once and on calls waiting to run.

A full queue answers `busy` at once instead of letting latency grow without bound. A call
that is cancelled while its store work runs in a worker thread keeps its slot until that
thread finishes, so the in-flight bound counts real work, not just live coroutines.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, TypeVar

from services.query.sessions.errors import BUSY, ToolError

T = TypeVar("T")

DEFAULT_MAX_IN_FLIGHT = 8
DEFAULT_MAX_QUEUED = 32


class Admission:
    """At most `max_in_flight` calls run; at most `max_queued` more wait; the rest are busy."""

    def __init__(
        self, *, max_in_flight: int = DEFAULT_MAX_IN_FLIGHT, max_queued: int = DEFAULT_MAX_QUEUED
    ) -> None:
        if max_in_flight < 1 or max_queued < 0:
            raise ValueError("max_in_flight must be >= 1 and max_queued >= 0")
        self._max_in_flight = max_in_flight
        self._max_queued = max_queued
        self._semaphore = asyncio.Semaphore(max_in_flight)
        self._waiting = 0
        self._running = 0

    @property
    def running(self) -> int:
        """Calls holding a slot now."""
        return self._running

    @property
    def waiting(self) -> int:
        """Calls queued for a slot now."""
        return self._waiting

    async def run(self, work: Callable[[], T]) -> T:
        """Run blocking `work` in a worker thread once a slot is free; `busy` when the queue is
        full. Cancellation propagates to the caller at once."""
        if self._running >= self._max_in_flight and self._waiting >= self._max_queued:
            raise ToolError(
                BUSY,
                "the session tools are at capacity; retry shortly",
                retryable=True,
                max_in_flight=self._max_in_flight,
                max_queued=self._max_queued,
            )
        self._waiting += 1
        try:
            await self._semaphore.acquire()
        finally:
            self._waiting -= 1
        self._running += 1
        future = asyncio.ensure_future(asyncio.to_thread(work))
        future.add_done_callback(self._release)
        # Shielded: cancelling the caller must not orphan the slot; the done callback frees it
        # when the thread really ends.
        return await asyncio.shield(future)

    def _release(self, future: asyncio.Future[Any]) -> None:
        self._running -= 1
        self._semaphore.release()
        if not future.cancelled():
            # Consume a result no caller will read (the caller was cancelled), so asyncio does
            # not log "exception was never retrieved".
            future.exception()
