"""What monitors and objectives share: the windows they read (and the runs' shapes the run
watches read), their latched state as the
control store keeps it, the conditions as the API names them, webhooks shown by host, and the
handling of a kind of watch (`Watched`): the loop that reads them, listing, acknowledging."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from contextlib import suppress
from typing import Any, Generic, Protocol, TypeVar
from urllib.parse import urlsplit

from google.protobuf.message import Message
from google.protobuf.timestamp_pb2 import Timestamp

from mcpd import codec
from mcpd.model.v1 import enums_pb2, query_pb2
from mcpd.orchestrator.v1 import orchestrator_service_pb2
from mcpd.runtime.clock import Clock
from mcpd.runtime.errors import NotFound, quoted
from mcpd.storage.interfaces import WatchStates
from mcpd.storage.records import WatchState
from services.evaluation.latch import Condition, Latched, Transition, acknowledge

__all__ = [
    "Announcer",
    "RunShapeReads",
    "Watched",
    "WindowReads",
    "condition_number",
    "latched_of",
    "stored_state",
    "timestamp",
    "webhook_host",
]

log = logging.getLogger("mcpd.evaluation")
M = TypeVar("M", bound=Message)


class WindowReads(Protocol):
    """What a monitor reads over a window (the query service)."""

    async def summary(
        self, project: str, start: Timestamp, end: Timestamp
    ) -> query_pb2.AnalyticsSummary:
        """The runs started in [start, end): counts, errors, latency, cost."""
        ...

    async def score_mean(
        self, project: str, scorer_id: str, start: Timestamp, end: Timestamp
    ) -> tuple[float | None, int]:
        """The mean of the scores from `scorer_id` produced in [start, end), and their count."""
        ...


class RunShapeReads(Protocol):
    """What the run watches read over a window (the orchestrator)."""

    async def run_shapes(
        self, project: str, start: Timestamp, end: Timestamp, *, limit: int, baseline: int
    ) -> orchestrator_service_pb2.GetRunShapesResponse:
        """Up to `limit` of the runs that ended in [start, end) or, still running, last changed
        in it, newest first, with the step counts of the newest `baseline` succeeded runs of
        each of their definition versions."""
        ...


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


class _Configured(Protocol):
    """What a configured watch (the spec's Monitor or Slo) has that its handling reads."""

    @property
    def id(self) -> str: ...

    @property
    def project(self) -> str: ...

    @property
    def enabled(self) -> bool: ...

    @property
    def webhook(self) -> str: ...


W = TypeVar("W", bound=_Configured)
S = TypeVar("S", bound=Message)


class Watched(Generic[W, S]):
    """The configured watches of one kind, latched between readings: every enabled one read on a
    schedule, a project's listed and their trips acknowledged. A kind says how it reads one
    (`_evaluate`) and what its state is called (`kind`, `noun`, the API's types and fields)."""

    kind: str
    noun: str
    id_field: str
    state_type: type[S]
    watch_field: str
    reading_type: type[Message]

    def __init__(
        self,
        watches: Sequence[W],
        reads: WindowReads,
        states: WatchStates,
        announcer: Announcer,
        clock: Clock,
    ) -> None:
        self._watches = {watch.id: watch for watch in watches}
        self._reads = reads
        self._states = states
        self._announcer = announcer
        self._clock = clock

    async def run(self, stop: asyncio.Event, *, interval_s: float) -> None:
        """Read every enabled watch every `interval_s` until `stop` is set; a failed round is
        logged and the next one tries again."""
        while not stop.is_set():
            try:
                await self.evaluate_all()
            except Exception:  # the loop must outlive any one round
                log.exception("%ss could not be evaluated", self.noun)
            with suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), timeout=interval_s)

    async def evaluate_all(self) -> int:
        """Read every enabled watch once; how many were read."""
        enabled = [watch for watch in self._watches.values() if watch.enabled]
        ids = [watch.id for watch in enabled]
        stored = await asyncio.to_thread(self._states.watch_states, self.kind, ids)
        for watch in enabled:
            try:
                await self._evaluate(watch, stored.get(watch.id))
            except Exception:  # one watch's failure must not stop the others' readings
                log.exception("%s %s could not be read", self.noun, watch.id)
        return len(enabled)

    def list(self, project: str) -> list[S]:
        """The project's watches in id order, each with its condition and last reading
        (blocking: from a worker thread)."""
        mine = sorted((w for w in self._watches.values() if w.project == project), key=_id_of)
        stored = self._states.watch_states(self.kind, [watch.id for watch in mine])
        return [self._shown(watch, stored.get(watch.id)) for watch in mine]

    def acknowledge(self, project: str, watch_id: str) -> S:
        """A person has seen the trip: tripped becomes acknowledged until it recovers
        (blocking: from a worker thread)."""
        watch = self._watches.get(watch_id)
        named = f"{self.noun} {quoted(watch_id)}"
        if watch is None or watch.project != project:
            raise NotFound(f"no {named} in this project", field=self.id_field)
        state = self._states.watch_states(self.kind, [watch_id]).get(watch_id)
        latched = acknowledge(latched_of(state), named)
        saved = stored_state(latched, last_reading(state, self.reading_type))
        self._states.save_watch_state(self.kind, watch_id, saved)
        return self._shown(watch, saved)

    async def _evaluate(self, watch: W, stored: WatchState | None) -> None:
        raise NotImplementedError

    async def _save(
        self,
        watch: W,
        latched: Latched,
        reading: Message,
        transition: Transition | None,
        body: Callable[[Transition], dict[str, object]],
    ) -> None:
        """Store a reading's latch, and announce its transition (`body` of it) to the watch's
        webhook, when it has one (a configured webhook is never empty)."""
        saved = stored_state(latched, reading)
        await asyncio.to_thread(self._states.save_watch_state, self.kind, watch.id, saved)
        if transition is not None and watch.webhook:
            self._announcer.announce(watch.webhook, body(transition))

    def _shown(self, watch: W, stored: WatchState | None) -> S:
        """A watch's state as the API shows it: its webhook reduced to the host."""
        latched = latched_of(stored)
        shown = self.state_type()
        shown_watch: Any = getattr(shown, self.watch_field)
        shown_watch.CopyFrom(watch)
        state: Any = shown
        state.condition = condition_number(latched.condition)
        last = last_reading(stored, self.reading_type)
        if last is not None:
            state.last.CopyFrom(last)
        if latched.tripped_at is not None:
            state.tripped_at.CopyFrom(timestamp(latched.tripped_at))
        if watch.webhook:
            shown_watch.webhook = webhook_host(watch.webhook)
        return shown


def _id_of(watch: _Configured) -> str:
    return watch.id
