"""How the themes of one snapshot follow from the previous snapshot's (one entity, one aspect):
which keep their id, which split, merge, die, are born or come back. The match reads wording
alone, the sketches of a few notes per theme, and never a trace attribute; it is a pure
function of its inputs in exact integer (rational) arithmetic.

1. **Representatives**: a theme's wording is stood for by at most `REPRESENTATIVES` (16) of
   its distinct sketches: ranked by similarity to the label's (the label first, ties by note
   id) and taken at evenly spaced ranks, so its edge is sampled as well as its centre. A theme
   that splits often held its pieces on either side of its label, and the sketches nearest the
   label alone can hide the smaller piece: in the tests' planted theme of two wordings and
   their bridge (16 + 12 + 8 notes) they held none of the smaller wording, which then found no
   neighbour among them; evenly spaced ranks hold it in 5 of 16. Sixteen bound the comparison
   of two themes to 256 sketch pairs (and a stored wording to 8 KiB); a piece with fewer than
   about a sixteenth of a theme's distinct sketches can go unsampled and read as a birth.
2. **Affinity** of two wordings: for each side, the share of its representatives with a
   neighbour among the other side's (`NEIGHBOUR_SIMILARITY`, 32 of 64 equal positions, the
   clustering's own notion of alike), exact fractions of integers. Two wordings are **linked**
   when either share is at least `LINK_COVERAGE` (one half): a piece of a theme finds nearly
   all its wording in the theme while the theme finds only the piece's share of its own in it,
   so a link asks that one side be contained in the other. Between themes of one pass the
   clustering already left almost no neighbour pairs, and unrelated wording has none, so a half
   takes eight chance neighbours out of sixteen; the paraphrases of one group and the pieces of
   a split or merge cover all or nearly all of theirs. (In the tests' planted windows every
   link has a share of 1 on one side, the other side 5/16 to 1, and no two unrelated groups
   have a single neighbour pair.) The **strength** of a link, which orders every choice below,
   is the sum of the two shares.
3. **Stars**: the links between previous and new themes, strongest first (ties by previous id,
   then label note id), are kept while every connected group stays a star, one theme on one
   side and any number on the other; a link that would make a group anything else is dropped.
   So a many-to-many tangle resolves into its strongest one-to-one, split and merge parts, and
   a theme whose every link was dropped counts as unlinked (a previous one dies, a new one may
   come back or is born).
4. **States**: a pair is `continue` (the old id). One previous theme with several new pieces is
   a `split`: the largest piece (notes, then the smaller label note id) keeps the id and names
   the others in `split_into`; each other piece gets a fresh id with `split_from` the old one.
   Several previous themes with one new theme are a `merge`: it keeps the id of the largest
   previous theme (notes, then the smaller id) and names the others in `merged_from`; each of
   those ends with `merged_into` the kept id. A previous theme with no link is a `death`.
5. **Returns**: a new theme with no link to the previous snapshot takes the id of an earlier
   theme (absent from the previous snapshot) it links to, a `resurrection`, strongest links
   first (ties by earlier id, then label note id), each earlier id at most once; otherwise it is
   a `birth` under the id `new_id` mints for it.

Nothing depends on the order the themes or their sketches come in, on `PYTHONHASHSEED`, or on
set iteration order: every choice is ordered by strength, size and id. A new theme is known by
its label note id, unique within one clustering. No id appears twice in one answer (rows and
endings together); an id from `new_id` that would is a `ValueError`.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Literal

from mcpd.themes.clustering import NEIGHBOUR_SIMILARITY, Theme
from mcpd.themes.sketch import Sketch, similarity

__all__ = [
    "LINK_COVERAGE",
    "REPRESENTATIVES",
    "EndState",
    "Ending",
    "Evolution",
    "Evolved",
    "Found",
    "RowState",
    "Wording",
    "affinity",
    "evolve",
    "representatives",
]

REPRESENTATIVES = 16
LINK_COVERAGE = Fraction(1, 2)

RowState = Literal["birth", "continue", "split", "merge", "resurrection"]
"""The ThemeState of a theme with a row in the new snapshot."""
EndState = Literal["death", "merge"]
"""The ThemeState of a previous theme with no row in the new snapshot."""


@dataclass(frozen=True, slots=True)
class Wording:
    """A theme as an earlier snapshot stored it: its id, representatives and size."""

    theme_id: str
    sketches: tuple[Sketch, ...]
    note_count: int


@dataclass(frozen=True, slots=True)
class Found:
    """A theme of this pass before it has an id: its label, notes and representatives."""

    label_note_id: str
    note_ids: tuple[str, ...]
    sketches: tuple[Sketch, ...]


@dataclass(frozen=True, slots=True)
class Evolved:
    """One theme row of the new snapshot: its id, what it is and what happened to it."""

    theme_id: str
    found: Found
    state: RowState
    split_from: tuple[str, ...] = ()
    split_into: tuple[str, ...] = ()
    merged_from: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Ending:
    """A previous theme with no row in the new snapshot: `death`, or `merge` into another."""

    theme_id: str
    state: EndState
    merged_into: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Evolution:
    """The new snapshot's themes (in the order of `found`) and the previous themes that ended
    (by id)."""

    themes: tuple[Evolved, ...]
    endings: tuple[Ending, ...]


@dataclass(frozen=True, slots=True)
class _Link:
    strength: Fraction
    theme_id: str
    label_note_id: str

    @property
    def order(self) -> tuple[Fraction, str, str]:
        return (-self.strength, self.theme_id, self.label_note_id)


def representatives(theme: Theme, sketches: Mapping[str, Sketch]) -> tuple[Sketch, ...]:
    """At most REPRESENTATIVES distinct sketches standing for a theme's wording: its distinct
    sketches ranked by similarity to the label's (the label's first, ties by note id), taken at
    evenly spaced ranks from the first to the last."""
    label = sketches[theme.label_note_id]
    ranked = sorted(theme.note_ids, key=lambda note: (-similarity(sketches[note], label), note))
    distinct = list(dict.fromkeys(sketches[note] for note in ranked))
    if len(distinct) <= REPRESENTATIVES:
        return tuple(distinct)
    last = len(distinct) - 1
    return tuple(distinct[i * last // (REPRESENTATIVES - 1)] for i in range(REPRESENTATIVES))


def affinity(first: Sequence[Sketch], second: Sequence[Sketch]) -> tuple[Fraction, Fraction]:
    """The share of `first`'s sketches with a neighbour among `second`'s, and the other way
    round; 0 for an empty side."""
    pairs = [[similarity(a, b) >= NEIGHBOUR_SIMILARITY for b in second] for a in first]
    covered_first = sum(any(row) for row in pairs)
    covered_second = sum(any(column) for column in zip(*pairs, strict=True))
    return (
        Fraction(covered_first, len(first) or 1),
        Fraction(covered_second, len(second) or 1),
    )


def evolve(
    previous: Sequence[Wording],
    earlier: Sequence[Wording],
    found: Sequence[Found],
    new_id: Callable[[Found], str],
) -> Evolution:
    """Ids and states for `found` against the `previous` snapshot's themes, and how each
    previous theme without a row ended (see the module docstring). `earlier` holds the newest
    wording of each theme seen before but absent from `previous`; `new_id` mints a theme's fresh
    id, deterministically from it."""
    forward, backward = _stars(_links(previous, found))
    sizes = {w.theme_id: w.note_count for w in previous}
    rows: dict[str, Evolved] = {}
    endings: list[Ending] = []
    for theme_id in sorted(sizes):
        pieces = [f for f in found if f.label_note_id in forward[theme_id]]
        if not pieces:
            endings.append(Ending(theme_id, "death"))
        elif len(pieces) > 1:
            rows.update(_split(theme_id, pieces, new_id))
        elif len(backward[pieces[0].label_note_id]) == 1:
            rows[pieces[0].label_note_id] = Evolved(theme_id, pieces[0], "continue")
        # Otherwise it is one of several merged into one found theme: the loop below.
    for piece in found:
        sources = backward[piece.label_note_id]
        if len(sources) > 1:
            kept = min(sources, key=lambda theme_id: (-sizes[theme_id], theme_id))
            absorbed = tuple(sorted(set(sources) - {kept}))
            rows[piece.label_note_id] = Evolved(kept, piece, "merge", merged_from=absorbed)
            endings.extend(Ending(theme_id, "merge", merged_into=(kept,)) for theme_id in absorbed)
    unlinked = [f for f in found if f.label_note_id not in rows]
    rows.update(_returns(earlier, unlinked, new_id))
    themes = tuple(rows[f.label_note_id] for f in found)
    _check_unique([row.theme_id for row in themes] + [end.theme_id for end in endings])
    return Evolution(themes, tuple(sorted(endings, key=lambda end: end.theme_id)))


def _links(wordings: Iterable[Wording], found: Iterable[Found]) -> list[_Link]:
    """Every linked (wording, found theme) pair, strongest first. Exactly `affinity` of every
    pair, found without comparing every pair: the found themes' sketches are indexed by
    (position, value), so a wording's sketch meets only the sketches it shares a position with,
    and a pair with no neighbour at all (most of them) is never looked at."""
    pieces = list(found)
    index: dict[tuple[int, int], list[int]] = defaultdict(list)
    owners: list[tuple[int, int]] = []  # per indexed sketch: (piece, its representative)
    for number, piece in enumerate(pieces):
        for rank, sketch in enumerate(piece.sketches):
            for position, value in enumerate(sketch):
                index[(position, value)].append(len(owners))
            owners.append((number, rank))
    links = []
    for wording in wordings:
        # Per piece: which of the wording's sketches have a neighbour in it, and which of its.
        near: dict[int, tuple[set[int], set[int]]] = {}
        for mine, sketch in enumerate(wording.sketches):
            equal: Counter[int] = Counter()
            for position, value in enumerate(sketch):
                equal.update(index.get((position, value), ()))
            for other, count in equal.items():
                if count >= NEIGHBOUR_SIMILARITY:
                    number, rank = owners[other]
                    left, right = near.setdefault(number, (set(), set()))
                    left.add(mine)
                    right.add(rank)
        for number, (left, right) in near.items():
            piece = pieces[number]
            shares = (
                Fraction(len(left), len(wording.sketches)),
                Fraction(len(right), len(piece.sketches)),
            )
            if max(shares) >= LINK_COVERAGE:
                links.append(_Link(shares[0] + shares[1], wording.theme_id, piece.label_note_id))
    return sorted(links, key=lambda link: link.order)


def _stars(
    links: Iterable[_Link],
) -> tuple[defaultdict[str, list[str]], defaultdict[str, list[str]]]:
    """The links kept, strongest first, while every group stays a star: previous id -> label
    note ids, and label note id -> previous ids."""
    forward: defaultdict[str, list[str]] = defaultdict(list)
    backward: defaultdict[str, list[str]] = defaultdict(list)
    for link in links:
        outgoing, incoming = forward[link.theme_id], backward[link.label_note_id]
        # A theme with no link yet may join one that is alone or the centre of a star (all its
        # partners are linked to it alone); joining a leaf would make a chain.
        leaf_of_previous = not incoming and all(len(backward[n]) == 1 for n in outgoing)
        leaf_of_found = not outgoing and all(len(forward[t]) == 1 for t in incoming)
        if leaf_of_previous or leaf_of_found:
            outgoing.append(link.label_note_id)
            incoming.append(link.theme_id)
    return forward, backward


def _split(
    theme_id: str, pieces: Sequence[Found], new_id: Callable[[Found], str]
) -> dict[str, Evolved]:
    """The pieces of one previous theme: the largest keeps its id, the rest get fresh ones."""
    ordered = sorted(pieces, key=lambda piece: (-len(piece.note_ids), piece.label_note_id))
    fresh = [(piece, new_id(piece)) for piece in ordered[1:]]
    kept = ordered[0]
    rows = {
        kept.label_note_id: Evolved(
            theme_id, kept, "split", split_into=tuple(sorted(i for _, i in fresh))
        )
    }
    for piece, piece_id in fresh:
        rows[piece.label_note_id] = Evolved(piece_id, piece, "split", split_from=(theme_id,))
    return rows


def _returns(
    earlier: Sequence[Wording], unlinked: Sequence[Found], new_id: Callable[[Found], str]
) -> dict[str, Evolved]:
    """Themes with no previous link: back under an earlier id, strongest link first, each
    earlier id once; the rest born under a fresh id."""
    by_label = {piece.label_note_id: piece for piece in unlinked}
    rows: dict[str, Evolved] = {}
    taken: set[str] = set()
    for link in _links(earlier, unlinked):
        if link.label_note_id not in rows and link.theme_id not in taken:
            taken.add(link.theme_id)
            piece = by_label[link.label_note_id]
            rows[link.label_note_id] = Evolved(link.theme_id, piece, "resurrection")
    for piece in unlinked:
        if piece.label_note_id not in rows:
            rows[piece.label_note_id] = Evolved(new_id(piece), piece, "birth")
    return rows


def _check_unique(theme_ids: Sequence[str]) -> None:
    seen: set[str] = set()
    for theme_id in theme_ids:
        if theme_id in seen:
            raise ValueError(f"theme id {theme_id!r} used twice in one snapshot")
        seen.add(theme_id)
