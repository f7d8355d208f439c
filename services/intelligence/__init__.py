"""The intelligence service: aspects, notes and themes.

`intelligence` builds its parts over the trace store (notes, snapshots, themes) and the aspect
catalogues of the control store: the servicer every process answers with, and what the primary
runs on its timer: the derived outcome notes (`outcomes`, stored through ingest) and then the
clustering pass (`passes`, published whole so the pass bench can time its stages)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from functools import partial

from mcpd.aspects import AspectCatalogues
from mcpd.intelligence.v1.intelligence_service_pb2_grpc import (
    add_IntelligenceServiceServicer_to_server,
)
from mcpd.runtime.clock import Clock
from mcpd.runtime.config import IntelligenceSettings
from mcpd.runtime.server import ServiceRegistration
from mcpd.runtime.servicers import registration
from mcpd.storage.interfaces import TraceStore
from services.intelligence import passes
from services.intelligence.aspects import catalogue, enabled_aspects
from services.intelligence.outcomes import NoteWrites, OutcomeNotes, RunFacts
from services.intelligence.passes import PassLimits, ThemePass
from services.intelligence.peers import IngestNotes, OrchestratorRuns
from services.intelligence.progress import Progress
from services.intelligence.servicer import IntelligenceServicer
from services.intelligence.themes import ThemeReads

__all__ = [
    "IngestNotes",
    "Intelligence",
    "OrchestratorRuns",
    "OutcomeNotes",
    "PassLimits",
    "ThemePass",
    "intelligence",
    "passes",
    "registrations",
]


@dataclass(frozen=True, slots=True)
class Intelligence:
    """The intelligence role's parts: its servicer, its clustering pass and the derived notes
    written before each pass."""

    servicer: IntelligenceServicer
    themes_pass: ThemePass
    outcomes: OutcomeNotes

    async def run(self, stop: asyncio.Event) -> None:
        """Write derived notes and run the pass at every cutoff until `stop` is set."""
        await self.themes_pass.run(stop, before=self._derive)

    async def _derive(self, cutoff: int, window_from: int) -> None:
        await self.outcomes.write((window_from, cutoff))


def intelligence(
    settings: IntelligenceSettings,
    store: TraceStore,
    catalogues: AspectCatalogues,
    notes: NoteWrites,
    runs: RunFacts,
    clock: Clock,
) -> Intelligence:
    """The parts of the intelligence role over `store` and `catalogues`, storing derived notes
    through `notes` and reading what they say of runs from `runs`."""
    enabled = partial(enabled_aspects, catalogues)

    def order(project: str) -> list[str]:
        return list(catalogues.get(project))

    servicer = IntelligenceServicer(
        partial(catalogue, catalogues, settings=settings),
        Progress(store, enabled, settings.min_notes_to_cluster),
        ThemeReads(store, order),
        capable=store.capabilities().theme_analysis,
    )
    limits = PassLimits(
        min_notes=settings.min_notes_to_cluster,
        max_notes=settings.max_notes_per_pass,
        page_size=settings.page_size,
    )
    themes_pass = ThemePass(
        store,
        enabled,
        limits,
        clock,
        interval_s=settings.pass_interval_s,
        window_days=settings.window_days,
    )
    return Intelligence(
        servicer, themes_pass, OutcomeNotes(store, notes, runs, catalogues.get, clock)
    )


def registrations(parts: Intelligence) -> list[ServiceRegistration]:
    """The gRPC services this role serves."""
    return [registration(parts.servicer, add_IntelligenceServiceServicer_to_server)]
