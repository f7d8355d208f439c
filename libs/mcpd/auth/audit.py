"""Where audit events go: a narrow sink protocol, and the sink that writes to the control store.

The interceptor builds the events (see `interceptor`); a sink only stores them. Each event is
written before the request it records goes on: an allowed read whose row could not be written
fails, because the spec's promise is that "who read this" always has an answer.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Protocol

from mcpd.model.v1 import account_pb2


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
    """An AuditSink that appends each event to the control store, in a worker thread."""

    def __init__(self, store: CanAppendAudit) -> None:
        self._store = store

    async def record(self, event: account_pb2.AuditEvent) -> None:
        """Append `event` in its own transaction (the store call blocks: run off the loop)."""
        await asyncio.to_thread(self._store.append_audit, [event])
