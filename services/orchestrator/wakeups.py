"""Waking the claims a process holds open when work becomes runnable.

A transition that leaves an attempt offerable calls `notify` (from whichever thread ran it);
every claim waiting in this process then looks again at once. A claim registers before it
looks, so work that arrives between its look and its wait still wakes it. Work made runnable
by another process is found when the waiting claim's poll interval passes.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from contextlib import contextmanager, suppress

__all__ = ["Wakeups"]


class Wakeups:
    """The claims waiting in this process, and the signal that work arrived."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._waiting: set[tuple[asyncio.AbstractEventLoop, asyncio.Event]] = set()

    @contextmanager
    def listening(self) -> Iterator[asyncio.Event]:
        """An event set by every `notify` while the block runs (on the running loop)."""
        entry = (asyncio.get_running_loop(), asyncio.Event())
        with self._lock:
            self._waiting.add(entry)
        try:
            yield entry[1]
        finally:
            with self._lock:
                self._waiting.discard(entry)

    def notify(self) -> None:
        """Wake every listening claim; callable from any thread."""
        with self._lock:
            waiting = list(self._waiting)
        for loop, event in waiting:
            with suppress(RuntimeError):  # the claim's loop has closed: nobody to wake
                loop.call_soon_threadsafe(event.set)
