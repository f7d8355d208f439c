"""Conversions between Python/protobuf values and what the SQL stores keep in their columns.

Timestamps are int64 nanoseconds since the Unix epoch, UTC (see `types`); JSON documents are
`google.protobuf.Value`s on the spec side.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from google.protobuf import json_format, struct_pb2, timestamp_pb2

from mcpd.runtime.clock import epoch_nanos

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_NANOS_PER_SECOND = 1_000_000_000


nanos = epoch_nanos


def datetime_of(value: int) -> datetime:
    """The aware UTC datetime of stored nanoseconds (truncated to microseconds)."""
    return EPOCH + timedelta(microseconds=value // 1000)


def timestamp(value: int) -> timestamp_pb2.Timestamp:
    """A protobuf Timestamp for stored nanoseconds, exactly."""
    seconds, remainder = divmod(value, _NANOS_PER_SECOND)
    return timestamp_pb2.Timestamp(seconds=seconds, nanos=remainder)


def timestamp_nanos(value: timestamp_pb2.Timestamp) -> int:
    """Stored nanoseconds for a protobuf Timestamp, exactly."""
    return value.seconds * _NANOS_PER_SECOND + value.nanos


def json_value(document: Any) -> struct_pb2.Value:
    """A protobuf Value for a stored JSON document."""
    value = struct_pb2.Value()
    json_format.ParseDict(document, value)
    return value
