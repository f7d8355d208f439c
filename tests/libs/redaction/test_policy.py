"""Parsing a project's `redaction` document: the format, and errors that name the bad field."""

from __future__ import annotations

from typing import Any

import pytest

from mcpd.redaction import RedactionMode, RedactionPolicy
from mcpd.runtime.errors import InvalidArgument


def test_the_documented_example_parses() -> None:
    policy = RedactionPolicy.parse(
        {
            "rules": [
                {
                    "name": "card",
                    "pattern": r"\b\d{16}\b",
                    "mode": "partial",
                    "keep_prefix": 6,
                    "keep_suffix": 2,
                },
                {"name": "pw", "keys": ["Password", "*_secret"], "mode": "drop"},
                {"name": "email", "pattern": r"[\w.+-]+@[\w-]+\.[\w.-]+", "mode": "hash"},
                {"name": "ssn", "keys": ["notes"], "pattern": r"\d{3}-\d{2}-\d{4}", "mode": "mask"},
            ]
        }
    )
    card, pw, email, ssn = policy.rules
    assert (card.mode, card.keep_prefix, card.keep_suffix) == (RedactionMode.PARTIAL, 6, 2)
    assert card.pattern is not None
    assert card.pattern.pattern == r"\b\d{16}\b"
    assert pw.keys == ("password", "*_secret")  # lower-cased: matching is case-insensitive
    assert pw.pattern is None
    assert pw.mode is RedactionMode.DROP
    assert email.mode is RedactionMode.HASH
    assert ssn.keys == ("notes",)
    assert ssn.pattern is not None
    assert RedactionPolicy.parse(policy.to_json()) == policy


@pytest.mark.parametrize("document", [None, {}, {"rules": None}, {"rules": []}])
def test_absent_means_no_rules(document: Any) -> None:
    assert RedactionPolicy.parse(document).rules == ()


def test_partial_defaults_to_four_and_four() -> None:
    (rule,) = RedactionPolicy.parse(
        {"rules": [{"name": "c", "keys": ["c"], "mode": "partial"}]}
    ).rules
    assert (rule.keep_prefix, rule.keep_suffix) == (4, 4)


def _error(document: Any) -> InvalidArgument:
    with pytest.raises(InvalidArgument) as caught:
        RedactionPolicy.parse(document)
    return caught.value


RULE = {"name": "r", "keys": ["k"], "mode": "mask"}


@pytest.mark.parametrize(
    ("document", "field", "words"),
    [
        ([], "redaction", "object"),
        ({"rule": []}, "redaction.rule", "unknown field"),
        ({"rules": {}}, "redaction.rules", "list"),
        ({"rules": [RULE] * 65}, "redaction.rules", "at most 64"),
        ({"rules": ["x"]}, "redaction.rules[0]", "object"),
        ({"rules": [{**RULE, "mod": "x"}]}, "redaction.rules[0].mod", "unknown field"),
        ({"rules": [{**RULE, "name": ""}]}, "redaction.rules[0].name", "required"),
        ({"rules": [{**RULE, "name": "a]b"}]}, "redaction.rules[0].name", "letters"),
        ({"rules": [{"keys": ["k"], "mode": "mask"}]}, "redaction.rules[0].name", "required"),
        ({"rules": [RULE, RULE]}, "redaction.rules[1].name", "already used"),
        ({"rules": [{**RULE, "mode": "erase"}]}, "redaction.rules[0].mode", "one of drop"),
        ({"rules": [{"name": "r", "keys": ["k"]}]}, "redaction.rules[0].mode", "required"),
        ({"rules": [{"name": "r", "mode": "mask"}]}, "redaction.rules[0].keys", "keys, a pattern"),
        ({"rules": [{**RULE, "keys": []}]}, "redaction.rules[0].keys", "non-empty list"),
        ({"rules": [{**RULE, "keys": "password"}]}, "redaction.rules[0].keys", "list"),
        ({"rules": [{**RULE, "keys": ["ok", ""]}]}, "redaction.rules[0].keys[1]", "key name"),
        ({"rules": [{**RULE, "keys": ["k"] * 65}]}, "redaction.rules[0].keys", "more than 64"),
        ({"rules": [{**RULE, "pattern": "("}]}, "redaction.rules[0].pattern", "not a valid"),
        ({"rules": [{**RULE, "pattern": 7}]}, "redaction.rules[0].pattern", "regular expression"),
        ({"rules": [{**RULE, "pattern": "x" * 1025}]}, "redaction.rules[0].pattern", "1024"),
        ({"rules": [{**RULE, "pattern": r"\d*"}]}, "redaction.rules[0].pattern", "empty string"),
        ({"rules": [{**RULE, "keep_prefix": 2}]}, "redaction.rules[0].keep_prefix", "only applies"),
        (
            {"rules": [{**RULE, "mode": "partial", "keep_suffix": -1}]},
            "redaction.rules[0].keep_suffix",
            "0 to 64",
        ),
        (
            {"rules": [{**RULE, "mode": "partial", "keep_prefix": True}]},
            "redaction.rules[0].keep_prefix",
            "integer",
        ),
        (
            {"rules": [{**RULE, "mode": "partial", "keep_prefix": 1.5}]},
            "redaction.rules[0].keep_prefix",
            "integer",
        ),
    ],
)
def test_mistakes_name_the_field(document: Any, field: str, words: str) -> None:
    error = _error(document)
    assert error.field == field
    assert words in error.message
    assert error.message.startswith(field.split("[")[0].split(".")[0])


def test_the_field_prefix_is_the_callers() -> None:
    with pytest.raises(InvalidArgument) as caught:
        RedactionPolicy.parse({"rules": [{"name": "r"}]}, field="project.redaction")
    assert caught.value.field == "project.redaction.rules[0].mode"


def test_strength_orders_modes() -> None:
    order = sorted(RedactionMode, key=lambda mode: mode.strength)
    assert order == [
        RedactionMode.PARTIAL,
        RedactionMode.HASH,
        RedactionMode.MASK,
        RedactionMode.DROP,
    ]
