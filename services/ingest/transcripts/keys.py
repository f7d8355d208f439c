"""Stable keys and ids for the session read model.

IDs must survive re-imports, restarts and a rebuilt index, and two identical records on
different lines must stay two events: keys come from the harness's own ids where it has them,
else from a content hash plus an occurrence counter (never from a byte offset alone).
"""

from __future__ import annotations

import base64
import hashlib
from collections import Counter

# 26 base32 characters are 130 bits: they come from the digest's first 17 bytes alone, and
# base32 encodes 5 bytes at a time, so encoding the first 20 gives the same 26 characters as
# encoding all 32, in fewer steps (ids are made for every event a trace write touches).
_ENCODED_BYTES = 20


def _digest(*parts: str) -> str:
    joined = "\x1f".join(parts).encode("utf-8")
    head = hashlib.sha256(joined).digest()[:_ENCODED_BYTES]
    return base64.b32encode(head).decode("ascii").lower()[:26]


def session_id(source: str, session_key: str) -> str:
    """The MCP id of a session: `session:ses_<26 base32>`."""
    return f"session:ses_{_digest('session', source, session_key)}"


def turn_id(session: str, first_event_key: str) -> str:
    """The MCP id of a turn, keyed by its first event (stable as events are appended)."""
    return f"turn:turn_{_digest('turn', session, first_event_key)}"


def event_id(session: str, event_key: str) -> str:
    """The MCP id of an event."""
    return f"event:evt_{_digest('event', session, event_key)}"


class ContentKeys:
    """Keys for records without an id of their own: hash of the content plus how many times
    that same content was seen before in the file, so duplicates stay distinct and stable."""

    def __init__(self) -> None:
        self._seen: Counter[str] = Counter()

    def key(self, *content: str) -> str:
        """`h:<hash>:<occurrence>` for this content."""
        content_hash = _digest("content", *content)
        occurrence = self._seen[content_hash]
        self._seen[content_hash] += 1
        return f"h:{content_hash}:{occurrence}"
