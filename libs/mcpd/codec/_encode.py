"""Message -> the spec's JSON (as Python lists, dicts and scalars, ready for `json.dumps`)."""

from __future__ import annotations

import base64
import math
from typing import Any

from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import Message
from google.protobuf.struct_pb2 import ListValue, Struct, Value
from google.protobuf.timestamp_pb2 import Timestamp

from mcpd.codec import _wire
from mcpd.codec._errors import EncodeError

# Doubles within this bound are integers exactly, so 42.0 can go out as 42 without losing anything;
# what a producer sent as 42 in a json field then comes back as 42, not 42.0.
_EXACT_INT_BOUND = 2.0**53


def encode(message: Message) -> dict[str, Any]:
    """The spec's JSON object for `message`.

    Field names are the proto names; enums are lowercase spec names and their UNSPECIFIED value is
    never written; timestamps are RFC 3339 UTC with millisecond precision; json fields are plain
    JSON; 64-bit integers are numbers. Optional and message fields are omitted when absent;
    every other scalar and every repeated field is always present. Raises `EncodeError` for a
    value JSON cannot carry (NaN, an enum number the descriptor does not know).
    """
    encoded = _encode_message(message, "")
    if not isinstance(encoded, dict):
        raise TypeError(
            f"{_wire.descriptor_of(message).full_name} does not encode to a JSON object"
        )
    return encoded


def _join(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


def _encode_message(message: Message, path: str) -> Any:
    full_name = _wire.descriptor_of(message).full_name
    if full_name == _wire.TIMESTAMP:
        assert isinstance(message, Timestamp)
        return _wire.timestamp_to_json(message, path)
    if full_name in _wire.JSON_TYPES:
        return _encode_json(message, path)
    out: dict[str, Any] = {}
    for field in _wire.descriptor_of(message).fields:
        name = _join(path, field.name)
        if field.is_repeated:
            if _wire.is_map(field):
                out[field.name] = _encode_map(field, getattr(message, field.name), name)
            else:
                values = getattr(message, field.name)
                out[field.name] = [
                    encoded
                    for i, value in enumerate(values)
                    if (encoded := _encode_single(field, value, f"{name}[{i}]")) is not _OMIT
                ]
            continue
        if field.has_presence and not message.HasField(field.name):
            continue
        encoded = _encode_single(field, getattr(message, field.name), name)
        if encoded is not _OMIT:
            out[field.name] = encoded
    return out


_OMIT: Any = object()
"""Marks the UNSPECIFIED enum value, which has no spec name and so never goes on the wire."""


def _encode_single(field: FieldDescriptor, value: Any, path: str) -> Any:
    kind = field.type
    if kind == FieldDescriptor.TYPE_MESSAGE:
        return _encode_message(value, path)
    if kind == FieldDescriptor.TYPE_ENUM:
        return _OMIT if value == 0 else _wire.enum_to_json(_wire.enum_type_of(field), value, path)
    if kind in (FieldDescriptor.TYPE_DOUBLE, FieldDescriptor.TYPE_FLOAT):
        if not math.isfinite(value):
            raise EncodeError(f"{value} has no JSON representation", field=path)
        return float(value)
    if kind == FieldDescriptor.TYPE_BYTES:
        return base64.b64encode(value).decode("ascii")
    # bool, string and every integer type are JSON-native (64-bit integers included, by spec).
    return value


def _encode_map(field: FieldDescriptor, mapping: Any, path: str) -> dict[str, Any]:
    value_field = _wire.message_type_of(field).fields_by_name["value"]
    out: dict[str, Any] = {}
    for key in sorted(mapping):
        text = ("true" if key else "false") if isinstance(key, bool) else str(key)
        encoded = _encode_single(value_field, mapping[key], f"{path}.{text}")
        if encoded is not _OMIT:
            out[text] = encoded
    return out


def _encode_json(message: Message, path: str) -> Any:
    if isinstance(message, Struct):
        return {key: _encode_value(message.fields[key], _join(path, key)) for key in message.fields}
    if isinstance(message, ListValue):
        return [_encode_value(item, f"{path}[{i}]") for i, item in enumerate(message.values)]
    assert isinstance(message, Value)
    return _encode_value(message, path)


def _encode_value(value: Value, path: str) -> Any:
    kind = value.WhichOneof("kind")
    if kind is None or kind == "null_value":
        return None
    if kind == "number_value":
        number = value.number_value
        if not math.isfinite(number):
            raise EncodeError(f"{number} has no JSON representation", field=path)
        return int(number) if number.is_integer() and abs(number) < _EXACT_INT_BOUND else number
    if kind == "string_value":
        return value.string_value
    if kind == "bool_value":
        return value.bool_value
    if kind == "struct_value":
        return _encode_json(value.struct_value, path)
    return _encode_json(value.list_value, path)
