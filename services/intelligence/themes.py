"""The theme reads: one entity's snapshots, a flow across aspects, one theme, its examples, its
history, and one trace's notes. Every read is a lookup of what a pass wrote; nothing is
clustered here.

- **Snapshots**: an inventory pages consecutive snapshots oldest first; landmarks choose
  `points` of them: the range's oldest and newest, and for each of the points between, the
  snapshot whose cutoff is nearest an even step of the range's time (ties: the earlier), each
  chosen once.
- **Flow**: per aspect a stage of its themes by traces (largest first, then theme id), the
  first `theme_limit_per_stage` as nodes, the rest folded into one `other` node, the traces in
  no theme as one `noise` node; links count the traces two neighbouring stages' nodes share.
- **Theme**: a theme id the project never had is NOT_FOUND; a snapshot that does not hold it
  answers without a theme. The current snapshot is the entity's newest.
"""

from __future__ import annotations

import asyncio
import itertools
from collections import Counter
from collections.abc import Callable, Sequence

from mcpd.intelligence.v1 import intelligence_service_pb2 as rpc
from mcpd.model.v1 import enums_pb2, intelligence_pb2
from mcpd.runtime import cursors
from mcpd.runtime.errors import FailedPrecondition, InvalidArgument, NotFound
from mcpd.signals.messages import aspect_note_message, nanos_of, timestamp_of
from mcpd.signals.rows import AspectNoteRow
from mcpd.storage.interfaces import ThemeRecords
from mcpd.storage.theme_records import Entity, HistoryRow, MemberRow, SnapshotRow, ThemeRow
from services.intelligence.messages import (
    entity_of,
    snapshot_message,
    state_value,
    theme_message,
)
from services.intelligence.passes import NOISE

__all__ = ["DEFAULT_POINTS", "DEFAULT_STAGE_THEMES", "ThemeReads"]

DEFAULT_POINTS = 24
MAX_POINTS = 100
DEFAULT_STAGE_THEMES = 8
MAX_STAGE_THEMES = 50
MIN_STAGES, MAX_STAGES = 2, 4
NOISE_LABEL = "Notes that joined no theme"
OTHER_LABEL = "Other themes"
_SNAPSHOTS = "snapshots"
_EXAMPLES = "theme_examples"
_HISTORY = "theme_history"
_LANDMARKS = rpc.SNAPSHOT_PRESENTATION_LANDMARKS


