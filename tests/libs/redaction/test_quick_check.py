"""`Redactor._unchanged`, the quick check `redact_json` makes before walking a payload: whatever
it decides, the result is exactly the walk's (same value, and the same object when nothing
changed), for every kind of rule, key and value."""

from __future__ import annotations

import copy
import random
from collections import OrderedDict
from typing import Any

import pytest

from mcpd.redaction import HASH_PREFIX, RedactionPolicy, Redactor, mask, redact_row
from mcpd.redaction._redactor import _KEY_CACHE_SIZE, Dropped
from mcpd.redaction._rows import _error, _links, _optional_json, _stop_sequences

KEY = b"q" * 32
GITHUB = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"
DIGEST = HASH_PREFIX + "0" * 64

POLICIES: dict[str, Any] = {
    "builtin": None,
    "key rules": {
        "rules": [
            {"name": "pw", "keys": ["pw", "*_secret"], "mode": "drop"},
            {"name": "acct", "keys": ["account"], "mode": "mask"},
            {"name": "who", "keys": ["email"], "mode": "hash"},
            {"name": "card", "keys": ["card"], "mode": "partial"},
        ]
    },
    "scoped rules": {
        "rules": [
            {"name": "ssn", "keys": ["notes"], "pattern": r"\d{3}-\d{2}-\d{4}", "mode": "mask"},
            {"name": "inner", "keys": ["body"], "pattern": "INTERNAL", "mode": "drop"},
        ]
    },
    "value rules": {
        "rules": [{"name": "internal", "pattern": "INTERNAL-ONLY", "mode": "drop"}],
    },
}

STRINGS = [
    "",
    "ok",
    "four",
    "short text",
    "the quick brown fox jumps over the lazy dog " * 8,
    "Grüße, café crème — naïve résumé ✓ 東京 Ωμέγα",
    f"git push https://{GITHUB}@github.com",
    "Authorization: Bearer abcdefghijklmnopqrstuvwxyz",
    "the bearer of bad news",  # the gate fires, no rule matches
    "A-B_C:D=E~F",  # anchors, nothing more
    "password=hunter2;",
    mask("github_token"),
    DIGEST,
    "call 555-12-3456 now",
    "this is INTERNAL-ONLY material",
    "INTERNAL memo",
    "x\x00y",
]
KEYS = [
    "role",
    "content",
    "gen_ai.operation.name",
    "password",
    "api_key",
    "Authorization",
    "pw",
    "db_secret",
    "account",
    "email",
    "card",
    "notes",
    "body",
    "parts",
]


def _scalar(rng: random.Random) -> Any:
    return rng.choice([None, True, False, 0, 7, -3, 2.5, float("inf"), 10**30, *STRINGS, *STRINGS])


def _document(rng: random.Random, depth: int = 0) -> Any:
    roll = rng.random()
    if depth >= 4 or roll < 0.35:
        return _scalar(rng)
    if roll < 0.65:
        return {rng.choice(KEYS): _document(rng, depth + 1) for _ in range(rng.randrange(0, 6))}
    if roll < 0.9:
        return [_document(rng, depth + 1) for _ in range(rng.randrange(0, 5))]
    # Shapes the walk converts (or looks up by their text): the quick check must defer.
    return rng.choice(
        [
            (STRINGS[6], {"role": "user"}),
            OrderedDict(role="user", content=STRINGS[4]),
            {1: "one", 2: STRINGS[6]},
            {1.5: STRINGS[4]},
            b"bytes",
        ]
    )


def _documents(count: int, seed: int) -> list[Any]:
    rng = random.Random(seed)
    fixed: list[Any] = [
        [{"role": "user", "parts": [{"type": "text", "content": STRINGS[4]}]}],
        {"gen_ai.operation.name": "chat", "gen_ai.response.finish_reasons": ["stop"]},
        {"query": STRINGS[5], "limit": 20},
        {"password": "x"},
        {"password": ""},
        {"password": None},
        {"nested": [{"api_key": "abc"}]},
        {"email": "ann@example.com"},
        {"notes": ["call 555-12-3456 now"]},
        {"body": {"text": "INTERNAL memo"}},
        [STRINGS[8], STRINGS[9]],
        STRINGS[6],
        STRINGS[4],
        None,
        3,
    ]
    return fixed + [_document(rng) for _ in range(count)]


def _walked(redactor: Redactor, value: Any) -> Any:
    """`redact_json` the reference way: the walk alone."""
    result = redactor._walk(value, ())
    return None if type(result) is Dropped else result


@pytest.mark.parametrize("policy", list(POLICIES))
def test_redact_json_is_the_walk(policy: str) -> None:
    document_policy = POLICIES[policy]
    quick = Redactor(RedactionPolicy.parse(document_policy), key=KEY)
    reference = Redactor(RedactionPolicy.parse(document_policy), key=KEY)
    for document in _documents(400, seed=hash(policy) % 1000):
        before = copy.deepcopy(document)
        expected = _walked(reference, document)
        # Twice: the second call finds every key already decided.
        for _ in range(2):
            result = quick.redact_json(document)
            assert result == expected
            assert (result is document) == (expected is document)
        assert document == before  # the input is never modified


