"""The wording sketch of a note: MinHash over the word unigrams and bigrams of its normalised
text, 64 positions, and the LSH bands that find a note's likely neighbours.

- **Normalised text**: Unicode NFKC, case-folded, split into words (`\\w+`, so punctuation and
  spacing never matter). The shingles are every word and every pair of adjacent words, each
  once.
- **Base hash**: a shingle's UTF-8 bytes through keyed BLAKE2b (8 bytes, the deployment's key),
  read as an unsigned integer below the Mersenne prime 2**61 - 1. Keyed, so a stored sketch
  cannot be matched against a dictionary of hashed words by anyone without the key; never
  Python's `hash()`, which is salted per process.
- **Positions**: 64 permutations h -> (a * h + b) mod (2**61 - 1), their (a, b) drawn once from
  unkeyed BLAKE2b of `mcpd-sketch-v1:<i>` and fixed with `SKETCH_VERSION`: changing them changes
  every sketch, so they are versioned and never edited. Position i of a sketch is the least
  permuted hash over the shingles; text without a word has the sketch of one empty shingle.
- **Similarity** of two sketches is how many of the 64 positions are equal, an integer out of
  64 (for two shingle sets with Jaccard similarity J, 64 * J is its expectation).
- **Bands**: 16 bands of 4 positions; two sketches are candidate neighbours when any band is
  equal. A band key names its band, so equal positions in different bands never collide.
"""

from __future__ import annotations

import hashlib
import itertools
import operator
import re
import struct
import unicodedata
from collections.abc import Sequence

__all__ = [
    "BANDS",
    "POSITIONS",
    "SKETCH_VERSION",
    "Sketch",
    "band_keys",
    "decode",
    "deployment_key",
    "encode",
    "shingles",
    "similarity",
    "sketch_of",
]

SKETCH_VERSION = 1
POSITIONS = 64
BANDS = 16
ROWS = POSITIONS // BANDS
_PRIME = (1 << 61) - 1
_WORD = re.compile(r"\w+")
# The stored form: every position an unsigned 8-byte big-endian integer.
_STORED = struct.Struct(f">{POSITIONS}Q")

Sketch = tuple[int, ...]
"""POSITIONS integers, each below 2**61 - 1."""


def _permutation(index: int) -> tuple[int, int]:
    digest = hashlib.blake2b(f"mcpd-sketch-v{SKETCH_VERSION}:{index}".encode(), digest_size=16)
    raw = digest.digest()
    a = int.from_bytes(raw[:8], "big") % (_PRIME - 1) + 1  # never 0: a must permute
    b = int.from_bytes(raw[8:], "big") % _PRIME
    return a, b


_PERMUTATIONS: tuple[tuple[int, int], ...] = tuple(_permutation(i) for i in range(POSITIONS))


def shingles(text: str) -> frozenset[str]:
    """The words of the normalised text and every pair of adjacent words (joined by a space)."""
    words = _WORD.findall(unicodedata.normalize("NFKC", text).casefold())
    pairs = (f"{first} {second}" for first, second in itertools.pairwise(words))
    return frozenset((*words, *pairs))


def sketch_of(text: str, key: bytes) -> Sketch:
    """The text's sketch under the deployment's `key` (1 to 64 bytes)."""
    found = shingles(text) or frozenset({""})
    bases = [
        int.from_bytes(hashlib.blake2b(s.encode(), digest_size=8, key=key).digest(), "big") % _PRIME
        for s in found
    ]
    return tuple(min((a * h + b) % _PRIME for h in bases) for a, b in _PERMUTATIONS)


def deployment_key(secret: bytes) -> bytes:
    """The sketch key of a deployment: 32 bytes derived from one of its secrets (the redaction
    key), so every process of the deployment sketches alike and the secret itself is never the
    key of two things."""
    return hashlib.blake2b(b"mcpd-sketch-key", key=secret[:64], digest_size=32).digest()


def encode(sketch: Sequence[int]) -> bytes:
    """The stored form of a sketch: its positions as 8-byte big-endian integers."""
    if len(sketch) != POSITIONS:
        raise ValueError(f"a sketch has {POSITIONS} positions")
    try:
        return _STORED.pack(*sketch)
    except struct.error:
        # A position out of 0..2**64 - 1: the error `int.to_bytes` names.
        return b"".join(value.to_bytes(8, "big") for value in sketch)


def decode(stored: bytes) -> Sketch:
    """The sketch `encode` stored."""
    if len(stored) != POSITIONS * 8:
        raise ValueError(f"a stored sketch is {POSITIONS * 8} bytes, got {len(stored)}")
    return _STORED.unpack(stored)


def similarity(first: Sequence[int], second: Sequence[int]) -> int:
    """How many positions of two sketches are equal, out of POSITIONS."""
    if len(first) != POSITIONS or len(second) != POSITIONS:
        raise ValueError(f"a sketch has {POSITIONS} positions")
    return sum(map(operator.eq, first, second))


def band_keys(sketch: Sequence[int]) -> tuple[bytes, ...]:
    """One key per band (BANDS of them): two sketches with an equal band share its key."""
    if len(sketch) != POSITIONS:
        raise ValueError(f"a sketch has {POSITIONS} positions")
    keys = []
    for band in range(BANDS):
        rows = sketch[band * ROWS : (band + 1) * ROWS]
        body = band.to_bytes(1, "big") + b"".join(value.to_bytes(8, "big") for value in rows)
        keys.append(hashlib.blake2b(body, digest_size=12).digest())
    return tuple(keys)
