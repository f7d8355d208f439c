"""Scalar rules of the spec's JSON: enum names, timestamps, integer ranges, finite doubles."""

from __future__ import annotations

import datetime as dt
import functools
import math
import re
from dataclasses import dataclass
from typing import cast

from google.protobuf.descriptor import Descriptor, EnumDescriptor, FieldDescriptor
from google.protobuf.message import Message
from google.protobuf.timestamp_pb2 import Timestamp

from mcpd.codec._errors import CodecError, EncodeError
from mcpd.runtime.errors import quoted

TIMESTAMP = "google.protobuf.Timestamp"
VALUE = "google.protobuf.Value"
STRUCT = "google.protobuf.Struct"
LIST_VALUE = "google.protobuf.ListValue"
JSON_TYPES = frozenset({VALUE, STRUCT, LIST_VALUE})

# Inclusive bounds per integer type. JSON numbers are unbounded, so the codec is what keeps an
# out-of-range number from being silently truncated by the protobuf runtime.
_I32 = (-(2**31), 2**31 - 1)
_U32 = (0, 2**32 - 1)
_I64 = (-(2**63), 2**63 - 1)
_U64 = (0, 2**64 - 1)
INT_RANGES: dict[int, tuple[int, int]] = {
    FieldDescriptor.TYPE_INT32: _I32,
    FieldDescriptor.TYPE_SINT32: _I32,
    FieldDescriptor.TYPE_SFIXED32: _I32,
    FieldDescriptor.TYPE_UINT32: _U32,
    FieldDescriptor.TYPE_FIXED32: _U32,
    FieldDescriptor.TYPE_INT64: _I64,
    FieldDescriptor.TYPE_SINT64: _I64,
    FieldDescriptor.TYPE_SFIXED64: _I64,
    FieldDescriptor.TYPE_UINT64: _U64,
    FieldDescriptor.TYPE_FIXED64: _U64,
}
INT64_TYPES = frozenset(
    {
        FieldDescriptor.TYPE_INT64,
        FieldDescriptor.TYPE_SINT64,
        FieldDescriptor.TYPE_SFIXED64,
        FieldDescriptor.TYPE_UINT64,
        FieldDescriptor.TYPE_FIXED64,
    }
)
FLOAT32_MAX = 3.4028234663852886e38
# ASCII digits only: Python's int() and float() also take other scripts' digits and underscores.
_INTEGER_TEXT = re.compile(r"-?(0|[1-9][0-9]*)")
_NUMBER_TEXT = re.compile(r"-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?")


def int_type_name(field_type: int) -> str:
    """How an error message and a schema format name an integer type: int32, uint64, ..."""
    low, _ = INT_RANGES[field_type]
    bits = 64 if field_type in INT64_TYPES else 32
    return f"{'u' if low == 0 else ''}int{bits}"


def check_int(value: int, field_type: int, path: str) -> int:
    """`value` if it fits the field's integer type, otherwise a CodecError naming the range."""
    low, high = INT_RANGES[field_type]
    if not low <= value <= high:
        raise CodecError(
            f"{path}: {value} is out of range for {int_type_name(field_type)}"
            f" (expected {low} to {high})",
            field=path,
        )
    return value


def parse_int_text(raw: str) -> int | None:
    """The integer a decimal string spells, or None; no signs but '-', no spaces, no leading 0s."""
    return int(raw) if _INTEGER_TEXT.fullmatch(raw) else None


def parse_number_text(raw: str) -> float | None:
    """The number a JSON-style decimal string spells (no NaN, no infinities), or None."""
    return float(raw) if _NUMBER_TEXT.fullmatch(raw) else None


def check_float(value: float, field_type: int, path: str) -> float:
    """`value` if it is finite (and fits a 32-bit float when the field is one)."""
    if not math.isfinite(value):
        raise CodecError(f"{path}: expected a finite number, got {value}", field=path)
    if field_type == FieldDescriptor.TYPE_FLOAT and abs(value) > FLOAT32_MAX:
        raise CodecError(f"{path}: {value} is out of range for a 32-bit float", field=path)
    return value


