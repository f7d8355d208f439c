"""The intelligence service's RPCs: the aspect catalogue, progress, snapshots, flows, themes,
their examples and histories, and a trace's notes. Each RPC hands its request to the part that
owns it; every one refuses with UNIMPLEMENTED naming `theme_analysis` on a store without it."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import grpc

from mcpd.intelligence.v1 import intelligence_service_pb2 as rpc
from mcpd.intelligence.v1 import intelligence_service_pb2_grpc
from mcpd.model.v1 import intelligence_pb2
from mcpd.runtime.errors import Unimplemented
from services.intelligence.progress import Progress
from services.intelligence.themes import ThemeReads

Context = grpc.aio.ServicerContext[Any, Any]


class IntelligenceServicer(intelligence_service_pb2_grpc.IntelligenceServiceServicer):
    """Every IntelligenceService RPC, over the parts that own them. `catalogue` answers a
    project's AspectCatalogue; `capable` says whether the store holds notes and themes."""

    def __init__(
        self,
        catalogue: Callable[[str], intelligence_pb2.AspectCatalogue],
        progress: Progress,
        themes: ThemeReads,
        *,
        capable: bool,
    ) -> None:
        self._catalogue = catalogue
        self._progress = progress
        self._themes = themes
        self._capable = capable

    def _check(self) -> None:
        if not self._capable:
            raise Unimplemented(
                "this storage backend holds no notes or themes", field="theme_analysis"
            )

    async def GetAspectCatalogue(
        self, request: rpc.GetAspectCatalogueRequest, context: Context
    ) -> intelligence_pb2.AspectCatalogue:
        self._check()
        return await asyncio.to_thread(self._catalogue, request.project)

    async def ListEntities(
        self, request: rpc.ListEntitiesRequest, context: Context
    ) -> intelligence_pb2.EntityIndexResponse:
        self._check()
        return await self._progress.entities(request)

    async def GetAspectProgress(
        self, request: rpc.EntityRequest, context: Context
    ) -> intelligence_pb2.AspectProgress:
        self._check()
        return await self._progress.progress(request)

    async def ListSnapshots(
        self, request: rpc.ListSnapshotsRequest, context: Context
    ) -> intelligence_pb2.SnapshotListResponse:
        self._check()
        return await self._themes.snapshots(request)

    async def GetThemeFlow(
        self, request: rpc.GetThemeFlowRequest, context: Context
    ) -> intelligence_pb2.ThemeFlow:
        self._check()
        return await self._themes.flow(request)

    async def GetTheme(
        self, request: rpc.GetThemeRequest, context: Context
    ) -> intelligence_pb2.ThemeDetail:
        self._check()
        return await self._themes.theme(request)

    async def ListThemeExamples(
        self, request: rpc.ListThemeExamplesRequest, context: Context
    ) -> intelligence_pb2.ThemeExampleListResponse:
        self._check()
        return await self._themes.examples(request)

    async def GetThemeHistory(
        self, request: rpc.GetThemeHistoryRequest, context: Context
    ) -> intelligence_pb2.ThemeHistory:
        self._check()
        return await self._themes.history(request)

    async def GetTraceNotes(
        self, request: rpc.GetTraceNotesRequest, context: Context
    ) -> intelligence_pb2.TraceAspectNotes:
        self._check()
        return await self._themes.trace_notes(request)
