"""Secrets, digests, prefixes and audit ids."""

from __future__ import annotations

import re

from mcpd.auth.tokens import (
    audit_id,
    digest,
    digests_equal,
    key_prefix,
    new_api_key,
    new_session_token,
)

URLSAFE_43 = r"[A-Za-z0-9_-]{43}"


def test_api_keys_and_session_tokens_have_their_shapes_and_are_unique() -> None:
    keys = {new_api_key() for _ in range(50)}
    tokens = {new_session_token() for _ in range(50)}
    assert len(keys) == 50
    assert len(tokens) == 50
    assert all(re.fullmatch("mcpd_k_" + URLSAFE_43, key) for key in keys)
    assert all(re.fullmatch("mcpd_s_" + URLSAFE_43, token) for token in tokens)


def test_digest_is_sha256_hex_and_never_the_secret() -> None:
    secret = new_api_key()
    value = digest(secret)
    assert re.fullmatch(r"[0-9a-f]{64}", value)
    assert value != secret
    assert secret not in value
    assert digest(secret) == value  # deterministic: the store looks keys up by it
    assert digest("abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"


def test_prefix_tells_keys_apart_without_revealing_them() -> None:
    secret = new_api_key()
    prefix = key_prefix(secret)
    assert len(prefix) == 12
    assert secret.startswith(prefix)
    assert prefix.startswith("mcpd_k_")
    assert len({key_prefix(new_api_key()) for _ in range(50)}) > 1


def test_audit_id_is_a_short_digest_prefix() -> None:
    secret = new_api_key()
    assert audit_id(secret) == digest(secret)[:16]
    assert len(audit_id(secret)) == 16
    assert audit_id(secret) not in secret


def test_digests_equal() -> None:
    value = digest("x")
    assert digests_equal(value, digest("x"))
    assert not digests_equal(value, digest("y"))
    assert not digests_equal(value, value[:-1])