# --- enums -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class EnumNames:
    """The spec names of one enum's values, both ways. The zero value has no spec name."""

    by_number: dict[int, str]
    by_name: dict[str, int]

    def names(self) -> list[str]:
        """Every spec name in declaration order, the UNSPECIFIED value excluded."""
        return list(self.by_name)


def _upper_snake(camel: str) -> str:
    spaced = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", camel)
    return re.sub(r"([A-Z]+)([A-Z][a-z])", r"\1_\2", spaced).upper()


@functools.cache
def enum_names(enum: EnumDescriptor) -> EnumNames:
    """The spec names of `enum`: SPAN_KIND_AGENT_RUN is `agent_run`.

    The prefix is taken from the zero value (buf STANDARD names it `<PREFIX>_UNSPECIFIED`) and
    falls back to the enum's name in UPPER_SNAKE; a value without the prefix keeps its whole name.
    """
    zero = enum.values_by_number.get(0)
    if zero is not None and zero.name.endswith("_UNSPECIFIED"):
        prefix = zero.name.removesuffix("UNSPECIFIED")
    else:
        prefix = _upper_snake(enum.name) + "_"
    by_number: dict[int, str] = {}
    for value in enum.values:
        if value.number == 0:
            continue
        by_number[value.number] = value.name.removeprefix(prefix).lower()
    return EnumNames(by_number, {name: number for number, name in by_number.items()})


def enum_to_json(enum: EnumDescriptor, number: int, path: str) -> str:
    """The spec name of `number`; EncodeError for a number the descriptor does not know."""
    name = enum_names(enum).by_number.get(number)
    if name is None:
        raise EncodeError(f"{number} is not a value of {enum.full_name}", field=path)
    return name


def enum_from_json(enum: EnumDescriptor, name: str, path: str) -> int:
    """The number of spec name `name`; CodecError listing the accepted names otherwise."""
    names = enum_names(enum)
    number = names.by_name.get(name)
    if number is None:
        raise CodecError(
            f"{path}: {quoted(name)} is not a {enum.name};"
            f" expected one of {', '.join(names.names())}",
            field=path,
        )
    return number


# --- timestamps ------------------------------------------------------------------------------

_EPOCH_ORDINAL = dt.date(1970, 1, 1).toordinal()
_MIN_SECONDS = (dt.date(1, 1, 1).toordinal() - _EPOCH_ORDINAL) * 86400
_MAX_SECONDS = (dt.date(9999, 12, 31).toordinal() - _EPOCH_ORDINAL) * 86400 + 86399
_RFC3339 = re.compile(
    r"([0-9]{4}-[0-9]{2}-[0-9]{2})[Tt]([0-9]{2}):([0-9]{2}):([0-9]{2})(?:\.([0-9]{1,9}))?"
    r"(?:[Zz]|([+-])([0-9]{2}):([0-9]{2}))"
)
TIMESTAMP_EXAMPLE = "2026-04-29T18:42:31.125Z"


def timestamp_to_json(ts: Timestamp, path: str) -> str:
    """RFC 3339 in UTC with exactly three fraction digits; finer precision is truncated."""
    return time_to_json(ts.seconds, ts.nanos, path)


def nanos_to_json(nanos: int, path: str) -> str:
    """`timestamp_to_json` of a time given as int nanoseconds since the Unix epoch."""
    seconds, fraction = divmod(nanos, 1_000_000_000)
    return time_to_json(seconds, fraction, path)


def time_to_json(seconds: int, nanos: int, path: str) -> str:
    """`timestamp_to_json` of a Timestamp's two fields."""
    if not (_MIN_SECONDS <= seconds <= _MAX_SECONDS and 0 <= nanos < 1_000_000_000):
        raise EncodeError(
            f"timestamp {seconds}s {nanos}ns is outside 0001-01-01..9999-12-31", field=path
        )
    days, seconds_of_day = divmod(seconds, 86400)
    hour, rest = divmod(seconds_of_day, 3600)
    minute, second = divmod(rest, 60)
    two = _TWO_DIGITS
    return (
        f"{_date_text(days)}T{two[hour]}:{two[minute]}:{two[second]}.{_MILLIS[nanos // 1_000_000]}Z"
    )