class ThemeReads:
    """The theme RPCs over `store`; `catalogue` names a project's aspects in catalogue order."""

    def __init__(self, store: ThemeRecords, catalogue: Callable[[str], Sequence[str]]) -> None:
        self._store = store
        self._catalogue = catalogue

    # --- snapshots ---------------------------------------------------------------------------

    async def snapshots(
        self, request: rpc.ListSnapshotsRequest
    ) -> intelligence_pb2.SnapshotListResponse:
        entity = entity_of(request.entity_kind, request.entity_name)
        cutoff_from = nanos_of(getattr(request, "from")) if request.HasField("from") else None
        cutoff_to = nanos_of(request.to) if request.HasField("to") else None
        found = await asyncio.to_thread(
            self._store.snapshots,
            request.project,
            entity,
            cutoff_from=cutoff_from,
            cutoff_to=cutoff_to,
        )
        answer = intelligence_pb2.SnapshotListResponse(total=len(found))
        answer.page.total = len(found)
        if request.presentation == _LANDMARKS:
            for row, reason in landmarks(found, _points(request)):
                answer.snapshots.add(snapshot=snapshot_message(request.project, row), reason=reason)
            return answer
        page = cursors.paging(request, _SNAPSHOTS, (int, str))
        rows = found
        if page.after is not None:
            after = (page.after[0], page.after[1])
            rows = [row for row in found if (row.cutoff_at, row.snapshot_id) > after]
        shown = cursors.page_of(request, _SNAPSHOTS, rows, page.limit, _snapshot_key, answer.page)
        for row in shown:
            answer.snapshots.add(snapshot=snapshot_message(request.project, row))
        return answer

    # --- flow --------------------------------------------------------------------------------

    async def flow(self, request: rpc.GetThemeFlowRequest) -> intelligence_pb2.ThemeFlow:
        entity = entity_of(request.entity_kind, request.entity_name)
        limit = _stage_limit(request)
        snapshot = await self._snapshot(request.project, entity, _optional(request, "snapshot_id"))
        aspects = _flow_aspects(request, snapshot)
        themes, members = await asyncio.to_thread(
            self._flow_reads, request.project, snapshot.snapshot_id, aspects
        )
        flow = intelligence_pb2.ThemeFlow(snapshot=snapshot_message(request.project, snapshot))
        assigned: list[dict[str, str]] = []
        for aspect in aspects:
            stage, nodes = _stage(aspect, themes, members, limit)
            flow.stages.append(stage)
            assigned.append(nodes)
        for source, target in itertools.pairwise(assigned):
            flow.links.extend(_links(source, target))
        return flow

    def _flow_reads(
        self, project: str, snapshot_id: str, aspects: Sequence[str]
    ) -> tuple[list[ThemeRow], list[MemberRow]]:
        return (
            self._store.snapshot_themes(project, snapshot_id, aspects),
            self._store.snapshot_members(project, snapshot_id, aspects),
        )

    # --- one theme ---------------------------------------------------------------------------

    async def theme(self, request: rpc.GetThemeRequest) -> intelligence_pb2.ThemeDetail:
        snapshot, theme = await self._theme_in(
            request.project,
            request.theme_id,
            _optional(request, "snapshot_id"),
            _optional(request, "aspect"),
        )
        detail = intelligence_pb2.ThemeDetail(snapshot=snapshot_message(request.project, snapshot))
        if theme is not None:
            detail.theme.CopyFrom(theme_message(theme))
        return detail

    async def examples(
        self, request: rpc.ListThemeExamplesRequest
    ) -> intelligence_pb2.ThemeExampleListResponse:
        project = request.project
        page = cursors.paging(request, _EXAMPLES, (int, str))
        snapshot, aspect = await self._examples_of(request)
        answer = intelligence_pb2.ThemeExampleListResponse()
        if aspect is None:
            answer.page.total = 0
            return answer
        after = (-page.after[0], page.after[1]) if page.after is not None else None
        rows = await asyncio.to_thread(
            self._store.theme_members,
            project,
            snapshot.snapshot_id,
            aspect,
            request.theme_id,
            after=after,
            limit=page.limit + 1,
        )
        answer.page.total = await asyncio.to_thread(
            self._store.member_count, project, snapshot.snapshot_id, aspect, request.theme_id
        )
        shown = cursors.page_of(request, _EXAMPLES, rows, page.limit, _member_key, answer.page)
        texts, starts = await asyncio.to_thread(self._example_reads, project, shown)
        for row in shown:
            example = answer.examples.add(
                note_id=row.note_id,
                trace_id=row.trace_id,
                text=texts.get(row.note_id, ""),
                similarity=row.similarity,
            )
            if row.trace_id in starts:
                example.trace_started_at.CopyFrom(timestamp_of(starts[row.trace_id]))
        return answer

    async def _examples_of(
        self, request: rpc.ListThemeExamplesRequest
    ) -> tuple[SnapshotRow, str | None]:
        """The snapshot and aspect whose members are read (aspect None: the snapshot does not
        hold the theme)."""
        aspect = _optional(request, "aspect")
        snapshot_id = _optional(request, "snapshot_id")
        if request.theme_id != NOISE:
            snapshot, theme = await self._theme_in(
                request.project, request.theme_id, snapshot_id, aspect
            )
            return snapshot, theme.aspect if theme is not None else None
        if snapshot_id is None:
            raise InvalidArgument(
                "the noise is read from one snapshot: name it", field="snapshot_id"
            )
        if aspect is None:
            raise InvalidArgument("the noise is read along one aspect: name it", field="aspect")
        snapshot = await self._stored_snapshot(request.project, snapshot_id)
        return snapshot, aspect if aspect in snapshot.aspects else None

    def _example_reads(
        self, project: str, rows: Sequence[MemberRow]
    ) -> tuple[dict[str, str], dict[str, int]]:
        return (
            self._store.note_texts(project, [row.note_id for row in rows]),
            self._store.trace_starts(project, sorted({row.trace_id for row in rows})),
        )

    async def history(self, request: rpc.GetThemeHistoryRequest) -> intelligence_pb2.ThemeHistory:
        points = await asyncio.to_thread(
            self._store.theme_history,
            request.project,
            request.theme_id,
            _optional(request, "aspect"),
        )
        if not points:
            raise NotFound(f"no theme {request.theme_id!r}", field="theme_id")
        rows = [point.theme for point in points if point.theme is not None]
        answer = intelligence_pb2.ThemeHistory(
            theme_id=request.theme_id,
            aspect=rows[-1].aspect if rows else "",
            label=rows[-1].label if rows else "",
        )
        answer.page.total = len(points)
        page = cursors.paging(request, _HISTORY, (int, str))
        if page.after is not None:
            after = (page.after[0], page.after[1])
            points = [point for point in points if _point_key(point) > after]
        shown = cursors.page_of(request, _HISTORY, points, page.limit, _point_key, answer.page)
        answer.points.extend(_history_point(point) for point in shown)
        return answer

    async def trace_notes(
        self, request: rpc.GetTraceNotesRequest
    ) -> intelligence_pb2.TraceAspectNotes:
        project, trace_id = request.project, request.trace_id
        notes, starts, names = await asyncio.to_thread(self._trace_note_reads, project, trace_id)
        if not notes and trace_id not in starts:
            raise NotFound(f"no trace {trace_id!r}", field="trace_id")
        order = {name: index for index, name in enumerate(names)}
        notes.sort(key=lambda note: (order.get(note["aspect"], len(order)), note["aspect"]))
        return intelligence_pb2.TraceAspectNotes(
            trace_id=trace_id, notes=[aspect_note_message(note) for note in notes]
        )

    def _trace_note_reads(
        self, project: str, trace_id: str
    ) -> tuple[list[AspectNoteRow], dict[str, int], Sequence[str]]:
        return (
            self._store.trace_notes(project, trace_id),
            self._store.trace_starts(project, [trace_id]),
            self._catalogue(project),
        )

    # --- shared ------------------------------------------------------------------------------

    async def _theme_in(
        self, project: str, theme_id: str, snapshot_id: str | None, aspect: str | None
    ) -> tuple[SnapshotRow, ThemeRow | None]:
        """The snapshot read (the one named, else the theme's entity's newest) and the theme's
        row in it; NotFound for a theme id the project never had."""
        entity = await asyncio.to_thread(self._store.theme_entity, project, theme_id)
        if entity is None:
            raise NotFound(f"no theme {theme_id!r}", field="theme_id")
        snapshot = await self._snapshot(project, entity, snapshot_id)
        rows = await asyncio.to_thread(
            self._store.snapshot_themes,
            project,
            snapshot.snapshot_id,
            [aspect] if aspect is not None else None,
        )
        found = [row for row in rows if row.theme_id == theme_id]
        return snapshot, (found[0] if found else None)

    async def _snapshot(self, project: str, entity: Entity, snapshot_id: str | None) -> SnapshotRow:
        if snapshot_id is not None:
            snapshot = await self._stored_snapshot(project, snapshot_id)
            if snapshot.entity != entity:
                raise NotFound(
                    f"snapshot {snapshot_id!r} is not one of this entity's", field="snapshot_id"
                )
            return snapshot
        latest = await asyncio.to_thread(self._store.latest_snapshots, project)
        if entity not in latest:
            raise FailedPrecondition(
                "no pass has written a snapshot of this entity yet: read its progress",
                field="entity_name",
            )
        return latest[entity]

    async def _stored_snapshot(self, project: str, snapshot_id: str) -> SnapshotRow:
        snapshot = await asyncio.to_thread(self._store.snapshot, project, snapshot_id)
        if snapshot is None:
            raise NotFound(f"no snapshot {snapshot_id!r}", field="snapshot_id")
        return snapshot


