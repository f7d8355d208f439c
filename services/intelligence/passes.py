"""The clustering pass: on a timer, per entity and aspect, the themes of a moving window of notes,
matched against the entity's earlier themes and written as one snapshot.

- **When**: at every multiple of `intelligence.pass_interval_s` since the epoch (the cutoff), so
  every replica runs the pass for the same cutoffs; a replica that starts between two runs the
  latest cutoff at once. The window is [cutoff - `intelligence.window_days`, cutoff).
- **What**: for every entity with a note in the window, each enabled aspect (catalogue order)
  with at least `min_notes_to_cluster` notes in it: the newest `max_notes_per_pass` of them,
  read `page_size` at a time (more in the window: the snapshot is `capped`), clustered
  (`mcpd.themes.cluster`) and matched with the previous snapshot's themes
  (`mcpd.themes.evolve`). An entity with no aspect at the floor gets no snapshot.
- **Identity**: the snapshot id is a digest of (project, entity, cutoff) and a new theme's id a
  digest of (project, entity, aspect, cutoff, label note id), so two replicas reading the same
  notes write byte-identical snapshots; the store keeps the first one written.

Coverage is a theme's notes over the notes the pass read along its aspect; a member's similarity
is its sketch's equal positions with its theme's label (noise members: 0).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

from mcpd.runtime.clock import Clock, epoch_nanos
from mcpd.storage.interfaces import ThemeRecords
from mcpd.storage.theme_records import (
    EndingRow,
    Entity,
    MemberRow,
    PassNote,
    SnapshotRow,
    SnapshotWrite,
    ThemeRow,
)
from mcpd.themes import (
    POSITIONS,
    Clustering,
    Note,
    Sketch,
    cluster,
    decode,
    encode,
    similarity,
)
from mcpd.themes.evolution import Evolution, Evolved, Found, Wording, evolve, representatives

__all__ = ["NOISE", "PassLimits", "ThemePass", "cutoff_before"]

log = logging.getLogger("mcpd.intelligence")

NOISE = "noise"
"""The theme id of the notes that joined no theme (the examples route reads them by it)."""

_NS = 1_000_000_000
_DAY_NS = 86_400 * _NS
_SKETCH_BYTES = POSITIONS * 8


Before = Callable[[int, int], Awaitable[object]]
"""What runs before a pass, given its cutoff and the start of its window."""


@dataclass(frozen=True, slots=True)
class PassLimits:
    """The bounds a pass runs under (`AspectLimits`)."""

    min_notes: int
    max_notes: int
    page_size: int


def cutoff_before(now_ns: int, interval_ns: int) -> int:
    """The latest cutoff at or before `now_ns`: a multiple of the interval since the epoch."""
    return now_ns - now_ns % interval_ns


def _digest(*parts: str) -> str:
    return hashlib.blake2b("\x1f".join(parts).encode(), digest_size=16).hexdigest()


@dataclass(frozen=True, slots=True)
class _Read:
    """One aspect's notes as a pass read them."""

    aspect: str
    notes: list[PassNote]
    capped: bool


class ThemePass:
    """Writes snapshots (see the module docstring). `aspects` names a project's enabled aspects
    in catalogue order."""

    def __init__(
        self,
        store: ThemeRecords,
        aspects: Callable[[str], Sequence[str]],
        limits: PassLimits,
        clock: Clock,
        *,
        interval_s: float,
        window_days: int,
    ) -> None:
        self._store = store
        self._aspects = aspects
        self._limits = limits
        self._clock = clock
        self._interval_ns = max(1, round(interval_s * _NS))
        self._window_ns = window_days * _DAY_NS

    async def run(self, stop: asyncio.Event, before: Before | None = None) -> None:
        """Run the pass at every cutoff until `stop` is set, awaiting `before` first (the
        derived notes, `outcomes`)."""
        done: int | None = None
        while not stop.is_set():
            now = epoch_nanos(self._clock.now())
            cutoff = cutoff_before(now, self._interval_ns)
            if cutoff != done:
                try:
                    if before is not None:
                        await before(cutoff, cutoff - self._window_ns)
                    await asyncio.to_thread(self.pass_at, cutoff)
                    done = cutoff
                except Exception:
                    log.exception("theme pass failed", extra={"cutoff": cutoff})
            wait_s = (cutoff + self._interval_ns - epoch_nanos(self._clock.now())) / _NS
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), timeout=max(wait_s, 0.05))

    def pass_at(self, cutoff: int) -> list[str]:
        """Write the snapshots of the pass at `cutoff`; the ids of those written."""
        window = (cutoff - self._window_ns, cutoff)
        written = []
        for project, entity in self._store.noted_entities(*window):
            snapshot_id = self.snapshot_entity(project, entity, cutoff)
            if snapshot_id is not None:
                written.append(snapshot_id)
        return written

    def snapshot_entity(self, project: str, entity: Entity, cutoff: int) -> str | None:
        """Write one entity's snapshot at `cutoff`; its id, or None when it was stored already
        or no aspect reached the floor."""
        snapshot_id = _digest("snapshot", project, entity.kind, entity.name, str(cutoff))
        if self._store.snapshot(project, snapshot_id) is not None:
            return None
        window = (cutoff - self._window_ns, cutoff)
        reads = [
            read
            for aspect in self._aspects(project)
            if len((read := self._read(project, entity, aspect, window)).notes)
            >= self._limits.min_notes
        ]
        if not reads:
            return None
        write = self._snapshot(project, entity, snapshot_id, cutoff, reads)
        return snapshot_id if self._store.write_snapshot(project, write) else None

    def _read(self, project: str, entity: Entity, aspect: str, window: tuple[int, int]) -> _Read:
        limits = self._limits
        notes: list[PassNote] = []
        before: tuple[int, str] | None = None
        while len(notes) < limits.max_notes:
            want = min(limits.page_size, limits.max_notes - len(notes))
            page = self._store.pass_notes(
                project, entity, aspect, window, before=before, limit=want
            )
            notes.extend(page)
            if len(page) < want:
                return _Read(aspect, notes, capped=False)
            before = (page[-1].created_at, page[-1].note_id)
        more = self._store.pass_notes(project, entity, aspect, window, before=before, limit=1)
        return _Read(aspect, notes, capped=bool(more))

    def _snapshot(
        self,
        project: str,
        entity: Entity,
        snapshot_id: str,
        cutoff: int,
        reads: Sequence[_Read],
    ) -> SnapshotWrite:
        themes: list[ThemeRow] = []
        members: list[MemberRow] = []
        endings: list[EndingRow] = []
        for read in reads:
            aspect_themes = _AspectPass(self._store, project, entity, snapshot_id, cutoff, read)
            themes += aspect_themes.themes
            members += aspect_themes.members
            endings += aspect_themes.endings
        stored = self._store.snapshots(project, entity, cutoff_from=None, cutoff_to=cutoff)
        snapshot = SnapshotRow(
            snapshot_id=snapshot_id,
            entity=entity,
            aspects=tuple(read.aspect for read in reads),
            ordinal=len(stored) + 1,
            cutoff_at=cutoff,
            window_from=cutoff - self._window_ns,
            window_to=cutoff,
            trace_count=len({note.trace_id for read in reads for note in read.notes}),
            note_count=sum(len(read.notes) for read in reads),
            capped=any(read.capped for read in reads),
        )
        return SnapshotWrite(snapshot, tuple(themes), tuple(members), tuple(endings))


