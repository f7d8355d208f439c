"""Notes for the intelligence tests, written as ingest writes them: each on a trace of its own
whose root span names the entity, with its sketch under a test key."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Sequence
from typing import Any

from mcpd.signals.batch import SignalBatch
from mcpd.storage.interfaces import ThemeRecords, TraceStore
from mcpd.storage.theme_records import Entity
from mcpd.themes import encode, sketch_of
from tests.libs.signals.samples import aspect_note, span

KEY = b"deployment-key-for-tests"
PROJECT = "p"
AGENT = Entity("agent", "support-bot")
HOUR_NS = 3_600 * 1_000_000_000
DAY_NS = 24 * HOUR_NS


def note_rows(
    notes: Iterable[tuple[str, str, int]], aspect: str = "goal", entity: Entity = AGENT
) -> SignalBatch:
    """A batch of (note id, text, created_at) notes, each with its trace's root span."""
    spans, rows = [], []
    for note_id, text, created_at in notes:
        trace_id = f"t-{note_id}"
        spans.append(
            span(
                f"root-{note_id}",
                trace_id=trace_id,
                is_root=True,
                entity_kind=entity.kind,
                entity_name=entity.name,
                start_time=created_at - 1_000,
            )
        )
        rows.append(
            aspect_note(
                f"{aspect}-{note_id}",
                trace_id=trace_id,
                aspect=aspect,
                text=text,
                created_at=created_at,
                sketch=encode(sketch_of(text, KEY)),
            )
        )
    return SignalBatch(
        key_project=PROJECT, ingest_key=None, received_at=0, spans=spans, aspect_notes=rows
    )


def write_notes(store: TraceStore, batches: Sequence[SignalBatch]) -> None:
    for batch in batches:
        store.write_batches([batch])


def snapshot_digest(store: ThemeRecords, snapshot_id: str) -> str:
    """A digest of everything a pass wrote for one snapshot, as the store reads it back."""
    snapshot = store.snapshot(PROJECT, snapshot_id)
    assert snapshot is not None
    themes = store.snapshot_themes(PROJECT, snapshot_id, None)
    members = store.snapshot_members(PROJECT, snapshot_id, snapshot.aspects)
    endings = [
        point.ending
        for theme in {row.theme_id for row in themes} | _ended(store, snapshot.entity)
        for point in store.theme_history(PROJECT, theme, None)
        if point.ending is not None and point.snapshot.snapshot_id == snapshot_id
    ]
    document: dict[str, Any] = {
        "snapshot": repr(snapshot),
        "themes": [repr(row) for row in themes],
        "members": sorted(repr(row) for row in members),
        "endings": sorted(repr(row) for row in endings),
    }
    return hashlib.sha256(json.dumps(document, sort_keys=True).encode()).hexdigest()


def _ended(store: ThemeRecords, entity: Entity) -> set[str]:
    return {
        row.theme_id
        for snapshot in store.snapshots(PROJECT, entity, cutoff_from=None, cutoff_to=None)
        for row in store.snapshot_themes(PROJECT, snapshot.snapshot_id, None)
    }
