"""Where audit events go: a narrow sink protocol, the sink that writes to the control store, and
the sink that keeps a flood of refusals from growing the log without bound.

The interceptor builds the events (see `interceptor`); a sink only stores them. Each allowed
event is written before the request it records goes on: an allowed read whose row could not be
written fails, because the spec's promise is that "who read this" always has an answer.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
from collections.abc import Sequence
from typing import Protocol, TypeAlias

from mcpd.model.v1 import account_pb2, enums_pb2
from mcpd.runtime.clock import Clock

log = logging.getLogger("mcpd.auth")

# Distinct refusals one window keeps apart; refusals of any further key fold into one row per
# action. Bounds both the rows a window writes and the memory it holds.
MAX_KEYS_PER_WINDOW = 1000
# What a folded field reads on a row that stands for refusals from many callers.
MANY = "*"

# source, principal, action, project, reason.
_Key: TypeAlias = tuple[str, str, str, str, str]


class AuditSink(Protocol):
    """Stores audit events. Raising means the event was not stored."""

    async def record(self, event: account_pb2.AuditEvent) -> None:
        """Store `event` durably before returning."""
        ...


class CanAppendAudit(Protocol):
    """The control-store method the store sink needs (blocking)."""

    def append_audit(self, events: Sequence[account_pb2.AuditEvent]) -> None:
        """Append events in one transaction."""
        ...


class StoreAuditSink:
    """An AuditSink that appends events to the control store, in a worker thread."""

    def __init__(self, store: CanAppendAudit) -> None:
        self._store = store

    async def record(self, event: account_pb2.AuditEvent) -> None:
        """Append `event` in its own transaction (the store call blocks: run off the loop)."""
        await self.record_all([event])

    async def record_all(self, events: Sequence[account_pb2.AuditEvent]) -> None:
        """Append `events` in one transaction; nothing happens for none."""
        if events:
            await asyncio.to_thread(self._store.append_audit, list(events))


class AggregatingAuditSink:
    """An AuditSink that writes allowed events through and writes repeated refusals as one row.

    Refusals are keyed by (source, principal, action, project, reason) within windows of
    `window_s` seconds of the clock. The first refusal of a key in a window is written at once,
    as any event; its repeats in that window are counted in memory and written as one row (the
    first repeat, with `count` set and, when it stands for several, no resource) once the window
    has closed: by `flush`, which the task `start` runs at each window's end, by the next
    refusal, or by `close`. Once a window holds `max_keys` keys, refusals of any other key are
    counted into one row per action whose source, principal, project and reason read `*`.

    So a refusal row may be written up to a window late, and a write failure of a counted row
    is logged and dropped (the request was refused either way); allowed events are never held.
    """

    def __init__(
        self,
        inner: StoreAuditSink,
        *,
        clock: Clock,
        window_s: float = 60.0,
        max_keys: int = MAX_KEYS_PER_WINDOW,
    ) -> None:
        if window_s <= 0 or max_keys < 1:
            raise ValueError("the aggregation window and its key bound must be positive")
        self._inner = inner
        self._clock = clock
        self._window_s = window_s
        self._max_keys = max_keys
        self._window: int | None = None
        # Each key seen this window, with the row counting its repeats (None: no repeat yet).
        self._keys: dict[_Key, account_pb2.AuditEvent | None] = {}
        # Per action, the row counting refusals past the key bound.
        self._overflow: dict[str, account_pb2.AuditEvent] = {}
        self._task: asyncio.Task[None] | None = None

    async def record(self, event: account_pb2.AuditEvent) -> None:
        """Write an allowed event, or the first refusal of its key in this window, before
        returning; count a repeated refusal towards its window's row."""
        if event.result != enums_pb2.AUDIT_RESULT_REFUSED:
            await self._inner.record(event)
            return
        await self._write_counted(self._rotate())
        if self._first_of_key(event):
            await self._inner.record(event)

    async def flush(self) -> None:
        """Write the counted rows of a window that has closed."""
        await self._write_counted(self._rotate())

    def start(self) -> None:
        """Flush at the end of every window until `close` (needs a running event loop)."""
        if self._task is None:
            self._task = asyncio.create_task(self._flush_each_window(), name="audit-aggregation")

    async def close(self) -> None:
        """Stop flushing and write every counted row, the open window's too."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        counted = self._counted()
        self._keys, self._overflow = {}, {}
        await self._write_counted(counted)

    async def _flush_each_window(self) -> None:
        while True:
            elapsed = self._clock.now().timestamp() % self._window_s
            await asyncio.sleep(self._window_s - elapsed)
            await self.flush()

    def _rotate(self) -> list[account_pb2.AuditEvent]:
        """Move to the clock's window; the counted rows of the one it leaves."""
        window = math.floor(self._clock.now().timestamp() / self._window_s)
        if window == self._window:
            return []
        counted = self._counted()
        self._window, self._keys, self._overflow = window, {}, {}
        return counted

    def _first_of_key(self, event: account_pb2.AuditEvent) -> bool:
        """Whether `event` is the first refusal of its key this window; else count it."""
        key = (event.source, event.principal, event.action, event.project, event.reason)
        if key in self._keys:
            self._keys[key] = _counted_into(self._keys[key], event)
            return False
        if len(self._keys) < self._max_keys:
            self._keys[key] = None
            return True
        row = self._overflow[event.action] = _counted_into(self._overflow.get(event.action), event)
        if row.count == 1:
            row.source = row.principal = row.reason = MANY
            # Refusals of many projects: filed with those that name none (the operator's).
            row.project = ""
            row.ClearField("resource")
        return False

    def _counted(self) -> list[account_pb2.AuditEvent]:
        repeats = [row for row in self._keys.values() if row is not None]
        for row in repeats:
            if row.count > 1:
                # The repeats may each have named another trace: the row names none.
                row.ClearField("resource")
        return [*repeats, *self._overflow.values()]

    async def _write_counted(self, rows: Sequence[account_pb2.AuditEvent]) -> None:
        if not rows:
            return
        try:
            await self._inner.record_all(rows)
        except Exception as exc:
            log.error("audit write failed for %d counted refusal rows", len(rows), exc_info=exc)


def _counted_into(
    row: account_pb2.AuditEvent | None, event: account_pb2.AuditEvent
) -> account_pb2.AuditEvent:
    """`row` with one more refusal counted, or a row started from `event` when there is none."""
    if row is None:
        row = account_pb2.AuditEvent()
        row.CopyFrom(event)
        row.count = 1
    else:
        row.count += 1
    return row
