"""Theme evolution: planted groups are born, continue, split, merge, die and come back across
windows under the ids the rules give them; each rule on hand-made wordings; and the answer is a
pure function of its inputs (their order and hash seeds change nothing)."""

from __future__ import annotations

import functools
import hashlib
import random
from collections.abc import Sequence
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mcpd.themes import (
    LINK_COVERAGE,
    REPRESENTATIVES,
    Ending,
    Evolution,
    Evolved,
    Found,
    Note,
    RowState,
    Sketch,
    Theme,
    Wording,
    affinity,
    cluster,
    evolve,
    representatives,
    similarity,
    sketch_of,
)
from tests.libs.themes.seeds import printed_under_seeds

KEY = b"deployment-key-for-tests"
WHENS = ["today", "at once", "after a delay", "this morning", "yesterday", "late at night"]
SEARCH = "the search index of tenant {n} was stale so results were missing"
CACHE = "the price cache of tenant {n} served an outdated list"
MAIL = "the mail queue of region {n} was full so messages were delayed"
SMS = "the sms gateway of region {n} rejected every message"
GROUPS = {
    "refund": "the customer asked for a refund of order {n} and the agent issued it",
    "login": "the user could not log in to the dashboard because the password reset link expired",
    "deploy": "the deployment of service {n} failed because the container image was missing",
    "quota": "the api key of project {n} ran out of quota before the batch finished",
    # Two wordings and the notes that say both: one theme while the bridge is there, two after.
    "search": SEARCH,
    "cache": CACHE,
    "index": SEARCH + " and " + CACHE.replace(" of tenant {n}", ""),
    "mail": MAIL,
    "sms": SMS,
    "outage": MAIL + " and " + SMS.replace(" of region {n}", ""),
}
BOTH = {"search": 16, "cache": 12, "mail": 16, "sms": 14}
WINDOWS: list[dict[str, int]] = [
    {"refund": 12, "login": 12, "deploy": 12, **BOTH, "index": 8},
    {"refund": 12, "login": 12, "deploy": 12, **BOTH, "index": 8},
    # The index theme loses its bridge and splits; the outage bridge merges mail and sms; login
    # is gone.
    {"refund": 12, "deploy": 12, **BOTH, "outage": 8},
    # Login is back; deploy is gone; quota is new.
    {"refund": 12, "login": 12, "quota": 12, **BOTH, "outage": 8},
]


def mint(found: Found) -> str:
    return f"new:{found.label_note_id}"


def planted(window: int, counts: dict[str, int]) -> list[Note]:
    """The window's notes: per group, its count of notes, each with its own number and time."""
    return [
        Note(
            f"{group}-w{window}-{i:02d}",
            sketch_of(
                GROUPS[group].format(n=100 + 50 * window + i) + " " + WHENS[i % len(WHENS)], KEY
            ),
        )
        for group, count in counts.items()
        for i in range(count)
    ]


def found_in(notes: Sequence[Note]) -> list[Found]:
    sketches = {note.note_id: note.sketch for note in notes}
    return [
        Found(theme.label_note_id, theme.note_ids, representatives(theme, sketches))
        for theme in cluster(notes).themes
    ]


@functools.cache
def passes() -> tuple[tuple[list[Wording], list[Wording], list[Found], Evolution], ...]:
    """Every window's inputs to `evolve` and its answer, each snapshot stored as the next one's
    previous wordings and every id's newest wording kept for the resurrections."""
    newest: dict[str, Wording] = {}
    previous: list[Wording] = []
    made = []
    for window, counts in enumerate(WINDOWS):
        found = found_in(planted(window, counts))
        kept = {wording.theme_id for wording in previous}
        earlier = [wording for theme_id, wording in sorted(newest.items()) if theme_id not in kept]
        evolution = evolve(previous, earlier, found, mint)
        made.append((previous, earlier, found, evolution))
        previous = [
            Wording(row.theme_id, row.found.sketches, len(row.found.note_ids))
            for row in evolution.themes
        ]
        newest.update((wording.theme_id, wording) for wording in previous)
    return tuple(made)


def groups_of(row: Evolved) -> str:
    """The planted groups a theme's notes come from, joined by '+'."""
    return "+".join(sorted({note.split("-")[0] for note in row.found.note_ids}))


