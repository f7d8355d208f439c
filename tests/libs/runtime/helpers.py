"""Test helpers for the runtime tests."""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

T = TypeVar("T")


async def eventually(
    check: Callable[[], T | Awaitable[T]], *, within: float = 10.0, interval: float = 0.01
) -> T:
    """Run `check` until it stops raising AssertionError; after `within` seconds, raise the last.

    For conditions another task makes true at a moment the test cannot know; the deadline only
    bounds a failure, it is never what the test asserts.
    """
    deadline = time.monotonic() + within
    while True:
        try:
            result = check()
            if inspect.isawaitable(result):
                return await result
            return result
        except AssertionError:
            if time.monotonic() >= deadline:
                raise
        await asyncio.sleep(interval)
