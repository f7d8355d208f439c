"""Secrets mcpd hands out (API keys, session tokens) and the digests it keeps instead of them.

A secret is shown to its owner once; the control store holds only its SHA-256 digest, which is
what a presented bearer token is looked up by. SHA-256 (not a slow password hash) is right here:
the secrets are 256 random bits, so there is nothing to brute-force, and every request hashes one.

The readable prefixes (`mcpd_k_`, `mcpd_s_`, and `mcpd_c_` for the service credential) let a
person, a log scrubber or a secret scanner tell a key from a session token at a glance; they
carry no authority.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets

API_KEY_PREFIX = "mcpd_k_"
SESSION_TOKEN_PREFIX = "mcpd_s_"
SERVICE_CREDENTIAL_PREFIX = "mcpd_c_"

# 32 random bytes: 256 bits, 43 characters of URL-safe base64.
_SECRET_BYTES = 32
# "mcpd_k_" plus five random characters (30 bits): enough to tell a handful of keys apart in a
# listing, nowhere near enough to guess the remaining 226 bits.
_PREFIX_LENGTH = 12
# 64 bits of the digest: collisions among the keys of one deployment are out of the question, and
# the audit log never holds anything that could be looked up as the key's full digest.
_AUDIT_ID_LENGTH = 16


def new_api_key() -> str:
    """A new API key secret: `mcpd_k_` and 43 URL-safe characters (256 random bits)."""
    return API_KEY_PREFIX + secrets.token_urlsafe(_SECRET_BYTES)


def new_session_token() -> str:
    """A new account session token: `mcpd_s_` and 43 URL-safe characters (256 random bits)."""
    return SESSION_TOKEN_PREFIX + secrets.token_urlsafe(_SECRET_BYTES)


def new_service_credential() -> str:
    """A new service credential: `mcpd_c_` and 43 URL-safe characters (256 random bits)."""
    return SERVICE_CREDENTIAL_PREFIX + secrets.token_urlsafe(_SECRET_BYTES)


def digest(secret: str) -> str:
    """The SHA-256 of `secret` (UTF-8), as 64 lowercase hex digits: what the store keeps."""
    return hashlib.sha256(secret.encode("utf-8")).hexdigest()


def key_prefix(secret: str) -> str:
    """The first 12 characters of a key: shown in listings so its owner can tell keys apart."""
    return secret[:_PREFIX_LENGTH]


def audit_id(secret: str) -> str:
    """The first 16 hex digits of the secret's digest: the principal the audit log records."""
    return digest(secret)[:_AUDIT_ID_LENGTH]


def digests_equal(left: str, right: str) -> bool:
    """Compare two digests in constant time (no early exit an attacker could time)."""
    return hmac.compare_digest(left.encode("ascii", "replace"), right.encode("ascii", "replace"))