def answer(window: int) -> Evolution:
    return passes()[window][3]


def rows(window: int) -> dict[str, Evolved]:
    """The window's theme rows by the groups their notes come from."""
    return {groups_of(row): row for row in answer(window).themes}


def test_planted_themes_are_born_then_continue_under_their_ids() -> None:
    born, held = rows(0), rows(1)
    assert sorted(born) == [
        "cache+index+search",
        "deploy",
        "login",
        "mail",
        "refund",
        "sms",
    ]
    for group, row in born.items():
        assert (row.state, row.theme_id) == ("birth", mint(row.found)), group
        assert (held[group].state, held[group].theme_id) == ("continue", row.theme_id), group
    assert answer(0).endings == answer(1).endings == ()


def test_a_split_a_merge_and_a_death() -> None:
    ids = {group: row.theme_id for group, row in rows(1).items()}
    now = rows(2)
    assert sorted(now) == ["cache", "deploy", "mail+outage+sms", "refund", "search"]
    assert (now["refund"].state, now["refund"].theme_id) == ("continue", ids["refund"])
    # The larger piece (16 notes to 12) keeps the theme's id and names the other.
    index = ids["cache+index+search"]
    assert now["search"] == Evolved(
        index, now["search"].found, "split", split_into=(mint(now["cache"].found),)
    )
    assert now["cache"] == Evolved(
        mint(now["cache"].found), now["cache"].found, "split", split_from=(index,)
    )
    # Mail had the more notes (16 to 14), so the merged theme is mail's.
    merged = now["mail+outage+sms"]
    assert (merged.theme_id, merged.state, merged.merged_from) == (
        ids["mail"],
        "merge",
        (ids["sms"],),
    )
    assert answer(2).endings == tuple(
        sorted(
            [
                Ending(ids["login"], "death"),
                Ending(ids["sms"], "merge", merged_into=(ids["mail"],)),
            ],
            key=lambda ending: ending.theme_id,
        )
    )


def test_a_theme_that_was_away_comes_back_under_its_id() -> None:
    ids = {group: row.theme_id for group, row in rows(1).items()}
    split = {group: row.theme_id for group, row in rows(2).items()}
    now = rows(3)
    assert (now["login"].state, now["login"].theme_id) == ("resurrection", ids["login"])
    assert (now["quota"].state, now["quota"].theme_id) == ("birth", mint(now["quota"].found))
    for group in ("refund", "search", "cache", "mail+outage+sms"):
        assert (now[group].state, now[group].theme_id) == ("continue", split[group]), group
    assert answer(3).endings == (Ending(ids["deploy"], "death"),)


def test_paraphrases_link_and_unrelated_groups_do_not() -> None:
    alone = {
        window: {
            group: found_in(planted(window, {group: 12}))[0].sketches
            for group in ("refund", "login", "deploy", "quota", "search", "cache", "mail", "sms")
        }
        for window in (0, 1)
    }
    for group, before in alone[0].items():
        for other, after in alone[1].items():
            shares = affinity(before, after)
            assert (max(shares) >= LINK_COVERAGE) == (group == other), (group, other, shares)


def test_representatives_of_a_bridged_theme_sample_both_of_its_wordings() -> None:
    (theme,) = [row.found for group, row in rows(0).items() if "index" in group]
    notes = {note.note_id: note.sketch for note in planted(0, WINDOWS[0])}
    sampled = {note.split("-")[0] for note in theme.note_ids if notes[note] in theme.sketches}
    assert len(theme.sketches) == REPRESENTATIVES
    assert {"search", "cache"} <= sampled


# Hand-made wordings: sketches of one family share 48 of 64 positions (neighbours), sketches of
# two families none, so each test says exactly which representatives are alike.


def sketch(family: int, variant: int) -> Sketch:
    shared = [family * 100_000 + p for p in range(48)]
    own = [family * 100_000 + (variant + 1) * 1_000 + p for p in range(16)]
    return (*shared, *own)


def wording(theme_id: str, families: Sequence[int], notes: int = 10) -> Wording:
    return Wording(theme_id, tuple(sketch(f, 0) for f in families), notes)