def landmarks(
    found: Sequence[SnapshotRow], points: int
) -> list[tuple[SnapshotRow, enums_pb2.SnapshotLandmarkReason.ValueType]]:
    """The snapshots a timeline of `points` draws (see the module docstring), oldest first."""
    if not found:
        return []
    first, last = found[0], found[-1]
    chosen = {0: enums_pb2.SNAPSHOT_LANDMARK_REASON_RANGE_START}
    chosen[len(found) - 1] = enums_pb2.SNAPSHOT_LANDMARK_REASON_RANGE_END
    span = last.cutoff_at - first.cutoff_at
    steps = points - 1
    for step in range(1, steps):
        target = first.cutoff_at + span * step // steps
        free = [i for i in range(len(found)) if i not in chosen]
        if not free:
            break
        nearest = min(free, key=lambda i: (abs(found[i].cutoff_at - target), i))
        chosen[nearest] = enums_pb2.SNAPSHOT_LANDMARK_REASON_TIME_SAMPLE
    return [(found[i], chosen[i]) for i in sorted(chosen)]


def _stage(
    aspect: str, themes: Sequence[ThemeRow], members: Sequence[MemberRow], limit: int
) -> tuple[intelligence_pb2.ThemeStage, dict[str, str]]:
    """One aspect's stage, and the node each of its traces is assigned to."""
    labels = {row.theme_id: row.label for row in themes if row.aspect == aspect}
    theme_of: dict[str, str] = {}
    for member in sorted(members, key=lambda m: (m.note_id, m.theme_id)):
        if member.aspect == aspect:
            theme_of.setdefault(member.trace_id, member.theme_id)
    sizes = Counter(theme_of.values())
    ranked = sorted((t for t in sizes if t != NOISE), key=lambda t: (-sizes[t], t))
    shown, folded = ranked[:limit], set(ranked[limit:])
    node_of: dict[str, str] = {}
    for trace_id, theme_id in theme_of.items():
        if theme_id == NOISE:
            node_of[trace_id] = f"{aspect}:noise"
        elif theme_id in folded:
            node_of[trace_id] = f"{aspect}:other"
        else:
            node_of[trace_id] = f"{aspect}:theme:{theme_id}"
    total = len(theme_of)
    stage = intelligence_pb2.ThemeStage(aspect=aspect, trace_count=total)
    for theme_id in shown:
        stage.nodes.add(
            node_id=f"{aspect}:theme:{theme_id}",
            kind=enums_pb2.THEME_NODE_KIND_THEME,
            theme_id=theme_id,
            label=labels.get(theme_id, ""),
            trace_count=sizes[theme_id],
            coverage=sizes[theme_id] / total,
        )
    noise = sizes.get(NOISE, 0)
    if noise:
        stage.nodes.add(
            node_id=f"{aspect}:noise",
            kind=enums_pb2.THEME_NODE_KIND_NOISE,
            label=NOISE_LABEL,
            trace_count=noise,
            coverage=noise / total,
        )
    other = sum(sizes[theme_id] for theme_id in folded)
    if other:
        stage.nodes.add(
            node_id=f"{aspect}:other",
            kind=enums_pb2.THEME_NODE_KIND_OTHER,
            label=f"{OTHER_LABEL} ({len(folded)})",
            trace_count=other,
            coverage=other / total,
        )
    return stage, node_of


