"""Opaque continuation cursors: URL-safe base64 of a JSON body plus an HMAC-SHA256 tag.

The tag makes every field trustworthy, so a cursor can carry its target, page size, keyset
anchor and read-model snapshot instead of the server keeping per-cursor state. A cursor that
fails to decode or verify is refused as a whole; callers never learn which part was wrong.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
from collections.abc import Mapping
from typing import Any

from services.query.sessions.errors import invalid

# Bound the work an attacker-supplied string can cause before the tag is checked.
MAX_CURSOR_CHARS = 2048
_VERSION = 1
# Domain separation: a tag made for these cursors is useless anywhere else the key is used.
_CONTEXT = b"mcpd.sessions.cursor.v1\x00"


class CursorCodec:
    """Signs and verifies cursor bodies with one server key."""

    def __init__(self, key: bytes) -> None:
        if len(key) < 16:
            raise ValueError("the cursor key must be at least 16 bytes")
        self._key = key

    def encode(self, body: Mapping[str, Any]) -> str:
        """The cursor string for `body` (a JSON object of plain values)."""
        payload = json.dumps({"v": _VERSION, **body}, separators=(",", ":"), sort_keys=True).encode(
            "utf-8"
        )
        return f"{_b64(payload)}.{_b64(self._tag(payload))}"

    def decode(self, cursor: object, field: str = "cursor") -> dict[str, Any]:
        """The verified body, or invalid_request for anything malformed or tampered with."""
        bad = invalid(field, f"{field} is not a valid cursor; reopen the target without a cursor")
        if not isinstance(cursor, str) or not cursor or len(cursor) > MAX_CURSOR_CHARS:
            raise bad
        payload_text, _, tag_text = cursor.partition(".")
        try:
            payload = _unb64(payload_text)
            tag = _unb64(tag_text)
        except (binascii.Error, ValueError):
            raise bad from None
        if not hmac.compare_digest(tag, self._tag(payload)):
            raise bad
        try:
            body = json.loads(payload)
        except ValueError:
            raise bad from None
        if not isinstance(body, dict) or body.get("v") != _VERSION:
            raise bad
        return body

    def _tag(self, payload: bytes) -> bytes:
        return hmac.new(self._key, _CONTEXT + payload, hashlib.sha256).digest()


def fingerprint(*parts: object) -> str:
    """A short stable digest of values a cursor is bound to (a project, a filter)."""
    text = json.dumps(parts, separators=(",", ":"), sort_keys=True, default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:32]


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _unb64(text: str) -> bytes:
    if not text or not text.isascii():
        raise ValueError("empty or non-ASCII cursor part")
    data = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    # Only the canonical spelling is a cursor: base64's unused trailing bits would otherwise let
    # several strings decode to the same bytes.
    if _b64(data) != text:
        raise ValueError("non-canonical cursor encoding")
    return data
