"""How far each entity's analysis has got: the entity index and one entity's progress, computed
from the stored notes and snapshots on every read and never recorded.

An aspect is `ready` for an entity when the entity's newest snapshot covers it, `processing`
when it has at least the floor of notes and no such snapshot, `collecting` below the floor (the
notes counted are every stored note along it). An entity reads as the least advanced of its
project's enabled aspects.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import TypeAlias

from mcpd.intelligence.v1 import intelligence_service_pb2 as rpc
from mcpd.model.v1 import enums_pb2, intelligence_pb2
from mcpd.runtime import cursors
from mcpd.signals.messages import timestamp_of
from mcpd.storage.interfaces import ThemeRecords
from mcpd.storage.theme_records import AspectTally, Entity, EntityTally, SnapshotRow
from services.intelligence.messages import entity_of, kind_name, kind_value, snapshot_message

__all__ = ["Progress"]

_COLLECTING = enums_pb2.ASPECT_READINESS_COLLECTING
_PROCESSING = enums_pb2.ASPECT_READINESS_PROCESSING
_READY = enums_pb2.ASPECT_READINESS_READY
_ENTITIES = "entities"
_POSITION = (int, str, str)

Readiness: TypeAlias = enums_pb2.AspectReadiness.ValueType


class Progress:
    """ListEntities and GetAspectProgress over `store`; `enabled` names a project's enabled
    aspects in catalogue order; `floor` is the notes a pass needs."""

    def __init__(
        self, store: ThemeRecords, enabled: Callable[[str], Sequence[str]], floor: int
    ) -> None:
        self._store = store
        self._enabled = enabled
        self._floor = floor

    async def entities(
        self, request: rpc.ListEntitiesRequest
    ) -> intelligence_pb2.EntityIndexResponse:
        page = cursors.paging(request, _ENTITIES, _POSITION)
        kind = kind_name(request.entity_kind) if request.HasField("entity_kind") else None
        project = request.project
        tallies, aspects, latest, enabled = await asyncio.to_thread(
            self._entity_reads, project, kind
        )
        rows = sorted(tallies, key=_newest_first)
        if page.after is not None:
            after = tuple(page.after)
            rows = [row for row in rows if _newest_first(row) > after]
        answer = intelligence_pb2.EntityIndexResponse()
        shown = cursors.page_of(request, _ENTITIES, rows, page.limit, _newest_first, answer.page)
        by_entity: dict[Entity, dict[str, AspectTally]] = {}
        for tally in aspects:
            by_entity.setdefault(tally.entity, {})[tally.aspect] = tally
        for row in shown:
            snapshot = latest.get(row.entity)
            states = self._states(enabled, by_entity.get(row.entity, {}), snapshot)
            message = answer.entities.add(
                entity_kind=kind_value(row.entity.kind),
                entity_name=row.entity.name,
                trace_count=row.trace_count,
                note_count=row.note_count,
                enabled_aspects=len(enabled),
                ready_aspects=sum(state == _READY for state in states),
                readiness=min(states, default=_COLLECTING),
                last_note_at=timestamp_of(row.last_note_at),
            )
            if snapshot is not None:
                message.latest_snapshot_at.CopyFrom(timestamp_of(snapshot.cutoff_at))
        return answer

    def _entity_reads(
        self, project: str, kind: str | None
    ) -> tuple[list[EntityTally], list[AspectTally], dict[Entity, SnapshotRow], list[str]]:
        return (
            self._store.entity_tallies(project, kind),
            self._store.aspect_tallies(project, None),
            self._store.latest_snapshots(project),
            list(self._enabled(project)),
        )

    async def progress(self, request: rpc.EntityRequest) -> intelligence_pb2.AspectProgress:
        entity = entity_of(request.entity_kind, request.entity_name)
        project = request.project
        tallies, traces, latest, enabled = await asyncio.to_thread(
            self._progress_reads, project, entity
        )
        snapshot = latest.get(entity)
        by_aspect = {tally.aspect: tally for tally in tallies}
        states = self._states(enabled, by_aspect, snapshot)
        answer = intelligence_pb2.AspectProgress(
            entity_kind=request.entity_kind,
            entity_name=entity.name,
            readiness=min(states, default=_COLLECTING),
            trace_count=traces,
        )
        for aspect, state in zip(enabled, states, strict=True):
            tally = by_aspect.get(aspect)
            row = answer.aspects.add(
                aspect=aspect,
                readiness=state,
                note_count=tally.note_count if tally else 0,
                trace_count=tally.trace_count if tally else 0,
                notes_needed=max(0, self._floor - (tally.note_count if tally else 0)),
            )
            if tally is not None:
                row.last_note_at.CopyFrom(timestamp_of(tally.last_note_at))
        if snapshot is not None:
            answer.latest_snapshot.CopyFrom(snapshot_message(project, snapshot))
        return answer

    def _progress_reads(
        self, project: str, entity: Entity
    ) -> tuple[list[AspectTally], int, dict[Entity, SnapshotRow], list[str]]:
        """The entity's aspect tallies, its traces with a note, the newest snapshots and the
        project's enabled aspects, in one worker-thread hop."""
        totals = [t for t in self._store.entity_tallies(project, entity.kind) if t.entity == entity]
        return (
            self._store.aspect_tallies(project, entity),
            totals[0].trace_count if totals else 0,
            self._store.latest_snapshots(project),
            list(self._enabled(project)),
        )

    def _states(
        self,
        enabled: Sequence[str],
        tallies: dict[str, AspectTally],
        snapshot: SnapshotRow | None,
    ) -> list[Readiness]:
        covered = set(snapshot.aspects) if snapshot is not None else set()
        states = []
        for aspect in enabled:
            notes = tallies[aspect].note_count if aspect in tallies else 0
            if aspect in covered:
                states.append(_READY)
            elif notes >= self._floor:
                states.append(_PROCESSING)
            else:
                states.append(_COLLECTING)
        return states


def _newest_first(row: EntityTally) -> tuple[int, str, str]:
    return (-row.last_note_at, row.entity.kind, row.entity.name)
