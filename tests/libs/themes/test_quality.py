"""Theme discovery's quality on the shipped paraphrase fixture: mcpd's clustering stays above
its floors, the B-cubed scores are what they are by hand, the fixture is what its generator
writes, and the library baseline of the bench runs on it."""

from __future__ import annotations

import pytest

from bench.intelligence.paraphrases import FIXTURE, Paraphrase, generate, load, render
from bench.intelligence.quality import bcubed, hdbscan_labels, mcpd_labels, score

# Measured on the fixture under quality.KEY: ARI 0.507, B-cubed precision 0.951, F1 0.528 (see
# docs/intelligence.md, "Quality"). The floors sit a little below, so that a change to the
# sketch or the clustering that loses quality fails here; raise them when quality improves.
ARI_FLOOR = 0.48
BCUBED_F1_FLOOR = 0.50
BCUBED_PRECISION_FLOOR = 0.92


@pytest.fixture(scope="module")
def paraphrases() -> list[Paraphrase]:
    return load()


def test_the_fixture_is_what_its_generator_writes() -> None:
    assert FIXTURE.read_text(encoding="utf-8") == render(generate())


def test_mcpd_clustering_stays_above_its_floors(paraphrases: list[Paraphrase]) -> None:
    truth = [p.group for p in paraphrases]
    found = score("mcpd", truth, mcpd_labels(paraphrases), seconds=0.0)
    assert found.ari >= ARI_FLOOR, found
    assert found.bcubed.f1 >= BCUBED_F1_FLOOR, found
    assert found.bcubed.precision >= BCUBED_PRECISION_FLOOR, found


def test_the_baseline_scores_the_fixture(paraphrases: list[Paraphrase]) -> None:
    truth = [p.group for p in paraphrases]
    found = score("hdbscan", truth, hdbscan_labels(paraphrases), seconds=0.0)
    assert -1.0 <= found.ari <= 1.0
    assert 0.0 < found.bcubed.f1 <= 1.0
    assert found.themes > 0


@pytest.mark.parametrize(
    ("truth", "predicted", "precision", "recall"),
    [
        # The groups themselves: every item's cluster is its group.
        ("aab", "xxy", 1.0, 1.0),
        # One cluster of everything: each item's cluster is half its group; its group is whole.
        ("aabb", "xxxx", 1 / 2, 1.0),
        # Singletons (all noise): each cluster is pure and holds half of its item's group.
        ("aabb", "wxyz", 1.0, 1 / 2),
        # Items 1-2 (a, x): precision 1, recall 2/3; item 3 (a, y): 1/3 and 1/3;
        # items 4-5 (b, y): 2/3 and 1. Both means are 11/15.
        ("aaabb", "xxyyy", 11 / 15, 11 / 15),
    ],
)
def test_bcubed_by_hand(truth: str, predicted: str, precision: float, recall: float) -> None:
    found = bcubed(list(truth), list(predicted))
    f1 = 2 * precision * recall / (precision + recall)
    assert (found.precision, found.recall, found.f1) == pytest.approx((precision, recall, f1))


def test_bcubed_needs_one_label_of_each_per_item() -> None:
    with pytest.raises(ValueError, match="one true and one predicted"):
        bcubed(["a", "b"], ["x"])
    with pytest.raises(ValueError, match="one true and one predicted"):
        bcubed([], [])


def test_noise_notes_are_each_a_cluster_of_their_own() -> None:
    notes = [Paraphrase(f"c{n}", "copy", "The run timed out waiting for search.") for n in range(5)]
    lone = [
        Paraphrase("l1", "lone-1", "Please translate this paragraph into French."),
        Paraphrase("l2", "lone-2", "What is the capital of Australia?"),
    ]
    labels = mcpd_labels([*notes, *lone])
    assert labels == ["c0"] * 5 + ["noise/l1", "noise/l2"]
    found = score("mcpd", [p.group for p in [*notes, *lone]], labels, seconds=0.0)
    assert (found.themes, found.noise, found.ari, found.bcubed.f1) == (1, 2, 1.0, 1.0)
