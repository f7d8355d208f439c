"""Project rules applied by `Redactor`: the four modes on keys, patterns and both; hashing."""

from __future__ import annotations

import copy
import hashlib
import hmac
from typing import Any

import pytest

from mcpd.redaction import (
    HASH_PREFIX,
    RedactionPolicy,
    Redactor,
    is_hashed,
    mask,
    partial,
)

KEY = bytes(range(32))
CARD = "4111111111111111"


def redactor(*rules: dict[str, Any], key: bytes | None = KEY) -> Redactor:
    return Redactor(RedactionPolicy.parse({"rules": list(rules)}), key=key)


def digest(text: str, key: bytes = KEY) -> str:
    return HASH_PREFIX + hmac.new(key, text.encode(), hashlib.sha256).hexdigest()


# Keys.


def test_drop_removes_matching_keys_at_any_depth_case_insensitively() -> None:
    r = redactor({"name": "pw", "keys": ["password", "*_secret"], "mode": "drop"})
    payload = {
        "user": "ann",
        "Password": "x",
        "nested": [{"client_SECRET": {"a": 1}, "keep": True}],
        "secretary": "bob",
    }
    assert r.redact_json(payload) == {
        "user": "ann",
        "nested": [{"keep": True}],
        "secretary": "bob",
    }


def test_mask_replaces_any_value_but_null() -> None:
    r = redactor({"name": "acct", "keys": ["account"], "mode": "mask"})
    payload = {"a": {"account": "ACC-1"}, "b": {"account": 12}, "c": {"account": {"id": 1}}}
    assert r.redact_json(payload) == {
        "a": {"account": mask("acct")},
        "b": {"account": mask("acct")},
        "c": {"account": mask("acct")},
    }
    unchanged = {"account": None}
    assert r.redact_json(unchanged) is unchanged


def test_partial_keeps_a_prefix_and_a_suffix() -> None:
    r = redactor({"name": "card", "keys": ["card"], "mode": "partial"})
    assert r.redact_json({"card": CARD}) == {"card": "4111********1111"}
    assert r.redact_json({"card": int(CARD)}) == {"card": "4111********1111"}
    # Fewer characters would be masked than kept: everything is masked.
    assert r.redact_json({"card": "123456789012345"}) == {"card": "*" * 15}
    assert r.redact_json({"card": ["x"]}) == {"card": mask("card")}
    assert r.redact_json({"card": True}) == {"card": mask("card")}


def test_partial_with_custom_lengths() -> None:
    r = redactor(
        {"name": "iban", "keys": ["iban"], "mode": "partial", "keep_prefix": 2, "keep_suffix": 0}
    )
    assert r.redact_json({"iban": "DE89370400440532013000"}) == {"iban": "DE" + "*" * 20}
    assert partial("abcdefgh", 0, 0) == "********"
    assert partial("abcdefgh", 2, 2) == "ab****gh"
    assert partial("abcdefg", 2, 2) == "*******"
    assert partial("", 4, 4) == ""


def test_hash_is_the_keyed_digest_of_the_value() -> None:
    r = redactor({"name": "email", "keys": ["email"], "mode": "hash"})
    result = r.redact_json({"email": "ann@example.com", "other": {"email": {"b": 1, "a": [2]}}})
    assert result["email"] == digest("ann@example.com")
    # A non-string value is hashed as its canonical JSON.
    assert result["other"]["email"] == digest('{"a":[2],"b":1}')
    assert is_hashed(result["email"])


def test_the_strongest_rule_on_a_key_wins() -> None:
    r = redactor(
        {"name": "soft", "keys": ["token*"], "mode": "partial"},
        {"name": "hard", "keys": ["token_b"], "mode": "drop"},
    )
    assert r.redact_json({"token_a": "abcdefghijkl", "token_b": "x"}) == {"token_a": "*" * 12}


def test_a_project_rule_cannot_weaken_the_builtin_secret_mask() -> None:
    weaker = redactor({"name": "pw", "keys": ["password"], "mode": "partial"})
    assert weaker.redact_json({"password": "hunter2hunter2hunter2"}) == {
        "password": mask("secret_field")
    }
    stronger = redactor({"name": "pw", "keys": ["password"], "mode": "drop"})
    assert stronger.redact_json({"password": "hunter2", "n": 1}) == {"n": 1}
    # Non-strings are not secrets to the built-in rule; the project rule decides.
    assert weaker.redact_json({"password": 12345678901234567}) == {"password": "1234*********4567"}


# Patterns.


def test_pattern_rules_apply_to_every_string_and_to_text() -> None:
    r = redactor(
        {"name": "card", "pattern": r"\b\d{16}\b", "mode": "partial"},
        {"name": "email", "pattern": r"[\w.+-]+@[\w-]+\.[\w.-]+", "mode": "hash"},
        {"name": "ssn", "pattern": r"\b\d{3}-\d{2}-\d{4}\b", "mode": "mask"},
    )
    text = f"card {CARD}, mail ann@example.com, ssn 123-45-6789."
    expected = f"card 4111********1111, mail {digest('ann@example.com')}, ssn {mask('ssn')}."
    assert r.redact_text(text) == expected
    assert r.redact_json({"a": [{"b": text}], "n": 16}) == {"a": [{"b": expected}], "n": 16}
    # Keys are never rewritten, only values.
    assert r.redact_json({CARD: "x"}) == {CARD: "x"}


