"""Portable column types for the SQL stores (SQLite and PostgreSQL).

Timestamps are stored as signed 64-bit integers: nanoseconds since the Unix epoch, UTC.
The spec asks for nanosecond precision (`start_time` "in UTC with nanosecond precision");
PostgreSQL's `timestamptz` keeps microseconds and SQLite has no timestamp type at all, so an
integer is the only representation that is lossless, identical on both backends, cheap to
index and to compare, and trivially mapped to `google.protobuf.Timestamp`. Int64 nanoseconds
cover the years 1677 to 2262.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import JSON, BigInteger
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.engine import Dialect
from sqlalchemy.types import TypeDecorator, TypeEngine

# Named so a column's declaration says what the integer means.
TimestampNs = BigInteger
# The spec's u64 counters (token counts, durations, sequence numbers). Stored signed: neither
# backend has an unsigned 64-bit type, and no real count reaches 2**63.
Count = BigInteger


class JsonDocument(TypeDecorator[Any]):
    """A JSON value: JSONB on PostgreSQL (indexable, compact), JSON text on SQLite.

    Python `None` is stored as SQL NULL, not as the JSON literal `null`, so an absent optional
    field reads back absent. (A JSON `null` inside a document is kept as it is.)
    """

    impl = JSON
    cache_ok = True

    def load_dialect_impl(self, dialect: Dialect) -> TypeEngine[Any]:
        if dialect.name == "postgresql":
            return dialect.type_descriptor(JSONB(none_as_null=True))
        return dialect.type_descriptor(JSON(none_as_null=True))
