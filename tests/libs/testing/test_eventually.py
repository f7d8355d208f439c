"""eventually / eventually_async: retry an asserting check until it passes, raise its last
failure once the time is up, and let anything but an AssertionError through at once."""

from __future__ import annotations

import asyncio
import itertools

import pytest

from mcpd.testing.eventually import eventually, eventually_async


class FailsTwice:
    """Fails its first two calls, then answers how many calls it took."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self) -> int:
        self.calls += 1
        assert self.calls > 2, f"call {self.calls}"
        return self.calls


def test_the_result_of_the_first_passing_call_is_returned() -> None:
    check = FailsTwice()
    assert eventually(check, timeout=5) == 3
    assert check.calls == 3


def test_after_the_timeout_the_last_failure_is_raised_with_a_note() -> None:
    calls = itertools.count(1)

    def never() -> None:
        raise AssertionError(f"call {next(calls)}")

    with pytest.raises(AssertionError) as failed:
        eventually(never, timeout=0.05, interval=0.01)
    tries = next(calls) - 1
    assert tries > 1
    assert str(failed.value) == f"call {tries}"
    assert failed.value.__notes__ == ["(still failing after 0.05 s of retrying)"]


def test_another_exception_ends_the_wait_at_once() -> None:
    calls = itertools.count(1)

    def broken() -> None:
        next(calls)
        raise KeyError("not an assertion")

    with pytest.raises(KeyError):
        eventually(broken, timeout=5)
    assert next(calls) == 2


@pytest.mark.parametrize(("timeout", "interval"), [(0, 0.1), (1, 0), (-1, 0.1)])
def test_timeout_and_interval_must_be_positive(timeout: float, interval: float) -> None:
    with pytest.raises(ValueError, match="positive"):
        eventually(FailsTwice(), timeout=timeout, interval=interval)


async def test_a_coroutine_check_is_awaited_each_try() -> None:
    sync_check = FailsTwice()

    async def check() -> int:
        return sync_check()

    assert await eventually_async(check, timeout=5) == 3


async def test_a_plain_check_works_in_the_async_form() -> None:
    assert await eventually_async(FailsTwice(), timeout=5) == 3


async def test_the_event_loop_runs_between_tries() -> None:
    done = asyncio.Event()

    async def finish() -> None:
        done.set()

    def finished() -> str:
        assert done.is_set()
        return "done"

    task = asyncio.create_task(finish())
    assert await eventually_async(finished, timeout=5) == "done"
    await task


async def test_the_async_form_raises_the_last_failure_after_the_timeout() -> None:
    async def never() -> None:
        raise AssertionError("still not")

    with pytest.raises(AssertionError, match="still not"):
        await eventually_async(never, timeout=0.05, interval=0.01)