def theme(label: str, families: Sequence[int], notes: int = 10) -> Found:
    note_ids = (label, *(f"{label}-{i:02d}" for i in range(1, notes)))
    return Found(label, note_ids, tuple(sketch(f, 1) for f in families))


def evolved(
    previous: Sequence[Wording], found: Sequence[Found], earlier: Sequence[Wording] = ()
) -> tuple[dict[str, tuple[str, RowState, tuple[str, ...]]], tuple[Ending, ...]]:
    """Per found theme (by label): its id, state and the ids it names; and the endings."""
    made = evolve(previous, earlier, found, mint)
    named = {
        row.found.label_note_id: (
            row.theme_id,
            row.state,
            row.split_from + row.split_into + row.merged_from,
        )
        for row in made.themes
    }
    return named, made.endings


def test_affinity_is_the_share_of_each_side_with_a_neighbour_on_the_other() -> None:
    first = [sketch(1, 0), sketch(2, 0)]
    second = [sketch(1, 1), sketch(1, 2), sketch(3, 0), sketch(4, 0)]
    assert similarity(sketch(1, 0), sketch(1, 1)) == 48
    assert similarity(sketch(1, 0), sketch(2, 0)) == 0
    assert affinity(first, second) == (Fraction(1, 2), Fraction(2, 4))
    assert affinity(second, first) == (Fraction(2, 4), Fraction(1, 2))
    assert affinity([], second) == (Fraction(0), Fraction(0))


def test_a_link_needs_half_of_one_side_to_find_a_neighbour_on_the_other() -> None:
    # One of two covered on the old side (a third on the new): linked.
    assert evolved([wording("a", [1, 2])], [theme("x", [1, 3, 4])])[0] == {
        "x": ("a", "continue", ())
    }
    # A third on either side: no link, so the old theme dies and the new one is born.
    assert evolved([wording("a", [1, 2, 5])], [theme("x", [1, 3, 4])]) == (
        {"x": ("new:x", "birth", ())},
        (Ending("a", "death"),),
    )


def test_a_split_leaves_the_id_with_the_largest_piece() -> None:
    previous = [wording("a", [1, 2, 3, 4])]
    pieces = [theme("x", [1], 5), theme("y", [2, 3], 8), theme("z", [4], 8)]
    assert evolved(previous, pieces) == (
        {
            # y and z have 8 notes each: the smaller label note id keeps the id.
            "y": ("a", "split", ("new:x", "new:z")),
            "x": ("new:x", "split", ("a",)),
            "z": ("new:z", "split", ("a",)),
        },
        (),
    )


def test_a_merge_keeps_the_id_of_the_largest_previous_theme() -> None:
    previous = [wording("c", [1], 5), wording("b", [2], 9), wording("a", [3], 9)]
    named, endings = evolved(previous, [theme("x", [1, 2, 3])])
    # b and a have 9 notes each: the smaller id is kept.
    assert named == {"x": ("a", "merge", ("b", "c"))}
    assert endings == (
        Ending("b", "merge", merged_into=("a",)),
        Ending("c", "merge", merged_into=("a",)),
    )


def test_a_tangle_keeps_its_strongest_links_as_stars() -> None:
    previous = [wording("a", [1, 2]), wording("b", [3])]
    found = [theme("x", [1, 2]), theme("y", [2, 9]), theme("z", [2, 3])]
    # Strongest first: a-x (2), b-z (3/2), then a-y and a-z (1 each). a splits into x and y;
    # a-z is dropped, since it would tie a's star to b's.
    assert evolved(previous, found) == (
        {
            "x": ("a", "split", ("new:y",)),
            "y": ("new:y", "split", ("a",)),
            "z": ("b", "continue", ()),
        },
        (),
    )


def test_a_theme_whose_every_link_was_dropped_counts_as_unlinked() -> None:
    previous = [wording("a", [1, 2]), wording("b", [2])]
    found = [theme("x", [1]), theme("y", [2])]
    # b-y (2), then a-x (3/2); a-y (3/2, after a-x by label) would join the pairs: dropped.
    assert evolved(previous, found)[0] == {"x": ("a", "continue", ()), "y": ("b", "continue", ())}
    # Here b's only link, to x, comes after a's split into x and y: b dies.
    previous = [wording("a", [1, 2]), wording("b", [1, 5, 6])]
    assert evolved(previous, found) == (
        {"x": ("a", "split", ("new:y",)), "y": ("new:y", "split", ("a",))},
        (Ending("b", "death"),),
    )