class _AspectPass:
    """The rows of one aspect of one snapshot: its themes, their members and the endings."""

    def __init__(
        self,
        store: ThemeRecords,
        project: str,
        entity: Entity,
        snapshot_id: str,
        cutoff: int,
        read: _Read,
    ) -> None:
        self._sketches = _decoded(read.notes)
        self._traces = {note.note_id: note.trace_id for note in read.notes}
        clustering = cluster(Note(note_id, sketch) for note_id, sketch in self._sketches.items())
        previous, earlier = store.theme_wordings(project, entity, read.aspect, cutoff)
        found = [
            Found(theme.label_note_id, theme.note_ids, representatives(theme, self._sketches))
            for theme in clustering.themes
        ]

        def new_id(theme: Found) -> str:
            parts = (project, entity.kind, entity.name, read.aspect, str(cutoff))
            return _digest("theme", *parts, theme.label_note_id)

        evolution = evolve(_wordings(previous), _wordings(earlier), found, new_id)
        labels = store.note_texts(project, [theme.label_note_id for theme in found])
        self.themes = [
            self._theme_row(snapshot_id, read, entity, evolved, labels, len(read.notes))
            for evolved in evolution.themes
        ]
        self.members = self._members(read.aspect, evolution, clustering)
        self.endings = [
            EndingRow(read.aspect, ending.theme_id, ending.state, ending.merged_into)
            for ending in evolution.endings
        ]

    def _theme_row(
        self,
        snapshot_id: str,
        read: _Read,
        entity: Entity,
        evolved: Evolved,
        labels: dict[str, str],
        read_count: int,
    ) -> ThemeRow:
        found = evolved.found
        return ThemeRow(
            snapshot_id=snapshot_id,
            aspect=read.aspect,
            theme_id=evolved.theme_id,
            entity=entity,
            label=labels.get(found.label_note_id, ""),
            label_note_id=found.label_note_id,
            label_trace_id=self._traces[found.label_note_id],
            state=evolved.state,
            note_count=len(found.note_ids),
            trace_count=len({self._traces[note_id] for note_id in found.note_ids}),
            coverage=len(found.note_ids) / read_count,
            split_from=evolved.split_from,
            split_into=evolved.split_into,
            merged_from=evolved.merged_from,
            wording=b"".join(encode(sketch) for sketch in found.sketches),
        )

    def _members(
        self, aspect: str, evolution: Evolution, clustering: Clustering
    ) -> list[MemberRow]:
        rows = []
        for evolved in evolution.themes:
            label: Sketch = self._sketches[evolved.found.label_note_id]
            rows += [
                MemberRow(
                    aspect,
                    evolved.theme_id,
                    note_id,
                    self._traces[note_id],
                    similarity(self._sketches[note_id], label),
                )
                for note_id in evolved.found.note_ids
            ]
        rows += [
            MemberRow(aspect, NOISE, note_id, self._traces[note_id], 0)
            for note_id in clustering.noise
        ]
        return rows


def _decoded(notes: Sequence[PassNote]) -> dict[str, Sketch]:
    """Each note's sketch, decoded once per distinct stored form: a fixed wording repeats, and
    its notes then share one tuple."""
    forms: dict[bytes, Sketch] = {}
    sketches: dict[str, Sketch] = {}
    for note in notes:
        sketch = forms.get(note.sketch)
        if sketch is None:
            sketch = forms[note.sketch] = decode(note.sketch)
        sketches[note.note_id] = sketch
    return sketches


def _wordings(rows: Sequence[ThemeRow]) -> list[Wording]:
    return [
        Wording(
            row.theme_id,
            tuple(
                decode(row.wording[i : i + _SKETCH_BYTES])
                for i in range(0, len(row.wording), _SKETCH_BYTES)
            ),
            row.note_count,
        )
        for row in rows
    ]
