"""Password hashing and validation, email normalisation."""

from __future__ import annotations

import pytest

from mcpd.auth.passwords import (
    hash_password,
    needs_rehash,
    normalize_email,
    validate_password,
    verify_nothing,
    verify_password,
)
from mcpd.runtime.errors import InvalidArgument


def test_hash_is_argon2id_salted_and_verifies() -> None:
    hashed = hash_password("correct horse battery")
    assert hashed.startswith("$argon2id$")
    assert "correct horse battery" not in hashed
    assert hash_password("correct horse battery") != hashed  # fresh salt each time
    assert verify_password(hashed, "correct horse battery")
    assert not verify_password(hashed, "correct horse battery!")
    assert not needs_rehash(hashed)


def test_verify_is_false_on_a_malformed_hash() -> None:
    assert not verify_password("not a hash", "whatever password")
    assert needs_rehash("not a hash")


def test_hash_with_weaker_parameters_needs_rehash() -> None:
    from argon2 import PasswordHasher

    weak = PasswordHasher(time_cost=1, memory_cost=8, parallelism=1).hash("some password")
    assert verify_password(weak, "some password")
    assert needs_rehash(weak)


def test_verify_nothing_returns_without_raising() -> None:
    verify_nothing("any password at all")


@pytest.mark.parametrize(
    "password",
    ["a" * 10, "ä" * 10, "x" * 1024, "€" * 341],  # 341 x 3 bytes = 1023 bytes
)
def test_valid_passwords(password: str) -> None:
    validate_password(password)


@pytest.mark.parametrize(
    ("password", "reason"),
    [
        ("a" * 9, "PASSWORD_TOO_SHORT"),
        ("", "PASSWORD_TOO_SHORT"),
        ("x" * 1025, "PASSWORD_TOO_LONG"),
        ("€" * 342, "PASSWORD_TOO_LONG"),  # 342 characters, but 1026 bytes
    ],
)
def test_invalid_passwords_name_the_field(password: str, reason: str) -> None:
    with pytest.raises(InvalidArgument) as caught:
        validate_password(password)
    assert caught.value.field == "password"
    assert caught.value.reason == reason


@pytest.mark.parametrize(
    ("email", "normalized"),
    [
        ("  Alice@Example.COM ", "alice@example.com"),
        ("bob@localhost", "bob@localhost"),
        ("STRASSE@Example.de", "strasse@example.de"),
        ("Straße@example.de", "strasse@example.de"),  # casefold, not lower
    ],
)
def test_email_normalisation(email: str, normalized: str) -> None:
    assert normalize_email(email) == normalized


@pytest.mark.parametrize(
    "email", ["", "   ", "alice", "@example.com", "alice@", "a@b@c", "al ice@example.com"]
)
def test_invalid_emails_name_the_field(email: str) -> None:
    with pytest.raises(InvalidArgument) as caught:
        normalize_email(email)
    assert caught.value.field == "email"