def _links(source: dict[str, str], target: dict[str, str]) -> list[intelligence_pb2.ThemeLink]:
    pairs = Counter((node, target[trace]) for trace, node in source.items() if trace in target)
    source_sizes = Counter(source.values())
    target_sizes = Counter(target.values())
    return [
        intelligence_pb2.ThemeLink(
            source_node_id=a,
            target_node_id=b,
            trace_count=count,
            source_share=count / source_sizes[a],
            target_share=count / target_sizes[b],
        )
        for (a, b), count in sorted(pairs.items(), key=lambda item: (-item[1], item[0]))
    ]


def _history_point(point: HistoryRow) -> intelligence_pb2.ThemeHistoryPoint:
    snap = point.snapshot
    message = intelligence_pb2.ThemeHistoryPoint(
        snapshot_id=snap.snapshot_id,
        cutoff_at=timestamp_of(snap.cutoff_at),
        window_from=timestamp_of(snap.window_from),
        window_to=timestamp_of(snap.window_to),
    )
    if point.theme is not None:
        theme = point.theme
        message.state = state_value(theme.state)
        message.note_count = theme.note_count
        message.trace_count = theme.trace_count
        message.coverage = theme.coverage
        message.split_from.extend(theme.split_from)
        message.split_into.extend(theme.split_into)
        message.merged_from.extend(theme.merged_from)
    elif point.ending is not None:
        message.state = state_value(point.ending.state)
        message.merged_into.extend(point.ending.merged_into)
    return message


