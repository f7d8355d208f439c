"""What monitors and objectives share: their latched state as the control store keeps it, the
conditions as the API names them, webhooks shown by host, and the loop that reads them."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from contextlib import suppress
from typing import Protocol, TypeVar
from urllib.parse import urlsplit

from google.protobuf.message import Message
from google.protobuf.timestamp_pb2 import Timestamp

from mcpd import codec
from mcpd.model.v1 import enums_pb2
from mcpd.storage.records import WatchState
from services.evaluation.latch import Condition, Latched

__all__ = [
    "Announcer",
    "condition_number",
    "latched_of",
    "read_every",
    "stored_state",
    "timestamp",
    "webhook_host",
]

log = logging.getLogger("mcpd.evaluation")
M = TypeVar("M", bound=Message)


class Announcer(Protocol):
    """Sends a transition to a webhook, in the background."""

    def announce(self, url: str, body: dict[str, object]) -> None: ...


def condition_number(condition: Condition) -> enums_pb2.MonitorCondition.ValueType:
    """The API's MonitorCondition for a latch condition."""
    return enums_pb2.MonitorCondition.Value(f"MONITOR_CONDITION_{condition.value.upper()}")


def latched_of(state: WatchState | None) -> Latched:
    """The latch as stored (insufficient before the first reading)."""
    if state is None:
        return Latched()
    return Latched(Condition(state.condition), state.tripped_at)


def stored_state(latched: Latched, last: Message | None) -> WatchState:
    """What the control store keeps: the latch and the last reading in the spec's JSON."""
    return WatchState(
        latched.condition.value, latched.tripped_at, None if last is None else codec.encode(last)
    )


def last_reading(state: WatchState | None, reading_type: type[M]) -> M | None:
    """The stored last reading, decoded."""
    if state is None or state.last is None:
        return None
    return codec.decode(state.last, reading_type)


def timestamp(nanos: int) -> Timestamp:
    stamp = Timestamp()
    stamp.FromNanoseconds(nanos)
    return stamp


def webhook_host(url: str) -> str:
    """The host (and port) of a webhook URL: all the API shows of it, since a webhook URL is
    often its own credential."""
    return urlsplit(url).netloc.rpartition("@")[2]


async def read_every(
    read: Callable[[], Awaitable[int]], what: str, stop: asyncio.Event, interval_s: float
) -> None:
    """Call `read` every `interval_s` until `stop` is set; a failed round is logged and the
    next one tries again."""
    while not stop.is_set():
        try:
            await read()
        except Exception:  # the loop must outlive any one round
            log.exception("%s could not be evaluated", what)
        with suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), timeout=interval_s)
