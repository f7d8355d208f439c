"""Wait for a condition that something else makes true, instead of sleeping and then asserting.

A check is a function that asserts (raises ``AssertionError``) while the condition does not
hold yet and returns once it does; ``eventually`` calls it until it returns, and after
``timeout`` seconds raises its last ``AssertionError``. The timeout only bounds a failure: a
passing test waits exactly as long as the condition takes, never a fixed delay. Any other
exception ends the wait at once.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar, overload

T = TypeVar("T")

# The first retry comes quickly (in-process conditions), later ones back off to `interval`
# so that a check which asks a daemon over HTTP does not keep a core busy while it waits.
_FIRST_DELAY_S = 0.005


def eventually(check: Callable[[], T], *, timeout: float = 10.0, interval: float = 0.1) -> T:
    """Call ``check`` until it stops raising ``AssertionError``; its result."""
    waits = _Waits(timeout, interval)
    while True:
        try:
            return check()
        except AssertionError as failure:
            time.sleep(waits.next_delay(failure))


# `timeout` as in the sync form: it bounds the retrying, which asyncio.timeout cannot express
# (a try in progress is never cancelled), hence the ASYNC109 exceptions.
@overload
async def eventually_async(
    check: Callable[[], Awaitable[T]],
    *,
    timeout: float = ...,  # noqa: ASYNC109
    interval: float = ...,
) -> T: ...


@overload
async def eventually_async(
    check: Callable[[], T],
    *,
    timeout: float = ...,  # noqa: ASYNC109
    interval: float = ...,
) -> T: ...


async def eventually_async(
    check: Callable[[], Any],
    *,
    timeout: float = 10.0,  # noqa: ASYNC109
    interval: float = 0.1,
) -> Any:
    """The asynchronous form: ``check`` may be a coroutine function (awaited each time) or a
    plain function; the event loop runs between tries."""
    waits = _Waits(timeout, interval)
    while True:
        try:
            result = check()
            if inspect.isawaitable(result):
                return await result
            return result
        except AssertionError as failure:
            await asyncio.sleep(waits.next_delay(failure))


class _Waits:
    """The delays between tries, and the deadline after which the last failure is raised."""

    def __init__(self, timeout: float, interval: float) -> None:
        if timeout <= 0 or interval <= 0:
            raise ValueError("timeout and interval must be positive")
        self._timeout = timeout
        self._deadline = time.monotonic() + timeout
        self._delay = min(_FIRST_DELAY_S, interval)
        self._interval = interval

    def next_delay(self, failure: AssertionError) -> float:
        """How long to wait before the next try; raises ``failure`` once the time is up."""
        left = self._deadline - time.monotonic()
        if left <= 0:
            failure.add_note(f"(still failing after {self._timeout:g} s of retrying)")
            raise failure
        delay = min(self._delay, left)
        self._delay = min(self._delay * 2, self._interval)
        return delay
