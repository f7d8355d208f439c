"""The wording sketch: normalisation, shingles, MinHash positions, similarity and bands."""

from __future__ import annotations

import hashlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mcpd.themes import (
    BANDS,
    POSITIONS,
    band_keys,
    decode,
    deployment_key,
    encode,
    shingles,
    similarity,
    sketch_of,
)
from tests.libs.themes.seeds import printed_under_seeds

KEY = b"deployment-key-for-tests"
REFUND = "The refund was issued on Monday, after the customer asked twice."


def test_shingles_are_the_normalised_words_and_adjacent_pairs() -> None:
    assert shingles("The  Refund, was ISSUED!") == {
        "the",
        "refund",
        "was",
        "issued",
        "the refund",
        "refund was",
        "was issued",
    }
    # NFKC folds full-width letters; case folding folds the German sharp s.
    assert shingles("ＳＴＲＡẞE") == shingles("strasse") == {"strasse"}
    assert shingles("  ... !!") == frozenset()


def test_a_sketch_has_sixty_four_positions_below_the_prime() -> None:
    made = sketch_of(REFUND, KEY)
    assert len(made) == POSITIONS == 64
    assert all(0 <= value < (1 << 61) - 1 for value in made)


def test_spelling_that_normalises_the_same_has_the_same_sketch() -> None:
    loud = "THE REFUND WAS ISSUED ON MONDAY -- AFTER THE CUSTOMER ASKED TWICE"
    assert sketch_of(loud, KEY) == sketch_of(REFUND, KEY)
    assert similarity(sketch_of(loud, KEY), sketch_of(REFUND, KEY)) == 64


def test_similar_wording_shares_more_positions_than_unrelated_wording() -> None:
    close = "The refund was issued on Monday after the customer asked three times."
    far = "Deployment failed because the container image could not be pulled."
    near_score = similarity(sketch_of(REFUND, KEY), sketch_of(close, KEY))
    far_score = similarity(sketch_of(REFUND, KEY), sketch_of(far, KEY))
    # Jaccard of the shingle sets: 18 of 24 close (48 positions expected), 1 of 38 far.
    assert (near_score, far_score) == (46, 1)


def test_the_key_changes_every_sketch() -> None:
    assert similarity(sketch_of(REFUND, KEY), sketch_of(REFUND, b"another-key")) < 8


def test_the_permutations_are_fixed_by_the_version() -> None:
    # A sketch stored today must compare with one computed tomorrow: the positions of a known
    # text under a known key are pinned here, and change only with SKETCH_VERSION.
    raw = b"".join(value.to_bytes(8, "big") for value in sketch_of(REFUND, KEY))
    assert hashlib.sha256(raw).hexdigest()[:16] == PINNED


@pytest.mark.e2e
def test_two_processes_with_other_hash_seeds_compute_the_same_sketch() -> None:
    program = (
        "from mcpd.themes import sketch_of; "
        f"print(','.join(map(str, sketch_of({REFUND!r}, {KEY!r}))))"
    )
    made = printed_under_seeds(program)
    assert made == {",".join(map(str, sketch_of(REFUND, KEY)))}


def test_bands_name_themselves() -> None:
    first = sketch_of(REFUND, KEY)
    second = (*first[:4], *(value + 1 for value in first[4:]))
    shifted = (*first[4:8], *first[:4], *first[8:])
    keys = band_keys(first)
    assert len(keys) == BANDS == 16
    assert [a == b for a, b in zip(keys, band_keys(second), strict=True)] == [True] + [False] * 15
    assert band_keys(shifted)[1] != keys[0], "equal rows in another band are another key"


def test_a_sketch_of_another_length_is_refused() -> None:
    with pytest.raises(ValueError, match="64 positions"):
        similarity((1, 2), (1, 2))
    with pytest.raises(ValueError, match="64 positions"):
        band_keys((1,) * 63)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.text(min_size=1, max_size=12), min_size=1, max_size=12), st.data())
def test_similarity_is_symmetric_and_full_only_for_equal_shingles(
    words: list[str], data: st.DataObject
) -> None:
    text = " ".join(words)
    other = " ".join(data.draw(st.permutations(words)))
    one, two = sketch_of(text, KEY), sketch_of(other, KEY)
    assert similarity(one, two) == similarity(two, one)
    if shingles(text) == shingles(other):
        assert one == two
    assert similarity(one, one) == POSITIONS


PINNED = "e295235ab484d720"


def test_a_sketch_is_stored_as_512_bytes_and_read_back_unchanged() -> None:
    sketch = sketch_of("the refund was issued twice", b"k" * 32)
    stored = encode(sketch)
    assert len(stored) == 512
    assert decode(stored) == sketch
    with pytest.raises(ValueError, match="512 bytes"):
        decode(stored[:-1])


def test_the_deployment_key_is_derived_from_a_secret_and_never_the_secret() -> None:
    key = deployment_key(b"s" * 32)
    assert len(key) == 32
    assert key == deployment_key(b"s" * 32)
    assert key not in (b"s" * 32, deployment_key(b"t" * 32))
