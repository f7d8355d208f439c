"""Sending the spans transitions queued (`spans`) to ingest, with the service credential.

A span is queued in the transaction of the change it records, so a crash loses none; it leaves
the outbox once ingest has answered for it. Ingest stores a span by its trace and span id, so
one sent twice (a crash between ingest's answer and the delete) is stored once. A span ingest
refuses is logged with its reason and dropped: sending it again would be refused again.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from contextlib import suppress

import grpc

from mcpd import codec
from mcpd.ingest.v1.ingest_service_pb2_grpc import IngestServiceStub
from mcpd.model.v1 import telemetry_pb2
from mcpd.storage.interfaces import RunSpans

__all__ = ["BATCH", "IDLE_S", "SpanOutbox"]

log = logging.getLogger("mcpd.orchestrator")

BATCH = 500
IDLE_S = 0.2
RETRY_S = 1.0
CALL_TIMEOUT_S = 30.0


class SpanOutbox:
    """Drains the run store's span outbox into ingest."""

    def __init__(
        self, store: RunSpans, channel: grpc.aio.Channel, metadata: Sequence[tuple[str, str]]
    ) -> None:
        self._store = store
        self._ingest = IngestServiceStub(channel)
        self._metadata = tuple(metadata)

    async def run(self, stop: asyncio.Event) -> None:
        """Send queued spans until `stop` is set; a failed send is tried again."""
        while not stop.is_set():
            try:
                sent = await self.send_once()
            except grpc.aio.AioRpcError as failure:
                log.warning("sending run spans to ingest failed (%s); trying again", failure.code())
                sent = 0
                pause = RETRY_S
            else:
                pause = 0.0 if sent == BATCH else IDLE_S
            with suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), timeout=pause)

    async def send_once(self) -> int:
        """Send one batch of queued spans; how many were sent."""
        queued = await asyncio.to_thread(self._store.queued_spans, limit=BATCH)
        if not queued:
            return 0
        batch = telemetry_pb2.IngestBatch(
            spans=[codec.decode(span, telemetry_pb2.Span) for _, span in queued]
        )
        result: telemetry_pb2.IngestResult = await self._ingest.Ingest(
            batch, metadata=self._metadata, timeout=CALL_TIMEOUT_S
        )
        for error in result.errors:
            log.error("ingest refused a run span: %s", error.message)
        await asyncio.to_thread(self._store.sent_spans, [outbox_id for outbox_id, _ in queued])
        return len(queued)