@pytest.mark.parametrize("policy", list(POLICIES))
def test_redact_value_is_the_walk(policy: str) -> None:
    quick = Redactor(RedactionPolicy.parse(POLICIES[policy]), key=KEY)
    for document in _documents(200, seed=7):
        expected = quick._walk(document, ())
        result = quick._redact_value(document)
        if type(expected) is Dropped:
            assert type(result) is Dropped
            assert result.rule == expected.rule
        else:
            assert result == expected
            assert (result is document) == (expected is document)


@pytest.mark.parametrize("policy", [name for name in POLICIES if name != "value rules"])
def test_unchanged_only_when_the_walk_changes_nothing(policy: str) -> None:
    # (Only asked where no pattern rule applies to every string.)
    redactor = Redactor(RedactionPolicy.parse(POLICIES[policy]), key=KEY)
    said_unchanged = 0
    for document in _documents(400, seed=11):
        if redactor._unchanged(document):
            said_unchanged += 1
            assert redactor._walk(document, ()) is document
    assert said_unchanged > 50  # the check does pass the common payloads


def test_a_gate_hit_without_a_match_is_left_to_the_walk() -> None:
    redactor = Redactor(key=KEY)
    document = {"text": "the bearer of bad news"}
    assert redactor._gate_search(document["text"]) is not None
    assert not redactor._unchanged(document)
    assert redactor.redact_json(document) is document


def test_secret_and_rule_keys_are_never_quiet() -> None:
    redactor = Redactor(RedactionPolicy.parse(POLICIES["key rules"]), key=KEY)
    assert redactor.redact_json({"password": "x"}) == {"password": mask("secret_field")}
    assert redactor.redact_json({"account": "A-1"}) == {"account": mask("acct")}
    assert "password" not in redactor._quiet_keys
    assert "account" not in redactor._quiet_keys
    assert {"role", "content"} <= redactor._quiet_keys | {"role", "content"}
    redactor.redact_json({"role": "user", "content": "hello"})
    assert {"role", "content"} <= redactor._quiet_keys


def test_secret_keys_off_leaves_them_quiet() -> None:
    redactor = Redactor(key=KEY, secret_keys=False)
    document = {"password": "hunter2"}
    assert redactor.redact_json(document) is document
    assert "password" in redactor._quiet_keys


def test_the_quiet_keys_are_forgotten_with_the_key_cache() -> None:
    redactor = Redactor(key=KEY)
    many = {f"key{index}": "value" for index in range(_KEY_CACHE_SIZE + 10)}
    assert redactor.redact_json(many) is many
    assert len(redactor._key_cache) <= _KEY_CACHE_SIZE
    assert redactor._quiet_keys <= set(redactor._key_cache)
    secret = {**many, "password": "x"}
    assert redactor.redact_json(secret) == {**many, "password": mask("secret_field")}


def _reference_redact_span(redactor: Redactor, row: dict[str, Any]) -> None:
    """`redact_row(redactor, "span", row)` as it was before the span columns were inlined."""
    value = row.get("user_id")
    if isinstance(value, str):
        hashed = redactor.hash_identifier(value)
        if hashed != value:
            row["user_id"] = hashed
    for column in ("input", "output", "attributes", "metadata"):
        _optional_json(redactor, row, column)
    _error(redactor, row)
    _links(redactor, row)
    _stop_sequences(redactor, row)


@pytest.mark.parametrize("policy", list(POLICIES))
def test_redact_row_of_a_span_is_the_reference(policy: str) -> None:
    redactor = Redactor(RedactionPolicy.parse(POLICIES[policy]), key=KEY)
    rng = random.Random(3)
    documents = _documents(150, seed=5)
    for index in range(300):
        row: dict[str, Any] = {
            "project": "p",
            "user_id": rng.choice([None, "ann", DIGEST, 42]),
            "input": rng.choice(documents),
            "output": rng.choice(documents),
            "attributes": rng.choice(documents),
            "metadata": rng.choice([None, *documents]),
            "error": rng.choice(
                [None, {"message": "INTERNAL-ONLY", "stack": GITHUB}, {"message": GITHUB}, "x"]
            ),
            "links": rng.choice(
                [None, [], [{"trace_id": "1" * 32, "attributes": {"why": GITHUB}}], "x"]
            ),
            "model_parameters": rng.choice(
                [None, {"temperature": 0.2}, {"stop_sequences": [GITHUB, "END"]}, "x"]
            ),
        }
        for column in ("error", "links", "model_parameters", "metadata") if index % 3 else ():
            del row[column]  # a row may leave optional columns out
        expected = copy.deepcopy(row)
        _reference_redact_span(redactor, expected)
        redact_row(redactor, "span", row)
        assert row == expected
