"""Rendering ClickHouse parameter and insert values: escaping, DateTime64 text."""

from __future__ import annotations

import random
from collections.abc import Mapping

import pytest

from mcpd.storage.clickhouse import params
from mcpd.storage.clickhouse.params import (
    DATETIME64_MAX_NS,
    DATETIME64_MIN_NS,
    datetime64_text,
    format_param,
)

CONTROL = "".join(chr(code) for code in range(0x20)) + "\x7f"
# Every control character, the characters the escapes involve, and some beyond ASCII.
ALPHABET = CONTROL + "\\'\"`{}:tnrb0N abcxyz" + "éДом🚀\u2028\ufffd\ud800"


def reference_escape(text: str, table: Mapping[str, str]) -> str:
    """The per-character implementation `params._escape` replaced, kept as the reference."""
    return "".join(table.get(char, char) for char in text)


def random_strings(count: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    found = ["", *CONTROL, "\\" * 5, "'\\'", "\\n", "\\\n", CONTROL * 3]
    for _ in range(count):
        size = rng.choice((1, 2, 5, 20, 200))
        found.append("".join(rng.choice(ALPHABET) for _ in range(size)))
    return found


@pytest.mark.parametrize("table", [params._ESCAPED, params._QUOTED], ids=["escaped", "quoted"])
def test_escape_matches_the_per_character_reference(table: Mapping[str, str]) -> None:
    for text in random_strings(3000, seed=20260101):
        assert params._escape(text, table) == reference_escape(text, table), repr(text)


def test_parameters_render_as_before_on_random_strings() -> None:
    texts = random_strings(500, seed=7)
    for text in texts:
        assert format_param(text) == reference_escape(text, params._ESCAPED)
    rendered = format_param([*texts[:50], None])
    expected = ", ".join("'" + reference_escape(text, params._QUOTED) + "'" for text in texts[:50])
    assert rendered == f"[{expected}, NULL]"


def test_escape_of_a_long_text_is_exact() -> None:
    text = ("a\\b\tc\nd'e\0f\rg\bh\fi " * 40_000)[:750_000]
    assert params._escape(text, params._QUOTED) == reference_escape(text, params._QUOTED)


@pytest.mark.parametrize(
    ("ns", "text"),
    [
        (0, "1970-01-01 00:00:00.000000000"),
        (1, "1970-01-01 00:00:00.000000001"),
        (-1, "1969-12-31 23:59:59.999999999"),
        (1_700_000_000_123_456_789, "2023-11-14 22:13:20.123456789"),
        (DATETIME64_MAX_NS, "2262-04-11 23:47:16.854775807"),
        (DATETIME64_MIN_NS, "1677-09-21 00:12:44.000000000"),
    ],
)
def test_datetime64_text(ns: int, text: str) -> None:
    assert datetime64_text(ns) == text


@pytest.mark.parametrize("ns", [DATETIME64_MIN_NS - 1, -(2**63), 2**63])
def test_datetime64_text_refuses_times_clickhouse_cannot_store(ns: int) -> None:
    with pytest.raises(ValueError, match="outside the range"):
        datetime64_text(ns)
