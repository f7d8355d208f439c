"""Message -> the spec's JSON (as Python lists, dicts and scalars, ready for `json.dumps`).

Encoding follows a plan per message type instead of querying the descriptor for every value:
`_encoder` turns a descriptor, once, into the function that writes such a message. For an
ordinary message that is a walk over prepared fields in declaration order (which is the key
order of the output), each with whether presence decides if it is written and the converter of
its value, none at all for the strings, bools and integers JSON carries as they are. Error paths
are built only when a value cannot be written or a nested message needs its own.
"""

from __future__ import annotations

import base64
import functools
from collections.abc import Callable
from math import isfinite
from typing import Any, NamedTuple

from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import Message
from google.protobuf.struct_pb2 import ListValue, Struct, Value
from google.protobuf.timestamp_pb2 import Timestamp

from mcpd.codec import _wire
from mcpd.codec._errors import EncodeError, child_path

# Doubles within this bound are integers exactly, so 42.0 can go out as 42 without losing anything;
# what a producer sent as 42 in a json field then comes back as 42, not 42.0.
_EXACT_INT_BOUND = 2.0**53

_Encode = Callable[[Message, str], Any]
"""Writes a message of one type as JSON; the str is its path, for errors."""

_Convert = Callable[[Any, str, str | int], Any]
"""Writes one value (a whole container, for a repeated field), given the path of what holds it
and its key there: a field name, a map key or a list index. The value's own path is only
spelled out when it cannot be written or holds a message."""


class _Field(NamedTuple):
    """One field of a message plan."""

    name: str
    presence: bool
    """Written only when set: a singular field with presence."""
    convert: _Convert | None
    """None when the value goes out as protobuf holds it."""


def encode(message: Message) -> dict[str, Any]:
    """The spec's JSON object for `message`.

    Field names are the proto names; enums are lowercase spec names and their UNSPECIFIED value is
    never written; timestamps are RFC 3339 UTC with millisecond precision; json fields are plain
    JSON; 64-bit integers are numbers. Optional and message fields are omitted when absent;
    every other scalar and every repeated field is always present. Raises `EncodeError` for a
    value JSON cannot carry (NaN, an enum number the descriptor does not know).
    """
    descriptor = _wire.descriptor_of(message)
    encoded = _encoder(descriptor)(message, "")
    if not isinstance(encoded, dict):
        raise TypeError(f"{descriptor.full_name} does not encode to a JSON object")
    return encoded


_OMIT: Any = object()
"""Marks the UNSPECIFIED enum value, which has no spec name and so never goes on the wire."""


# --- plans -----------------------------------------------------------------------------------


@functools.cache
def _encoder(descriptor: Descriptor) -> _Encode:
    """The function that writes a message of type `descriptor`, built on first use."""
    special = _SPECIAL_ENCODERS.get(descriptor.full_name)
    return special if special is not None else _object_encoder(descriptor)


def _object_encoder(descriptor: Descriptor) -> _Encode:
    fields = tuple(_prepare(field) for field in descriptor.fields)

    def encode_object(message: Message, path: str) -> dict[str, Any]:
        out: dict[str, Any] = {}
        # Bound once: looking a method up on a upb message costs about as much as calling it.
        has_field = message.HasField
        for name, presence, convert in fields:
            if presence and not has_field(name):
                continue
            value = getattr(message, name)
            if convert is None:
                out[name] = value
            else:
                encoded = convert(value, path, name)
                if encoded is not _OMIT:
                    out[name] = encoded
        return out

    return encode_object


def _prepare(field: FieldDescriptor) -> _Field:
    if _wire.is_map(field):
        return _Field(field.name, False, _map_converter(field))
    if field.is_repeated:
        return _Field(field.name, False, _repeated_converter(field))
    return _Field(field.name, field.has_presence, _converter(field))


def _converter(field: FieldDescriptor) -> _Convert | None:
    """How one value of `field` is written, or None when it goes out as it is."""
    kind = field.type
    if kind == FieldDescriptor.TYPE_MESSAGE:
        message_type = _wire.message_type_of(field)
        # Looked up per value, not while planning: a message type may contain itself.
        return lambda value, path, key: _encoder(message_type)(value, child_path(path, key))
    if kind == FieldDescriptor.TYPE_ENUM:
        return _enum_converter(field)
    if kind in (FieldDescriptor.TYPE_DOUBLE, FieldDescriptor.TYPE_FLOAT):
        return _double
    if kind == FieldDescriptor.TYPE_BYTES:
        return lambda value, path, key: base64.b64encode(value).decode("ascii")
    # bool, string and every integer type are JSON-native (64-bit integers included, by spec).
    return None


