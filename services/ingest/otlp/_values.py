"""OTLP values as Python: AnyValue, attribute lists, ids, and the small coercions mapping needs.

Everything here is on the hot path (every attribute of every span passes through `attributes`),
so the code favours the cheapest protobuf accesses: a string is read before asking which member
of the oneof is set, because most attribute values are strings.
"""

from __future__ import annotations

import base64
import json
import math
from collections.abc import Callable, Iterable
from typing import Any

from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue

from mcpd.runtime.errors import InvalidArgument

_ZERO_TRACE_ID = bytes(16)
_COMPOUND = frozenset({"array_value", "kvlist_value", "bytes_value"})
# json.loads minus its argument checks: this runs for every message payload.
_DECODER = json.JSONDecoder()
_decode_json = _DECODER.decode
# What `decode` calls after its checks (the C scanner): (value, end), StopIteration when no
# value starts at the index, JSONDecodeError for a malformed one.
_scan_json: Callable[[str, int], tuple[Any, int]] = _DECODER.scan_once  # type: ignore[attr-defined]
_ZERO_SPAN_ID = bytes(8)


class RecordError(InvalidArgument):
    """A record that cannot become a row; the message is what the sender is told."""


def any_value(value: AnyValue) -> Any:
    """An OTLP AnyValue as a JSON-able Python value.

    kvlist -> dict, array -> list, bytes -> base64 text (JSON has no bytes), unset -> None.
    """
    text = value.string_value
    if text:
        return text
    which = value.WhichOneof("value")
    if which is None:
        return None
    if which == "array_value":
        return [any_value(item) for item in value.array_value.values]
    if which == "kvlist_value":
        return attributes(value.kvlist_value.values)
    if which == "bytes_value":
        return base64.b64encode(value.bytes_value).decode("ascii")
    return getattr(value, which)


def attributes(pairs: Iterable[KeyValue]) -> dict[str, Any]:
    """An OTLP attribute list as a flat dict (a repeated key keeps its last value)."""
    out: dict[str, Any] = {}
    for pair in pairs:
        value = pair.value
        text = value.string_value
        if text:
            out[pair.key] = text
            continue
        which = value.WhichOneof("value")
        if which is None:
            out[pair.key] = None
        elif which in _COMPOUND:
            out[pair.key] = any_value(value)
        else:
            out[pair.key] = getattr(value, which)
    return out


def trace_id_hex(raw: bytes, what: str) -> str:
    """The lowercase hex of a 16-byte trace id; RecordError for any other length or all zeros."""
    if len(raw) != 16:
        raise RecordError(f"{what} must be 16 bytes (32 hex characters), got {len(raw)} bytes")
    if raw == _ZERO_TRACE_ID:
        raise RecordError(f"{what} is all zeros, which OpenTelemetry defines as invalid")
    return raw.hex()


def span_id_hex(raw: bytes, what: str) -> str:
    """The lowercase hex of an 8-byte span id; RecordError for any other length or all zeros."""
    if len(raw) != 8:
        raise RecordError(f"{what} must be 8 bytes (16 hex characters), got {len(raw)} bytes")
    if raw == _ZERO_SPAN_ID:
        raise RecordError(f"{what} is all zeros, which OpenTelemetry defines as invalid")
    return raw.hex()


def optional_trace_id(raw: bytes, what: str) -> str | None:
    """Like `trace_id_hex`, but empty or all-zero bytes mean "no trace" and give None."""
    if not raw or raw == _ZERO_TRACE_ID:
        return None
    return trace_id_hex(raw, what)


def optional_span_id(raw: bytes, what: str) -> str | None:
    """Like `span_id_hex`, but empty or all-zero bytes mean "no span" and give None."""
    if not raw or raw == _ZERO_SPAN_ID:
        return None
    return span_id_hex(raw, what)


def parse_json(value: Any) -> Any:
    """A string holding a JSON object or array, parsed; anything else unchanged.

    Producers serialise structured payloads (messages, arguments) into string attributes;
    parsing them back is what makes them searchable. Text that merely looks like JSON stays text.
    """
    if isinstance(value, str) and value[:1] in ("{", "["):
        # The scanner directly: a value that ends the text is what `decode` returns, with two
        # Python frames and a whitespace match fewer. Anything else (trailing whitespace,
        # trailing garbage) goes through `decode`, which says which.
        try:
            document, end = _scan_json(value, 0)
        except (StopIteration, ValueError):
            return value
        if end == len(value):
            return document
        try:
            return _decode_json(value)
        except ValueError:
            return value
    return value


def as_int(value: Any) -> int | None:
    """A non-negative integer from an int, an integral float or a decimal string; else None."""
    if type(value) is int:
        return value if value >= 0 else None
    if isinstance(value, float) and value.is_integer() and value >= 0:
        return int(value)
    if isinstance(value, str) and value.isdigit():
        return int(value)
    return None


def as_signed_int(value: Any) -> int | None:
    """An integer (negative allowed, as a seed may be) from an int, integral float or string."""
    if type(value) is int:
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str):
        try:
            return int(value)
        except ValueError:
            return None
    return None


def as_float(value: Any) -> float | None:
    """A finite float from an int, a float or a numeric string; else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        number = float(value)
    elif isinstance(value, str):
        try:
            number = float(value)
        except ValueError:
            return None
    else:
        return None
    return number if math.isfinite(number) else None


def as_text(value: Any) -> str | None:
    """A non-empty string, or None."""
    return value if isinstance(value, str) and value else None


def as_bool(value: Any) -> bool | None:
    """A bool from a bool or the strings true/false (any case); else None."""
    if isinstance(value, bool):
        return value
    if isinstance(value, str):
        lowered = value.lower()
        if lowered == "true":
            return True
        if lowered == "false":
            return False
    return None


def as_strings(value: Any) -> list[str] | None:
    """A list of non-empty strings from an array attribute, a JSON array or a single string."""
    value = parse_json(value)
    if isinstance(value, str):
        return [value] if value else None
    if isinstance(value, list):
        strings = [item for item in value if isinstance(item, str) and item]
        return strings or None
    return None


def json_text(value: Any) -> str:
    """Compact JSON text for a value that is not already a string."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, default=str)