def test_an_earlier_theme_comes_back_once_to_its_strongest_link() -> None:
    earlier = [wording("e2", [1]), wording("e1", [1]), wording("e3", [7])]
    found = [theme("x", [1, 8]), theme("y", [1])]
    # y links e1 and e2 fully (2), x by half of its own (3/2): y takes e1, the smaller id; x
    # takes e2, which is still free; e3 has no link and stays away.
    assert evolved([], found, earlier) == (
        {"x": ("e2", "resurrection", ()), "y": ("e1", "resurrection", ())},
        (),
    )
    assert evolved([], found, earlier[1:])[0] == {
        "x": ("new:x", "birth", ()),
        "y": ("e1", "resurrection", ()),
    }


def test_a_theme_linked_to_the_previous_snapshot_is_never_a_resurrection() -> None:
    named, _ = evolved([wording("a", [1])], [theme("x", [1])], [wording("e", [1])])
    assert named == {"x": ("a", "continue", ())}


def test_an_id_used_twice_is_an_error() -> None:
    with pytest.raises(ValueError, match="used twice"):
        evolve([], [], [theme("x", [1]), theme("y", [2])], lambda _: "same")
    with pytest.raises(ValueError, match="'a' used twice"):
        evolve([wording("a", [1])], [], [theme("x", [2])], lambda _: "a")


def test_representatives_are_evenly_spaced_ranks_by_similarity_to_the_label() -> None:
    label = tuple(range(64))

    def away(k: int) -> Sketch:  # k positions differ from the label's
        return (*label[: 64 - k], *range(1_000 + 100 * k, 1_000 + 100 * k + k))

    sketches = {f"n-{k:02d}": away(k) for k in range(32)}
    sketches["n-99"] = label  # a copy of the label's wording is one representative
    made = representatives(Theme("n-00", tuple(sorted(sketches))), sketches)
    assert made == tuple(
        away(k) for k in (0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 31)
    )
    few = {"n-1": away(3), "n-2": away(1), "n-3": away(3), "n-4": label}
    assert representatives(Theme("n-4", tuple(few)), few) == (label, away(1), away(3))


def canonical(made: Evolution) -> tuple[tuple[Evolved, ...], tuple[Ending, ...]]:
    """The answer with its rows in label order (they follow `found`, which was shuffled)."""
    return tuple(sorted(made.themes, key=lambda row: row.found.label_note_id)), made.endings


@settings(max_examples=25, deadline=None)
@given(st.randoms(use_true_random=False))
def test_the_order_of_the_inputs_changes_nothing(rng: random.Random) -> None:
    for previous, earlier, found, made in passes():
        reordered = [
            Wording(w.theme_id, tuple(rng.sample(w.sketches, len(w.sketches))), w.note_count)
            for w in rng.sample(previous, len(previous))
        ]
        again = evolve(
            reordered, rng.sample(earlier, len(earlier)), rng.sample(found, len(found)), mint
        )
        assert canonical(again) == canonical(made)


def digest() -> str:
    return hashlib.sha256(
        repr([answer(window) for window in range(len(WINDOWS))]).encode()
    ).hexdigest()


@pytest.mark.e2e
def test_two_processes_with_other_hash_seeds_evolve_the_same_themes() -> None:
    program = "from tests.libs.themes.test_evolution import digest; print(digest())"
    assert printed_under_seeds(program) == {digest()}


def test_links_found_through_the_index_are_those_of_every_pair_compared() -> None:
    from mcpd.themes.evolution import _links

    for window in range(1, len(WINDOWS)):
        previous, _, found, _ = passes()[window]
        brute = sorted(
            (
                (sum(shares), wording.theme_id, piece.label_note_id)
                for wording in previous
                for piece in found
                if max(shares := affinity(wording.sketches, piece.sketches)) >= LINK_COVERAGE
            ),
            key=lambda link: (-link[0], link[1], link[2]),
        )
        indexed = [
            (link.strength, link.theme_id, link.label_note_id) for link in _links(previous, found)
        ]
        assert sorted(indexed, key=lambda link: (-link[0], link[1], link[2])) == brute
        assert brute
