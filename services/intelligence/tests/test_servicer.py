"""The servicer refuses every RPC with UNIMPLEMENTED naming `theme_analysis` on a store that
cannot hold notes and themes (no shipped backend: the capability is switched off here)."""

from __future__ import annotations

from typing import Any

import pytest

from mcpd.intelligence.v1 import intelligence_service_pb2 as rpc
from mcpd.model.v1 import intelligence_pb2
from mcpd.runtime.errors import Unimplemented
from mcpd.storage.interfaces import TraceStore
from services.intelligence.progress import Progress
from services.intelligence.servicer import IntelligenceServicer
from services.intelligence.themes import ThemeReads

CALLS: list[tuple[str, Any]] = [
    ("GetAspectCatalogue", rpc.GetAspectCatalogueRequest()),
    ("ListEntities", rpc.ListEntitiesRequest()),
    ("GetAspectProgress", rpc.EntityRequest()),
    ("ListSnapshots", rpc.ListSnapshotsRequest()),
    ("GetThemeFlow", rpc.GetThemeFlowRequest()),
    ("GetTheme", rpc.GetThemeRequest(theme_id="t")),
    ("ListThemeExamples", rpc.ListThemeExamplesRequest(theme_id="t")),
    ("GetThemeHistory", rpc.GetThemeHistoryRequest(theme_id="t")),
    ("GetTraceNotes", rpc.GetTraceNotesRequest(trace_id="t")),
]


# The store is never read: one backend is enough.
@pytest.mark.parametrize("trace_store", ["sqlite"], indirect=True)
@pytest.mark.parametrize(("method", "request_"), CALLS, ids=[name for name, _ in CALLS])
async def test_every_rpc_names_the_missing_capability(
    trace_store: TraceStore, method: str, request_: Any
) -> None:
    servicer = IntelligenceServicer(
        lambda project: intelligence_pb2.AspectCatalogue(),
        Progress(trace_store, lambda project: ["goal"], 50),
        ThemeReads(trace_store, lambda project: ["goal"]),
        capable=False,
    )
    with pytest.raises(Unimplemented) as refused:
        await getattr(servicer, method)(request_, None)
    assert refused.value.field == "theme_analysis"