def _flow_aspects(request: rpc.GetThemeFlowRequest, snapshot: SnapshotRow) -> list[str]:
    aspects = list(request.aspects) or list(snapshot.aspects[:MAX_STAGES])
    if not MIN_STAGES <= len(aspects) <= MAX_STAGES:
        raise InvalidArgument(
            f"a flow reads {MIN_STAGES} to {MAX_STAGES} aspects, got {len(aspects)}"
            + ("" if request.aspects else " in this snapshot"),
            field="aspects",
        )
    if len(set(aspects)) != len(aspects):
        raise InvalidArgument("an aspect appears twice", field="aspects")
    missing = [aspect for aspect in aspects if aspect not in snapshot.aspects]
    if missing:
        raise InvalidArgument(
            f"this snapshot covers no {missing[0]!r} (covered: {', '.join(snapshot.aspects)})",
            field="aspects",
        )
    return aspects


def _stage_limit(request: rpc.GetThemeFlowRequest) -> int:
    if not request.HasField("theme_limit_per_stage"):
        return DEFAULT_STAGE_THEMES
    if not 1 <= request.theme_limit_per_stage <= MAX_STAGE_THEMES:
        raise InvalidArgument(
            f"theme_limit_per_stage must be between 1 and {MAX_STAGE_THEMES}",
            field="theme_limit_per_stage",
        )
    return request.theme_limit_per_stage


def _points(request: rpc.ListSnapshotsRequest) -> int:
    if not request.HasField("points"):
        return DEFAULT_POINTS
    if not 2 <= request.points <= MAX_POINTS:
        raise InvalidArgument(f"points must be between 2 and {MAX_POINTS}", field="points")
    return request.points


def _optional(request: object, name: str) -> str | None:
    value: str = getattr(request, name)
    return value if request.HasField(name) else None  # type: ignore[attr-defined]


def _snapshot_key(row: SnapshotRow) -> tuple[int, str]:
    return (row.cutoff_at, row.snapshot_id)


def _member_key(row: MemberRow) -> tuple[int, str]:
    return (-row.similarity, row.note_id)


def _point_key(point: HistoryRow) -> tuple[int, str]:
    return (point.snapshot.cutoff_at, point.snapshot.snapshot_id)