def _enum_converter(field: FieldDescriptor) -> _Convert:
    enum = _wire.enum_type_of(field)
    by_number = _wire.enum_names(enum).by_number

    def convert(number: int, path: str, key: str | int) -> Any:
        if number == 0:
            return _OMIT
        name = by_number.get(number)
        # An unknown number is enum_to_json's to refuse.
        return name if name is not None else _wire.enum_to_json(enum, number, child_path(path, key))

    return convert


def _double(value: float, path: str, key: str | int) -> float:
    if not isfinite(value):
        raise EncodeError(f"{value} has no JSON representation", field=child_path(path, key))
    return float(value)


def _repeated_converter(field: FieldDescriptor) -> _Convert:
    item = _converter(field)
    if item is None:
        return lambda values, path, key: list(values)
    convert = item

    def convert_all(values: Any, path: str, key: str | int) -> list[Any]:
        own = child_path(path, key)
        return [
            encoded
            for i, value in enumerate(values)
            if (encoded := convert(value, own, i)) is not _OMIT
        ]

    return convert_all


def _map_converter(field: FieldDescriptor) -> _Convert:
    item = _converter(_wire.message_type_of(field).fields_by_name["value"])

    def convert_map(mapping: Any, path: str, key: str | int) -> dict[str, Any]:
        own = child_path(path, key)
        out: dict[str, Any] = {}
        for entry_key in sorted(mapping):
            text = (
                ("true" if entry_key else "false")
                if isinstance(entry_key, bool)
                else str(entry_key)
            )
            value = mapping[entry_key]
            encoded = value if item is None else item(value, own, text)
            if encoded is not _OMIT:
                out[text] = encoded
        return out

    return convert_map


# --- well-known types ------------------------------------------------------------------------


def _encode_timestamp(message: Message, path: str) -> str:
    assert isinstance(message, Timestamp)
    return _wire.timestamp_to_json(message, path)


def _encode_value(message: Message, path: str) -> Any:
    assert isinstance(message, Value)
    return _json_value(message, _which_oneof(message, "kind"), path, None)


def _encode_struct(message: Message, path: str) -> dict[str, Any]:
    assert isinstance(message, Struct)
    return _json_object(message, path)


def _encode_list_value(message: Message, path: str) -> list[Any]:
    assert isinstance(message, ListValue)
    return _json_array(message, path)


_SPECIAL_ENCODERS: dict[str, _Encode] = {
    _wire.TIMESTAMP: _encode_timestamp,
    _wire.VALUE: _encode_value,
    _wire.STRUCT: _encode_struct,
    _wire.LIST_VALUE: _encode_list_value,
}


_which_oneof = Value.WhichOneof
"""Taken from the class: cheaper than looking the method up on each of a tree's values."""


def _json_object(message: Struct, path: str) -> dict[str, Any]:
    fields = message.fields
    out: dict[str, Any] = {}
    for key in fields:
        value = fields[key]
        kind = _which_oneof(value, "kind")
        # Most members are strings: those are read here, without a call.
        if kind == "string_value":
            out[key] = value.string_value
        else:
            out[key] = _json_value(value, kind, path, key)
    return out


def _json_array(message: ListValue, path: str) -> list[Any]:
    out: list[Any] = []
    for i, value in enumerate(message.values):
        kind = _which_oneof(value, "kind")
        if kind == "string_value":
            out.append(value.string_value)
        else:
            out.append(_json_value(value, kind, path, i))
    return out


def _json_value(value: Value, kind: str | None, parent: str, key: str | int | None) -> Any:
    """The JSON of `value`, whose oneof holds `kind`, found under `key` of what is at `parent`."""
    if kind == "string_value":
        return value.string_value
    if kind == "struct_value":
        return _json_object(value.struct_value, child_path(parent, key))
    if kind == "list_value":
        return _json_array(value.list_value, child_path(parent, key))
    if kind == "number_value":
        number = value.number_value
        if not isfinite(number):
            raise EncodeError(f"{number} has no JSON representation", field=child_path(parent, key))
        return int(number) if number.is_integer() and abs(number) < _EXACT_INT_BOUND else number
    if kind == "bool_value":
        return value.bool_value
    # null_value, or no kind set at all.
    return None
