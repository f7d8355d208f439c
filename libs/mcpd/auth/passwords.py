"""Account passwords (argon2id) and the email addresses accounts are found by.

Parameters are RFC 9106's second recommended profile ("low memory"): argon2id, 3 passes over
64 MiB with 4 lanes, 16-byte salt, 32-byte tag. The first profile (2 GiB) would let a handful of
concurrent logins exhaust a small daemon's memory. Each hash records its own parameters, so
`needs_rehash` tells the login handler when to upgrade a stored hash after these change.

Hashing and verifying take tens of milliseconds of CPU by design: async callers run them in a
worker thread (`asyncio.to_thread`), never on the event loop.
"""

from __future__ import annotations

import functools

from argon2 import PasswordHasher, profiles
from argon2.exceptions import InvalidHashError, VerificationError

from mcpd.runtime.errors import InvalidArgument

MIN_PASSWORD_CHARS = 10
# Bytes, not characters: the cost of hashing grows with the input, and a limit in characters
# would let four-byte characters quadruple it.
MAX_PASSWORD_BYTES = 1024
# RFC 5321's limit on a forward path; longer is not an address anyone can receive mail at.
MAX_EMAIL_CHARS = 254

_hasher = PasswordHasher.from_parameters(profiles.RFC_9106_LOW_MEMORY)


def hash_password(password: str) -> str:
    """The argon2id hash of `password` (PHC string `$argon2id$...`), with a fresh random salt."""
    return _hasher.hash(password)


def verify_password(hash: str, password: str) -> bool:
    """Whether `password` matches `hash`. False on a mismatch and on a malformed hash."""
    try:
        return _hasher.verify(hash, password)
    except (VerificationError, InvalidHashError):
        # A corrupt stored hash must not let anyone in, and must not become a 500 either.
        return False


def verify_nothing(password: str) -> None:
    """Spend the time `verify_password` would, for a login naming no account.

    Answering "no such account" faster than "wrong password" would tell an attacker which
    emails have accounts.
    """
    verify_password(_dummy_hash(), password)


def needs_rehash(hash: str) -> bool:
    """Whether `hash` was made with other parameters than today's (rehash after a good login)."""
    try:
        return _hasher.check_needs_rehash(hash)
    except InvalidHashError:
        return True


def validate_password(password: str) -> None:
    """Refuse a password shorter than 10 characters or longer than 1024 bytes (UTF-8)."""
    if len(password) < MIN_PASSWORD_CHARS:
        raise InvalidArgument(
            f"the password must be at least {MIN_PASSWORD_CHARS} characters",
            field="password",
            reason="PASSWORD_TOO_SHORT",
        )
    if len(password.encode("utf-8")) > MAX_PASSWORD_BYTES:
        raise InvalidArgument(
            f"the password must be at most {MAX_PASSWORD_BYTES} bytes",
            field="password",
            reason="PASSWORD_TOO_LONG",
        )


def normalize_email(email: str) -> str:
    """`email` trimmed and case-folded, the form accounts are stored and compared in.

    Raises InvalidArgument (field `email`) unless it looks like `local@domain`: one `@` with
    something on both sides and no whitespace. Deliverability is not checked.
    """
    normalized = email.strip().casefold()
    local, at, domain = normalized.rpartition("@")
    if (
        not at
        or not local
        or not domain
        or "@" in local
        or any(char.isspace() for char in normalized)
        or len(normalized) > MAX_EMAIL_CHARS
    ):
        raise InvalidArgument("not an email address", field="email", reason="INVALID_EMAIL")
    return normalized


@functools.cache
def _dummy_hash() -> str:
    # Made on first use, not at import: importing the module should not cost a hash.
    return _hasher.hash("not a password anyone has")
