"""Admission control: a full queue answers busy; cancellation propagates and keeps the slot
until the worker thread ends; elapsed time covers the whole call."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

from mcpd.runtime.clock import ManualClock
from mcpd.sessions.store import SearchQuery, SearchResult
from mcpd.testing.eventually import eventually_async
from services.query.sessions.admission import Admission
from services.query.tests.sessions.builders import build, user
from services.query.tests.sessions.conftest import call, make_tools, seed
from services.query.tests.sessions.memory_store import MemorySessionStore


class Gate:
    """Blocks store searches until opened."""

    def __init__(self, store: MemorySessionStore) -> None:
        self.opened = threading.Event()
        self.entered = threading.Semaphore(0)
        self._search = store.search
        store.search = self.search  # type: ignore[method-assign]

    def search(self, query: SearchQuery) -> SearchResult:
        self.entered.release()
        assert self.opened.wait(10)
        return self._search(query)

    async def wait_entered(self, count: int) -> None:
        for _ in range(count):
            assert await asyncio.to_thread(self.entered.acquire, True, 10)


def _assert_running(admission: Admission, count: int) -> None:
    assert admission.running == count


async def test_full_queue_is_busy(memory: MemorySessionStore, clock: ManualClock) -> None:
    seed(memory, build("s", [[user("needle")]]))
    gate = Gate(memory)
    tools = make_tools(memory, clock, max_in_flight=1, max_queued=1)
    running = asyncio.create_task(call(tools, "search_sessions", {"query": "needle"}))
    await gate.wait_entered(1)
    queued = asyncio.create_task(call(tools, "search_sessions", {"query": "needle"}))
    await asyncio.sleep(0)
    assert tools.admission.running == 1
    assert tools.admission.waiting == 1
    busy = await call(tools, "search_sessions", {"query": "needle"})
    assert busy["error"]["code"] == "busy"
    assert busy["error"]["details"]["retryable"] is True
    # Invalid requests are still answered precisely under load.
    invalid = await call(tools, "search_sessions", {"query": ""})
    assert invalid["error"]["code"] == "invalid_request"
    gate.opened.set()
    for task in (running, queued):
        assert (await task)["data"]["result_count"] == 1
    assert tools.admission.running == 0
    assert tools.admission.waiting == 0


async def test_cancellation_propagates_and_holds_the_slot(
    memory: MemorySessionStore, clock: ManualClock
) -> None:
    seed(memory, build("s", [[user("needle")]]))
    gate = Gate(memory)
    tools = make_tools(memory, clock, max_in_flight=1, max_queued=0)
    task = asyncio.create_task(tools.search_sessions("proj-a", {"query": "needle"}))
    await gate.wait_entered(1)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    # The thread is still reading: its slot is not free, so a new call is refused.
    assert tools.admission.running == 1
    assert (await call(tools, "search_sessions", {"query": "x"}))["error"]["code"] == "busy"
    gate.opened.set()
    await eventually_async(lambda: _assert_running(tools.admission, 0))
    assert "data" in await call(tools, "search_sessions", {"query": "needle"})


async def test_cancelled_while_queued_leaves_no_trace() -> None:
    admission = Admission(max_in_flight=1, max_queued=4)
    release = threading.Event()
    first = asyncio.create_task(admission.run(lambda: release.wait(10)))
    await eventually_async(lambda: _assert_running(admission, 1))
    queued = asyncio.create_task(admission.run(lambda: "never"))
    await asyncio.sleep(0)
    assert admission.waiting == 1
    queued.cancel()
    with pytest.raises(asyncio.CancelledError):
        await queued
    assert admission.waiting == 0
    release.set()
    assert await first is True
    assert await admission.run(lambda: 7) == 7


async def test_worker_exceptions_surface_to_the_caller() -> None:
    admission = Admission()

    def boom() -> Any:
        raise KeyError("x")

    with pytest.raises(KeyError):
        await admission.run(boom)
    assert admission.running == 0


def test_bounds_are_validated() -> None:
    with pytest.raises(ValueError, match="max_in_flight"):
        Admission(max_in_flight=0)
