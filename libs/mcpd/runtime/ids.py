"""Identifiers: mcpd's own ids (ULIDs) and W3C trace-context ids.

`new_id` returns a ULID: 26 characters of Crockford base32 (upper case, no I, L, O or U),
a 48-bit millisecond Unix timestamp followed by 80 random bits. Sorting ids as strings sorts them
by creation time, which keeps B-tree inserts append-mostly and lets a cursor be an id. Within one
process ids are strictly increasing even inside one millisecond or when the wall clock steps back
(the ULID "monotonic" variant: the random part is incremented instead of redrawn).
"""

from __future__ import annotations

import secrets
import threading
import time

CROCKFORD_ALPHABET = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
ID_LENGTH = 26

_RANDOM_BITS = 80
_RANDOM_LIMIT = 1 << _RANDOM_BITS
_TIMESTAMP_LIMIT = 1 << 48


class _Monotonic:
    """The last (millisecond, random) pair issued, so the next id is strictly greater."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._last_ms = -1
        self._last_random = 0

    def next(self, now_ms: int) -> tuple[int, int]:
        with self._lock:
            if now_ms > self._last_ms:
                self._last_ms, self._last_random = now_ms, secrets.randbits(_RANDOM_BITS)
            else:
                # Same millisecond, or the clock went back: keep the last timestamp so order
                # holds, and step the random part; on its (astronomically rare) overflow, borrow
                # the next millisecond.
                self._last_random += 1
                if self._last_random >= _RANDOM_LIMIT:
                    self._last_ms += 1
                    self._last_random = secrets.randbits(_RANDOM_BITS)
            return self._last_ms, self._last_random


_monotonic = _Monotonic()


def encode_ulid(timestamp_ms: int, randomness: int) -> str:
    """The ULID text for a millisecond timestamp and 80 random bits."""
    if not 0 <= timestamp_ms < _TIMESTAMP_LIMIT:
        raise ValueError(f"timestamp out of ULID range: {timestamp_ms}")
    if not 0 <= randomness < _RANDOM_LIMIT:
        raise ValueError("randomness must fit in 80 bits")
    value = (timestamp_ms << _RANDOM_BITS) | randomness
    chars = []
    for _ in range(ID_LENGTH):
        value, digit = divmod(value, 32)
        chars.append(CROCKFORD_ALPHABET[digit])
    return "".join(reversed(chars))


def ulid_timestamp_ms(value: str) -> int:
    """The millisecond timestamp inside a ULID (case-insensitive)."""
    if len(value) != ID_LENGTH:
        raise ValueError(f"not a ULID: {value!r}")
    number = 0
    for char in value.upper():
        digit = CROCKFORD_ALPHABET.find(char)
        if digit < 0:
            raise ValueError(f"not a ULID: {value!r}")
        number = number * 32 + digit
    if number >> 128:
        raise ValueError(f"not a ULID: {value!r}")
    return number >> _RANDOM_BITS


def new_id() -> str:
    """A new time-sortable id: a 26-character ULID, strictly increasing within this process."""
    timestamp_ms, randomness = _monotonic.next(time.time_ns() // 1_000_000)
    return encode_ulid(timestamp_ms, randomness)


def new_trace_id() -> str:
    """A new W3C trace id: 32 lowercase hex digits, never all zero (which means "invalid")."""
    while True:
        value = secrets.token_hex(16)
        if value.strip("0"):
            return value


def new_span_id() -> str:
    """A new W3C span id: 16 lowercase hex digits, never all zero (which means "invalid")."""
    while True:
        value = secrets.token_hex(8)
        if value.strip("0"):
            return value