def test_a_drop_pattern_removes_the_string_holding_the_match() -> None:
    r = redactor({"name": "internal", "pattern": r"INTERNAL-ONLY", "mode": "drop"})
    payload = {
        "keep": "fine",
        "note": "INTERNAL-ONLY: do not share",
        "list": ["a", "x INTERNAL-ONLY"],
    }
    assert r.redact_json(payload) == {"keep": "fine", "list": ["a"]}
    assert r.redact_json("INTERNAL-ONLY") is None
    assert r.redact_text("INTERNAL-ONLY text") == mask("internal")


def test_keys_and_pattern_act_on_matches_under_the_key() -> None:
    r = redactor(
        {"name": "ssn", "keys": ["notes"], "pattern": r"\d{3}-\d{2}-\d{4}", "mode": "mask"}
    )
    payload = {
        "notes": {"text": "ssn 123-45-6789", "more": ["123-45-6789"]},
        "other": "123-45-6789",
    }
    assert r.redact_json(payload) == {
        "notes": {"text": f"ssn {mask('ssn')}", "more": [mask("ssn")]},
        "other": "123-45-6789",
    }


def test_keys_and_pattern_with_drop_remove_the_key_when_anything_under_it_matches() -> None:
    r = redactor({"name": "x", "keys": ["debug"], "pattern": "secret-thing", "mode": "drop"})
    assert r.redact_json({"debug": {"a": ["ok", "a secret-thing"]}, "b": 1}) == {"b": 1}
    kept = {"debug": {"a": ["ok"]}, "b": "secret-thing"}
    assert r.redact_json(kept) is kept


def test_empty_matches_are_ignored() -> None:
    r = redactor({"name": "x", "pattern": r"(?<=a)b?", "mode": "mask"})
    assert r.redact_text("ac") == "ac"
    assert r.redact_text("ab") == f"a{mask('x')}"


# Structure, identity, idempotence.


def test_nothing_matched_returns_the_input_object() -> None:
    r = redactor({"name": "card", "pattern": r"\b\d{16}\b", "mode": "mask"})
    payload = {"a": [1, 2.5, None, True, {"b": "text"}], "c": "more text"}
    assert r.redact_json(payload) is payload
    assert r.redact_text("plain") == "plain"


def test_only_changed_branches_are_copied_and_the_input_is_untouched() -> None:
    r = redactor({"name": "card", "pattern": r"\b\d{16}\b", "mode": "mask"})
    payload: dict[str, Any] = {
        "same": {"x": "y"},
        "changed": {"card": CARD},
        "list": [{"a": 1}, CARD],
    }
    before = copy.deepcopy(payload)
    result = r.redact_json(payload)
    assert payload == before
    assert result["same"] is payload["same"]
    assert result["list"][0] is payload["list"][0]
    assert result["changed"] == {"card": mask("card")}
    assert result["list"][1] == mask("card")


def test_tuples_and_other_mappings_come_back_as_lists_and_dicts() -> None:
    r = redactor({"name": "card", "pattern": r"\b\d{16}\b", "mode": "mask"})
    assert r.redact_json((CARD, "x")) == [mask("card"), "x"]
    assert r.redact_json({1: CARD}) == {1: mask("card")}


ALL_MODES = (
    {"name": "card", "pattern": r"\b\d{16}\b", "mode": "partial"},
    {"name": "email", "pattern": r"[\w.+-]+@[\w-]+\.[\w.-]+", "mode": "hash"},
    {"name": "hex", "pattern": r"[0-9a-f]{8,}", "mode": "mask"},
    {"name": "user", "keys": ["user"], "mode": "hash"},
    {"name": "acct", "keys": ["account"], "mode": "partial"},
    {"name": "pw", "keys": ["pw"], "mode": "drop"},
)


def test_redacting_twice_is_redacting_once() -> None:
    r = redactor(*ALL_MODES)
    payload = {
        "text": f"pay {CARD} from ann@example.com ref deadbeef01 token ghp_"
        + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8",
        "user": {"id": 7},
        "account": "ACC-0000-1111-2222",
        "pw": "x",
        "headers": {"Authorization": "Bearer abcdefghijklmnop1234"},
    }
    once = r.redact_json(payload)
    assert r.redact_json(once) == once
    # The digest written by the hash rule contains hex runs; the mask rule leaves it alone.
    assert digest("ann@example.com") in once["text"]


def test_hash_identifier() -> None:
    r = Redactor(key=KEY)
    hashed = r.hash_identifier("user-42")
    assert hashed == digest("user-42")
    assert hashed.startswith("hmac-sha256:")
    assert len(hashed) == len("hmac-sha256:") + 64
    assert r.hash_identifier("user-42") == hashed
    assert r.hash_identifier(hashed) == hashed  # already hashed: kept
    assert Redactor(key=bytes(32)).hash_identifier("user-42") != hashed
    assert r.hash_identifier("\ud800") != r.hash_identifier("")  # lone surrogates hash too
    assert not is_hashed("hmac-sha256:" + "A" * 64)
    assert not is_hashed(hashed + "0")


def test_hashing_needs_a_key() -> None:
    with pytest.raises(ValueError, match="redaction key"):
        Redactor().hash_identifier("x")
    keyless = redactor({"name": "h", "keys": ["k"], "mode": "hash"}, key=None)
    assert keyless.redact_json({"other": 1}) == {"other": 1}
    with pytest.raises(ValueError, match="redaction key"):
        keyless.redact_json({"k": "value"})
    with pytest.raises(ValueError, match="at least 16 bytes"):
        Redactor(key=b"short")


def test_for_project_parses_the_document() -> None:
    r = Redactor.for_project({"rules": [{"name": "pw", "keys": ["pw"], "mode": "drop"}]}, key=KEY)
    assert r.redact_json({"pw": 1}) == {}
    assert [rule.name for rule in r.policy.rules] == ["pw"]
    assert r.rules  # the built-in rules
