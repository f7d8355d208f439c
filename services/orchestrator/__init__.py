"""The orchestrator service: durable runs with their definitions, events, workers and leases."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Protocol

import grpc

from mcpd.orchestrator.v1.orchestrator_service_pb2_grpc import (
    add_OrchestratorServiceServicer_to_server,
)
from mcpd.pricing import load_price_book
from mcpd.runtime.clock import Clock
from mcpd.runtime.server import ServiceRegistration
from mcpd.runtime.servicers import registration
from mcpd.storage.interfaces import PriceOverrides, RunEvents, RunSpans, RunSubjectErasure
from services.orchestrator.causes import Causes
from services.orchestrator.definitions import Definitions, DefinitionStore
from services.orchestrator.events import Events
from services.orchestrator.leases import Leases
from services.orchestrator.mover import Mover, MoverStore
from services.orchestrator.outbox import SpanOutbox
from services.orchestrator.prices import Prices
from services.orchestrator.runs import Runs, RunStore
from services.orchestrator.servicer import OrchestratorServicer
from services.orchestrator.shapes import Shapes
from services.orchestrator.timers import Timers
from services.orchestrator.wakeups import Siblings, Wakeups

# The domain objects are published for the in-process stage bench (bench/orchestrator/stages.py).
__all__ = [
    "Leases",
    "Mover",
    "Orchestrator",
    "OrchestratorStore",
    "Prices",
    "Runs",
    "Siblings",
    "Wakeups",
]


class OrchestratorStore(
    RunSubjectErasure, DefinitionStore, RunStore, MoverStore, RunEvents, RunSpans, Protocol
):
    """What the orchestrator needs of the run store."""


class Orchestrator:
    """The orchestrator role over the run store it owns (and the control store's price
    overrides): its gRPC service, and the timer tick that moves runs whose deadlines come
    due."""

    def __init__(
        self,
        store: OrchestratorStore,
        control: PriceOverrides,
        *,
        clock: Clock,
        lease_ttl_ms: int,
        siblings: Siblings | None = None,
    ) -> None:
        self._store = store
        self.wakeups = Wakeups(siblings)
        mover = Mover(store, clock, self.wakeups, lease_ttl_ms=lease_ttl_ms)
        prices = Prices(control, load_price_book(), monotonic=clock.monotonic)
        self._servicer = OrchestratorServicer(
            store,
            Definitions(store, clock),
            Runs(store, mover),
            Leases(mover, prices),
            Events(store, store, mover),
            Causes(store, mover.bodies),
            Shapes(store),
            lease_ttl_ms,
        )
        self.timers = Timers(mover)

    def registrations(self) -> list[ServiceRegistration]:
        """The gRPC services this role serves."""
        return [registration(self._servicer, add_OrchestratorServiceServicer_to_server)]

    async def tick(self, stop: asyncio.Event) -> None:
        """Fire timers as they come due until `stop` is set."""
        await self.timers.run(stop)

    def span_outbox(
        self, ingest: grpc.aio.Channel, metadata: Sequence[tuple[str, str]]
    ) -> SpanOutbox:
        """The sender of the runs' spans to ingest at `ingest`, presenting `metadata` (the
        service credential)."""
        return SpanOutbox(self._store, ingest, metadata)
