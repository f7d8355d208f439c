"""Themes of one entity and aspect: a density-based clustering of its notes' sketches, a pure
function of the notes (their ids and sketches), in integer arithmetic.

1. **Identical sketches** are one point with a weight (how many notes share it): a fixed
   vocabulary (the derived `outcome` sentences) repeats the same wording thousands of times,
   and comparing copies with each other tells nothing.
2. **Candidates**: points sharing a band key (`sketch.band_keys`). A band shared by more than
   `BUCKET_CAP` points pairs each of them only with the first `BUCKET_CAP` of that bucket in
   point order, which bounds the work on a window full of near-copies; every other band still
   pairs them.
3. **Neighbours**: candidates whose similarity is at least `NEIGHBOUR_SIMILARITY` of 64
   (an expected Jaccard of one half of the shingle sets).
4. **Density**: a point is a core when the notes around it (its own weight less one, plus its
   neighbours' weights) number at least `MIN_NEIGHBOURS`. Cores linked by neighbour edges form
   one theme (connected components); a point that is no core joins the theme of its most
   similar core neighbour (ties: the smaller point), and one with none is noise.
5. **Label**: a theme's medoid, the note whose sketch is most similar to its theme's notes: the
   sum, over the notes of its theme, of their similarity to it, a note that is not its
   neighbour counting 0 (its own copies count 64 each); ties broken by the smaller note id. The
   label is that note's text, chosen by the caller from the id.

Points are ordered by (sketch, smallest note id): nothing depends on the order the notes come in,
on `PYTHONHASHSEED`, or on set iteration order. Themes come largest first (notes), then by
label note id.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from mcpd.themes.sketch import POSITIONS, Sketch, band_keys, similarity

__all__ = [
    "BUCKET_CAP",
    "MIN_NEIGHBOURS",
    "NEIGHBOUR_SIMILARITY",
    "Clustering",
    "Note",
    "Theme",
    "cluster",
]

NEIGHBOUR_SIMILARITY = 32
MIN_NEIGHBOURS = 4
BUCKET_CAP = 64


@dataclass(frozen=True, slots=True)
class Note:
    """One note as the pass sees it: its id and its wording's sketch."""

    note_id: str
    sketch: Sketch


@dataclass(frozen=True, slots=True)
class Theme:
    """A theme: its notes (ids, sorted) and the note that labels it."""

    label_note_id: str
    note_ids: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Clustering:
    """Every theme, largest first, and the notes that belong to none (sorted)."""

    themes: tuple[Theme, ...]
    noise: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class _Point:
    sketch: Sketch
    note_ids: tuple[str, ...]

    @property
    def weight(self) -> int:
        return len(self.note_ids)


def cluster(notes: Iterable[Note]) -> Clustering:
    """The themes of `notes` (see the module docstring)."""
    points = _points(notes)
    neighbours = _neighbours(points)
    cores = [
        points[i].weight - 1 + sum(points[j].weight for j, _ in neighbours[i]) >= MIN_NEIGHBOURS
        for i in range(len(points))
    ]
    owner = _components(neighbours, cores)
    for i, is_core in enumerate(cores):
        if not is_core:
            linked = [(-score, j) for j, score in neighbours[i] if cores[j]]
            if linked:
                owner[i] = owner[min(linked)[1]]
    members: dict[int, list[int]] = defaultdict(list)
    for i in range(len(points)):
        if i in owner:
            members[owner[i]].append(i)
    themes = [_theme(points, group, neighbours) for group in members.values()]
    themes.sort(key=lambda theme: (-len(theme.note_ids), theme.label_note_id))
    noise = sorted(note for i, p in enumerate(points) if i not in owner for note in p.note_ids)
    return Clustering(tuple(themes), tuple(noise))


def _points(notes: Iterable[Note]) -> list[_Point]:
    """One point per distinct sketch, ordered by (sketch, smallest note id)."""
    by_sketch: dict[Sketch, list[str]] = defaultdict(list)
    for note in notes:
        by_sketch[tuple(note.sketch)].append(note.note_id)
    return [
        _Point(sketch, tuple(sorted(ids)))
        for sketch, ids in sorted(by_sketch.items(), key=lambda item: (item[0], min(item[1])))
    ]


def _neighbours(points: Sequence[_Point]) -> list[list[tuple[int, int]]]:
    """Per point, its neighbours (index, similarity), in index order."""
    buckets: dict[bytes, list[int]] = defaultdict(list)
    for i, point in enumerate(points):
        for key in band_keys(point.sketch):
            buckets[key].append(i)
    pairs: set[tuple[int, int]] = set()
    for key in sorted(buckets):
        bucket = buckets[key]
        heads = bucket[:BUCKET_CAP]
        for i in bucket:
            pairs.update((min(i, j), max(i, j)) for j in heads if j != i)
    found: list[list[tuple[int, int]]] = [[] for _ in points]
    for i, j in sorted(pairs):
        score = similarity(points[i].sketch, points[j].sketch)
        if score >= NEIGHBOUR_SIMILARITY:
            found[i].append((j, score))
            found[j].append((i, score))
    for row in found:
        row.sort()
    return found


def _components(
    neighbours: Sequence[Sequence[tuple[int, int]]], cores: Sequence[bool]
) -> dict[int, int]:
    """The theme of every core point: the smallest core index of its connected component."""
    owner: dict[int, int] = {}
    for start, is_core in enumerate(cores):
        if not is_core or start in owner:
            continue
        owner[start] = start
        stack = [start]
        while stack:
            i = stack.pop()
            for j, _ in neighbours[i]:
                if cores[j] and j not in owner:
                    owner[j] = start
                    stack.append(j)
    return owner


def _theme(
    points: Sequence[_Point], group: Sequence[int], neighbours: Sequence[Sequence[tuple[int, int]]]
) -> Theme:
    inside = set(group)

    def closeness(i: int) -> tuple[int, str]:
        # A point's own copies are as alike as can be; other members count by similarity, and
        # one that is no neighbour (under NEIGHBOUR_SIMILARITY) counts nothing.
        own = (points[i].weight - 1) * POSITIONS
        total = own + sum(points[j].weight * score for j, score in neighbours[i] if j in inside)
        return (-total, points[i].note_ids[0])

    medoid = min(group, key=closeness)
    note_ids = tuple(sorted(note for i in group for note in points[i].note_ids))
    return Theme(label_note_id=points[medoid].note_ids[0], note_ids=note_ids)
