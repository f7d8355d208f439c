"""Theme clustering: planted groups come back whole, lone wording is noise, and the answer is a
pure function of the notes (order, duplicates and hash seeds change nothing)."""

from __future__ import annotations

import hashlib
import random

import pytest

from mcpd.themes import sketch_of
from mcpd.themes.clustering import MIN_NEIGHBOURS, Clustering, Note, cluster
from tests.libs.themes.seeds import printed_under_seeds

KEY = b"deployment-key-for-tests"
GROUPS = {
    "refund": "the customer asked for a refund of order {n} and the agent issued it {when}",
    "login": "the user could not log in to the dashboard because the password reset link {when}",
    "deploy": "the deployment of service {n} failed because the container image was missing {when}",
}
WHENS = ["today", "at once", "after a delay", "this morning", "yesterday", "late at night"]
LONE = [
    "Please translate this paragraph into French.",
    "What is the capital of Australia?",
    "Summarise the quarterly earnings call in three bullets.",
    "Write a haiku about the sea.",
    "Which regex matches an IPv6 address?",
]


def planted(per_group: int = 20) -> tuple[list[Note], dict[str, str]]:
    """Notes of the three groups (each with its own order number and time) and the lone ones;
    and each note's group ("" for the lone)."""
    notes, truth = [], {}
    for group, template in GROUPS.items():
        for n in range(per_group):
            note_id = f"{group}-{n:03d}"
            text = template.format(n=100 + n, when=WHENS[n % len(WHENS)])
            notes.append(Note(note_id, sketch_of(text, KEY)))
            truth[note_id] = group
    for n, text in enumerate(LONE):
        notes.append(Note(f"lone-{n}", sketch_of(text, KEY)))
        truth[f"lone-{n}"] = ""
    return notes, truth


def digest(found: Clustering) -> str:
    return hashlib.sha256(repr(found).encode()).hexdigest()


def test_planted_groups_come_back_whole_and_lone_wording_is_noise() -> None:
    notes, truth = planted()
    found = cluster(notes)
    assert [len(theme.note_ids) for theme in found.themes] == [20, 20, 20]
    for theme in found.themes:
        groups = {truth[note_id] for note_id in theme.note_ids}
        assert len(groups) == 1, groups
        assert "" not in groups
        assert theme.label_note_id in theme.note_ids
    assert found.noise == tuple(f"lone-{n}" for n in range(len(LONE)))


def test_the_order_of_the_notes_changes_nothing() -> None:
    notes, _ = planted()
    first = cluster(notes)
    for seed in range(3):
        shuffled = list(notes)
        random.Random(seed).shuffle(shuffled)
        assert cluster(shuffled) == first


def test_copies_of_one_wording_are_one_theme_labelled_by_its_smallest_id() -> None:
    text = "The run succeeded without a retry."
    notes = [Note(f"n-{n:02d}", sketch_of(text, KEY)) for n in range(30, 0, -1)]
    found = cluster(notes)
    (theme,) = found.themes
    assert (theme.label_note_id, len(theme.note_ids), found.noise) == ("n-01", 30, ())


def test_too_few_alike_notes_are_noise() -> None:
    text = "The tool call timed out twice before the agent gave up."
    few = [Note(f"n-{n}", sketch_of(text, KEY)) for n in range(MIN_NEIGHBOURS)]
    assert cluster(few) == Clustering((), tuple(f"n-{n}" for n in range(MIN_NEIGHBOURS)))
    enough = [*few, Note("n-extra", sketch_of(text + " Again.", KEY))]
    (theme,) = cluster(enough).themes
    assert len(theme.note_ids) == MIN_NEIGHBOURS + 1


def test_nothing_clusters_into_nothing() -> None:
    assert cluster([]) == Clustering((), ())


@pytest.mark.e2e
def test_two_processes_with_other_hash_seeds_find_the_same_themes() -> None:
    program = (
        "import hashlib; "
        "from tests.libs.themes.test_clustering import planted, digest; "
        "from mcpd.themes.clustering import cluster; "
        "print(digest(cluster(planted()[0])))"
    )
    made = printed_under_seeds(program)
    assert made == {digest(cluster(planted()[0]))}
