"""`parse_json` reads with the decoder's C scanner directly: the same value, or the same text
back, as `json.JSONDecoder().decode` would give."""

from __future__ import annotations

import json
import math
import random
from typing import Any

import pytest

from services.ingest.otlp._values import parse_json

_DECODE = json.JSONDecoder().decode


def reference_parse_json(value: Any) -> Any:
    """`parse_json` as it was: `decode`, and the text itself when that raises ValueError."""
    if isinstance(value, str) and value[:1] in ("{", "["):
        try:
            return _DECODE(value)
        except ValueError:
            return value
    return value


def _same(a: Any, b: Any) -> bool:
    """Equal, NaN included, and of the same types all the way down."""
    if type(a) is not type(b):
        return False
    if isinstance(a, float) and math.isnan(a):
        return math.isnan(b)
    if isinstance(a, dict):
        return list(a) == list(b) and all(_same(a[key], b[key]) for key in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


TEXTS = [
    "{}",
    "[]",
    '{"a": 1}',
    '[{"role": "user", "parts": [{"type": "text", "content": "hi"}]}]',
    '{"a":1,"a":2}',
    '[1, 2.5, -0.0, 1e400, NaN, Infinity, -Infinity, true, false, null, "x"]',
    '{"k": "Grüße \\u00e9 \\ud83d\\ude00 \\ud800"}',
    '{"a": 1} ',
    '{"a": 1}\n\t ',
    "[1] [2]",
    '{"a": 1}x',
    "{",
    "[",
    "[1,",
    '{"a" 1}',
    "{not json}",
    "[this is prose in brackets]",
    "{} trailing",
    '[""',
    '["\\x"]',
    "[1]\x00",
    "{ }",
    "[ ]",
    "[\n1\n]",
    '{"nested": ' * 50 + "1" + "}" * 50,
    "not json",
    "",
    " {}",
]


@pytest.mark.parametrize("text", TEXTS)
def test_parse_json_is_the_decoder(text: str) -> None:
    assert _same(parse_json(text), reference_parse_json(text))


@pytest.mark.parametrize("value", [None, 3, 2.5, True, b"{}", ["{}"], {"a": "{}"}])
def test_parse_json_leaves_other_values_alone(value: Any) -> None:
    assert parse_json(value) is value


def test_parse_json_is_the_decoder_on_mangled_documents() -> None:
    rng = random.Random(0)
    documents = [
        json.dumps([{"role": "user", "parts": [{"type": "text", "content": "x" * 40}]}]),
        json.dumps({"query": "Grüße ✓ 東京", "limit": 20, "nested": {"a": [1, 2.5, None]}}),
        json.dumps({"a": [True, False, None, -1, 1e-7]}, separators=(",", ":")),
    ]
    for _ in range(3000):
        text = rng.choice(documents)
        cut = rng.randrange(1, len(text) + 1)
        mangled = text[:cut] + rng.choice(["", " ", "\n", "x", "}", "]", ",", '"', "{}"])
        if rng.random() < 0.3:
            position = rng.randrange(len(mangled))
            mangled = mangled[:position] + rng.choice("{}[],:\"' 0a\\") + mangled[position + 1 :]
        assert _same(parse_json(mangled), reference_parse_json(mangled)), mangled


def test_parse_json_gives_the_same_objects_a_second_time() -> None:
    # The scanner memoises keys within one call only: nothing leaks between calls.
    first = parse_json('[{"role": "user"}, {"role": "assistant"}]')
    second = parse_json('[{"role": "user"}]')
    assert first == [{"role": "user"}, {"role": "assistant"}]
    assert second == [{"role": "user"}]