# Zero-padded numerals by index: a tuple lookup instead of formatting each field with :02d.
_TWO_DIGITS = tuple(f"{n:02d}" for n in range(100))
_MILLIS = tuple(f"{n:03d}" for n in range(1000))


@functools.lru_cache(maxsize=1024)
def _date_text(days: int) -> str:
    # A trace's thousands of timestamps fall on a few days: the calendar arithmetic is done once.
    date = dt.date.fromordinal(_EPOCH_ORDINAL + days)
    return f"{date.year:04d}-{date.month:02d}-{date.day:02d}"


def timestamp_from_json(text: str, path: str) -> Timestamp:
    """Any RFC 3339 date-time with an offset, normalised to UTC, nanoseconds kept."""
    seconds, nanos = timestamp_parts(text, path)
    return Timestamp(seconds=seconds, nanos=nanos)


def timestamp_parts(text: str, path: str) -> tuple[int, int]:
    """`timestamp_from_json` as a Timestamp's (seconds, nanos), for a caller that sets them."""
    match = _RFC3339.fullmatch(text)
    if match is None:
        raise CodecError(
            f"{path}: {quoted(text)} is not an RFC 3339 timestamp; expected one such as"
            f" {TIMESTAMP_EXAMPLE}",
            field=path,
        )
    date, hour_text, minute_text, second_text, fraction, sign, off_hour, off_minute = match.groups()
    day = _epoch_day(date)
    hour, minute, second = int(hour_text), int(minute_text), int(second_text)
    # RFC 3339 allows second 60 for a leap second; protobuf's Timestamp (smeared time) does not.
    if day is None or hour > 23 or minute > 59 or second > 59:
        raise CodecError(f"{path}: {quoted(text)} is not a valid date and time", field=path)
    offset = 0
    if sign is not None:
        if int(off_hour) > 23 or int(off_minute) > 59:
            raise CodecError(f"{path}: {quoted(text)} has an invalid UTC offset", field=path)
        offset = (int(off_hour) * 3600 + int(off_minute) * 60) * (1 if sign == "+" else -1)
    seconds = day * 86400 + hour * 3600 + minute * 60 + second - offset
    if not _MIN_SECONDS <= seconds <= _MAX_SECONDS:
        raise CodecError(
            f"{path}: {quoted(text)} is outside 0001-01-01..9999-12-31 UTC", field=path
        )
    return seconds, (int(fraction.ljust(9, "0")) if fraction else 0)


@functools.lru_cache(maxsize=1024)
def _epoch_day(date: str) -> int | None:
    # Days since 1970-01-01 of a YYYY-MM-DD the regex matched, None when no such day exists.
    # Cached for the reason `_date_text` is: a batch's timestamps fall on a few days.
    try:
        ordinal = dt.date(int(date[:4]), int(date[5:7]), int(date[8:])).toordinal()
    except ValueError:
        return None
    return ordinal - _EPOCH_ORDINAL


# --- descriptor access -----------------------------------------------------------------------
# The protobuf stubs type these attributes loosely (a upb union, Optional); these helpers narrow
# them once so the rest of the codec stays precise.


def descriptor_of(message: Message) -> Descriptor:
    """The descriptor of `message`."""
    return cast(Descriptor, message.DESCRIPTOR)


def message_type_of(field: FieldDescriptor) -> Descriptor:
    """The message type of a message field; TypeError for a field of another type."""
    if field.message_type is None:
        raise TypeError(f"{field.full_name} is not a message field")
    return field.message_type


def enum_type_of(field: FieldDescriptor) -> EnumDescriptor:
    """The enum type of an enum field; TypeError for a field of another type."""
    if field.enum_type is None:
        raise TypeError(f"{field.full_name} is not an enum field")
    return field.enum_type


def is_map(field: FieldDescriptor) -> bool:
    """Whether `field` is a map (a repeated field of a generated map-entry message)."""
    return field.message_type is not None and bool(field.message_type.GetOptions().map_entry)
