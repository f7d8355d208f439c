"""The analyzer (folding, CJK, query units) and snippet windows, without a database."""

from __future__ import annotations

import pytest

from mcpd.sessions.search.analysis import (
    MAX_QUERY_UNITS,
    fold_with_offsets,
    query_units,
    tokens,
)
from mcpd.sessions.search.snippet import (
    ELLIPSIS,
    SNIPPET_CHARS,
    locate,
    normalize_scores,
    snippet,
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Café ÜBER", ["cafe", "uber"]),
        ("Straße Øresund Æsir ﬁle", ["strasse", "oresund", "aesir", "file"]),
        ("e\u0301cole", ["ecole"]),  # decomposed
        ("ΆΈ Ёлка", ["αε", "елка"]),
        ("ＡＢＣ１２３", ["abc123"]),  # full-width
        ("search_sessions foo-bar x.y/z", ["search", "sessions", "foo", "bar", "x", "y", "z"]),
        ("東京タワー", ["東", "京", "タ", "ワ", "ー"]),
        ("서울에서", ["서", "울", "에", "서"]),
        ("がぎ ｶﾞ", ["が", "ぎ", "ガ"]),  # (han)dakuten survive; half-width recomposes
        ("हिन्दी", ["हिन्दी"]),  # vowel signs (marks) stay in the word
        ("a" * 101 + " ok", ["ok"]),  # over-long tokens are dropped
    ],
)
def test_tokens(text: str, expected: list[str]) -> None:
    assert tokens(text) == expected


def test_query_units_group_adjacent_cjk_and_deduplicate() -> None:
    assert query_units("東京 タワー Café cafe 東京") == [
        ("東", "京"),
        ("タ", "ワ", "ー"),
        ("cafe",),
    ]
    assert query_units("東京cafe京") == [("東", "京"), ("cafe",), ("京",)]
    assert query_units("AND OR NOT: (x)") == [("and",), ("or",), ("not",), ("x",)]
    assert query_units("  !!  ") == []
    many = " ".join(f"w{i}" for i in range(200))
    assert len(query_units(many)) == MAX_QUERY_UNITS


def test_fold_with_offsets_maps_back_to_the_original() -> None:
    assert fold_with_offsets("Hello") == ("hello", None)
    assert fold_with_offsets("Café") == ("cafe", None)  # one to one
    folded, offsets = fold_with_offsets("Straße x")
    assert folded == "strasse x"
    assert offsets == [0, 1, 2, 3, 4, 4, 5, 6, 7]


def test_locate_finds_whole_tokens_only() -> None:
    text = "xcafe cafés Café"
    start, end = locate(text, [("cafe",)]) or (0, 0)
    assert text[start:end] == "Café"
    assert locate("東京タワー", [("京", "タ")]) == (1, 3)
    assert locate("search_sessions", [("sessions",)]) == (7, 15)
    assert locate("nothing here", [("absent",)]) is None
    text = "Die Straße ist lang"
    start, end = locate(text, [("strasse",)]) or (0, 0)
    assert text[start:end] == "Straße"


@pytest.mark.parametrize(
    ("text", "token", "expected"),
    [
        ("v2 v", "v", (3, 4)),  # a digit continues a token
        ("2fa fa", "fa", (4, 6)),
        ("needles needle", "needle", (8, 14)),  # a match may end the text
        ("reneedle needle.", "needle", (9, 15)),
        ("東京abc", "abc", (2, 5)),  # a CJK neighbour is an edge
        ("abc東京", "abc", (0, 3)),
        ("_abc_", "abc", (1, 4)),
        ("aaa", "aa", None),
        ("xabc abcx abcabc", "abc", None),
    ],
)
def test_locate_token_edges(text: str, token: str, expected: tuple[int, int] | None) -> None:
    assert locate(text, [(token,)]) == expected


def test_locate_prefers_the_heaviest_unit_then_the_earliest() -> None:
    text = "common words first, then the rare one"
    units = [("common",), ("rare",)]
    assert locate(text, units) == (0, 6)
    start, _ = locate(text, units, [1.0, 5.0]) or (0, 0)
    assert text[start:].startswith("rare")


def test_snippet_window() -> None:
    text = "x " * 500 + "the needle is here " + "y " * 500
    body, truncated = snippet(text, [("needle",)])
    assert truncated
    assert body.startswith(ELLIPSIS)
    assert body.endswith(ELLIPSIS)
    assert "the needle is here" in body
    assert len(body) <= SNIPPET_CHARS + 2
    # Whole words only at the edges.
    assert body[1] in "xy"
    assert body[2] == " "

    assert snippet("short\n\n text", [("short",)]) == ("short text", False)
    body, truncated = snippet("needle " + "z " * 300, [("needle",)])
    assert body.startswith("needle z")
    assert body.endswith(ELLIPSIS)
    assert truncated
    body, _ = snippet("w " * 300 + "needle", [("needle",)])
    assert body.startswith(ELLIPSIS)
    assert body.endswith("needle")
    # A match longer than the window still yields a bounded snippet.
    body, _ = snippet("q" * 1000, [("q" * 1000,)])
    assert len(body) <= SNIPPET_CHARS + 2


def test_normalize_scores() -> None:
    assert normalize_scores([]) == []
    assert normalize_scores([3.5]) == [1.0]
    assert normalize_scores([4.0, 2.0, 1.0]) == [1.0, 0.5, 0.25]
    assert normalize_scores([0.0, 0.0]) == [1.0, 1.0]
