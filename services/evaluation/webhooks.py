"""Webhooks: a JSON POST for each trip and clear, sent in the background and retried.

`announce` only queues, so an evaluation never waits for a receiver. One sender task delivers
the queue in order (a clear never overtakes its trip), trying each POST up to `attempts` times
with a doubling pause (`first_delay_s`, at most `max_delay_s`) after a connection error, a
timeout or an answer other than 2xx; what still fails is logged and dropped. The queue is
bounded: past `max_queued` an announcement is dropped with a warning rather than holding memory
for a receiver that is gone. Logs name a webhook by its host only: its URL is often its own
credential.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from contextlib import suppress

import httpx

from services.evaluation.watching import webhook_host

__all__ = ["Webhooks"]

log = logging.getLogger("mcpd.evaluation")


class Webhooks:
    """The `Announcer` that POSTs to webhooks (see the module docstring)."""

    def __init__(
        self,
        *,
        attempts: int = 5,
        first_delay_s: float = 1.0,
        max_delay_s: float = 60.0,
        timeout_s: float = 10.0,
        max_queued: int = 1000,
    ) -> None:
        self._attempts = attempts
        self._first_delay_s = first_delay_s
        self._max_delay_s = max_delay_s
        self._timeout_s = timeout_s
        self._queue: asyncio.Queue[tuple[str, Mapping[str, object]]] = asyncio.Queue(max_queued)

    def announce(self, url: str, body: dict[str, object]) -> None:
        """Queue a POST of `body` to `url`; never waits."""
        try:
            self._queue.put_nowait((url, body))
        except asyncio.QueueFull:
            log.warning("webhook queue full; dropped an announcement to %s", webhook_host(url))

    async def run(self, stop: asyncio.Event) -> None:
        """Deliver what is queued until `stop` is set."""
        async with httpx.AsyncClient(timeout=self._timeout_s) as client:
            while not stop.is_set():
                waiting = asyncio.ensure_future(self._queue.get())
                stopping = asyncio.ensure_future(stop.wait())
                await asyncio.wait({waiting, stopping}, return_when=asyncio.FIRST_COMPLETED)
                stopping.cancel()
                if not waiting.done():
                    waiting.cancel()
                    with suppress(asyncio.CancelledError):
                        await waiting
                    return
                url, body = waiting.result()
                await self._deliver(client, url, body, stop)

    async def _deliver(
        self,
        client: httpx.AsyncClient,
        url: str,
        body: Mapping[str, object],
        stop: asyncio.Event,
    ) -> None:
        delay = self._first_delay_s
        for attempt in range(1, self._attempts + 1):
            try:
                answer = await client.post(url, json=dict(body))
                if answer.is_success:
                    return
                failure = f"answered {answer.status_code}"
            except httpx.HTTPError as error:
                failure = type(error).__name__
            if attempt == self._attempts:
                break
            with suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), timeout=delay)
            if stop.is_set():
                return
            delay = min(delay * 2, self._max_delay_s)
        log.error(
            "webhook %s %s after %d attempts; dropped the announcement",
            webhook_host(url),
            failure,
            self._attempts,
        )
