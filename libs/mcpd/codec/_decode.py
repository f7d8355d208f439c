"""The spec's JSON (already parsed) -> message, strictly: anything unexpected is a CodecError."""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping
from typing import Any, TypeVar

from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import Message
from google.protobuf.struct_pb2 import ListValue, NullValue, Struct, Value
from google.protobuf.timestamp_pb2 import Timestamp

from mcpd.codec import _wire
from mcpd.codec._errors import UNKNOWN_FIELD, CodecError

M = TypeVar("M", bound=Message)

_FLOAT_TYPES = (FieldDescriptor.TYPE_DOUBLE, FieldDescriptor.TYPE_FLOAT)


def decode(data: object, message_type: type[M], *, path: str = "") -> M:
    """Decode parsed JSON `data` into a new `message_type`, by the rules `encode` writes.

    Strict: an unknown field, a value of the wrong JSON type, an integer out of range, a float
    where an integer belongs, a non-finite number, a bad timestamp or an unknown enum name is a
    `CodecError` (an `InvalidArgument`) whose `field` is the dotted path below `path`. Lenient
    in what the wire rules allow: 64-bit integers may be integer strings, timestamps may carry any
    offset (normalised to UTC), and `null` on a field with presence means absent. Fields that
    are absent keep their zero value; whether the request needed them is the servicer's call.
    """
    message = message_type()
    _merge(message, data, path)
    return message


def describe(value: object) -> str:
    """How an error message names a JSON value the caller sent: `the string 'x'`, `an object`."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return f"the number {value}"
    if isinstance(value, str):
        shown = value if len(value) <= 40 else value[:37] + "..."
        return f"the string {shown!r}"
    if isinstance(value, Mapping):
        return "an object"
    if isinstance(value, list):
        return "an array"
    return f"a {type(value).__name__}"


def _join(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


def _fail(path: str, expected: str, got: object) -> CodecError:
    return CodecError(f"{path or 'body'}: expected {expected}, got {describe(got)}", field=path)


def _merge(message: Message, data: object, path: str) -> None:
    descriptor = _wire.descriptor_of(message)
    full_name = descriptor.full_name
    if full_name == _wire.TIMESTAMP:
        assert isinstance(message, Timestamp)
        if not isinstance(data, str):
            raise _fail(path, f"an RFC 3339 timestamp such as {_wire.TIMESTAMP_EXAMPLE}", data)
        message.CopyFrom(_wire.timestamp_from_json(data, path))
        return
    if full_name in _wire.JSON_TYPES:
        _merge_json(message, data, path)
        return
    if not isinstance(data, Mapping):
        raise _fail(path, f"a JSON object ({descriptor.name})", data)
    fields = descriptor.fields_by_name
    oneofs_seen: dict[str, str] = {}
    for key, value in data.items():
        name = _join(path, str(key))
        field = fields.get(key) if isinstance(key, str) else None
        if field is None:
            raise CodecError(
                f"{name}: unknown field {key!r} in {descriptor.name}",
                field=name,
                reason=UNKNOWN_FIELD,
            )
        if value is None and _accepts_null_as_absent(field):
            continue
        # Protobuf would silently keep the last member of a oneof; refuse instead. (The
        # synthetic oneof of a proto3 `optional` has one member, so it can never trip this.)
        oneof = field.containing_oneof
        if oneof is not None:
            other = oneofs_seen.setdefault(oneof.name, key)
            if other != key:
                raise CodecError(
                    f"{name}: {other!r} and {key!r} are alternatives; send only one", field=name
                )
        _merge_field(message, field, value, name)


def _accepts_null_as_absent(field: FieldDescriptor) -> bool:
    # A json field takes null as its JSON value; elsewhere null means "not sent", which only a
    # field with presence can express.
    if field.is_repeated or not field.has_presence:
        return False
    return field.message_type is None or field.message_type.full_name != _wire.VALUE


def _merge_field(message: Message, field: FieldDescriptor, value: object, path: str) -> None:
    if _wire.is_map(field):
        _merge_map(message, field, value, path)
        return
    if field.is_repeated:
        if not isinstance(value, list):
            raise _fail(path, "a JSON array", value)
        target: Any = getattr(message, field.name)
        for i, item in enumerate(value):
            item_path = f"{path}[{i}]"
            if field.type == FieldDescriptor.TYPE_MESSAGE:
                _merge(target.add(), item, item_path)
            else:
                target.append(_scalar(field, item, item_path))
        return
    if field.type == FieldDescriptor.TYPE_MESSAGE:
        sub: Message = getattr(message, field.name)
        sub.SetInParent()
        _merge(sub, value, path)
        return
    setattr(message, field.name, _scalar(field, value, path))


def _merge_map(message: Message, field: FieldDescriptor, value: object, path: str) -> None:
    if not isinstance(value, Mapping):
        raise _fail(path, "a JSON object", value)
    entry = _wire.message_type_of(field)
    key_field = entry.fields_by_name["key"]
    value_field = entry.fields_by_name["value"]
    target: Any = getattr(message, field.name)
    for raw_key, item in value.items():
        item_path = f"{path}.{raw_key}"
        key = _map_key(key_field, str(raw_key), item_path)
        if value_field.type == FieldDescriptor.TYPE_MESSAGE:
            _merge(target[key], item, item_path)
        else:
            target[key] = _scalar(value_field, item, item_path)


def _map_key(field: FieldDescriptor, raw: str, path: str) -> object:
    # JSON object keys are always strings; the key type decides how to read them.
    if field.type == FieldDescriptor.TYPE_STRING:
        return raw
    return decode_query_param(field, raw, path)


def _scalar(field: FieldDescriptor, value: object, path: str) -> object:
    kind = field.type
    if kind == FieldDescriptor.TYPE_STRING:
        if not isinstance(value, str):
            raise _fail(path, "a string", value)
        return value
    if kind == FieldDescriptor.TYPE_BOOL:
        if not isinstance(value, bool):
            raise _fail(path, "true or false", value)
        return value
    if kind == FieldDescriptor.TYPE_ENUM:
        if not isinstance(value, str):
            raise _fail(path, f"a {_wire.enum_type_of(field).name} name as a string", value)
        return _wire.enum_from_json(_wire.enum_type_of(field), value, path)
    if kind in _FLOAT_TYPES:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise _fail(path, "a number", value)
        try:
            number = float(value)
        except OverflowError:
            raise _fail(path, "a number within double range", value) from None
        return _wire.check_float(number, kind, path)
    if kind in _wire.INT_RANGES:
        return _integer(kind, value, path)
    if kind == FieldDescriptor.TYPE_BYTES:
        if not isinstance(value, str):
            raise _fail(path, "a base64 string", value)
        return _base64(value, path)
    raise TypeError(f"{path}: unsupported field type {kind}")


def _integer(kind: int, value: object, path: str) -> int:
    expected = f"an integer ({_wire.int_type_name(kind)})"
    if isinstance(value, str) and kind in _wire.INT64_TYPES:
        # 64-bit integers may arrive as strings from clients that follow proto3's JSON mapping or
        # that cannot hold them in a double.
        parsed = _wire.parse_int_text(value)
        if parsed is None:
            raise _fail(path, expected, value)
        return _wire.check_int(parsed, kind, path)
    if isinstance(value, bool) or not isinstance(value, int):
        raise _fail(path, expected, value)
    return _wire.check_int(value, kind, path)


def _base64(text: str, path: str) -> bytes:
    try:
        padded = text + "=" * (-len(text) % 4)
        return base64.b64decode(padded.replace("-", "+").replace("_", "/"), validate=True)
    except (binascii.Error, ValueError):
        raise CodecError(f"{path}: expected base64, got {describe(text)}", field=path) from None


MAX_JSON_DEPTH = 24
"""How deeply a json field's value may nest. Each JSON level costs protobuf two or three message
levels (Value, Struct, map entry), and protobuf refuses to parse past 100: deeper JSON would be
accepted here and then fail, opaquely, in the service that parses it."""


def _merge_json(message: Message, data: object, path: str, depth: int = 0) -> None:
    if isinstance(message, Struct | ListValue) and depth >= MAX_JSON_DEPTH:
        raise CodecError(f"{path}: JSON nests deeper than {MAX_JSON_DEPTH} levels", field=path)
    if isinstance(message, Struct):
        if not isinstance(data, Mapping):
            raise _fail(path, "a JSON object", data)
        for key, item in data.items():
            _set_value(message.fields[str(key)], item, _join(path, str(key)), depth + 1)
    elif isinstance(message, ListValue):
        if not isinstance(data, list):
            raise _fail(path, "a JSON array", data)
        for i, item in enumerate(data):
            _set_value(message.values.add(), item, f"{path}[{i}]", depth + 1)
    else:
        assert isinstance(message, Value)
        _set_value(message, data, path, depth)


def _set_value(target: Value, data: object, path: str, depth: int) -> None:
    if data is None:
        target.null_value = NullValue.NULL_VALUE
    elif isinstance(data, bool):
        target.bool_value = data
    elif isinstance(data, int | float):
        try:
            number = float(data)
        except OverflowError:
            raise _fail(path, "a number within double range", data) from None
        target.number_value = _wire.check_float(number, FieldDescriptor.TYPE_DOUBLE, path)
    elif isinstance(data, str):
        target.string_value = data
    elif isinstance(data, Mapping):
        target.struct_value.SetInParent()
        _merge_json(target.struct_value, data, path, depth)
    elif isinstance(data, list):
        target.list_value.SetInParent()
        _merge_json(target.list_value, data, path, depth)
    else:
        raise _fail(path, "a JSON value", data)


def decode_query_param(field: FieldDescriptor, raw: str, path: str) -> object:
    """One value of `field` written as text, as in a URL path segment or a query parameter.

    Integers are decimal, doubles decimal (finite), bools `true` or `false`, enums their spec
    name, timestamps RFC 3339; strings are taken as they are. For a repeated field this decodes
    one element. Returns what to assign or append (a `Timestamp` for a timestamp field); raises
    `CodecError` naming `path` otherwise, and `TypeError` for a field text cannot carry.
    """
    kind = field.type
    if kind == FieldDescriptor.TYPE_MESSAGE:
        full_name = _wire.message_type_of(field).full_name
        if full_name == _wire.TIMESTAMP:
            return _wire.timestamp_from_json(raw, path)
        raise TypeError(f"{path}: a {full_name} cannot be sent as text")
    if kind == FieldDescriptor.TYPE_BOOL:
        if raw not in ("true", "false"):
            raise _fail(path, "true or false", raw)
        return raw == "true"
    if kind in _wire.INT_RANGES:
        parsed = _wire.parse_int_text(raw)
        if parsed is None:
            raise _fail(path, f"an integer ({_wire.int_type_name(kind)})", raw)
        return _wire.check_int(parsed, kind, path)
    if kind in _FLOAT_TYPES:
        number = _wire.parse_number_text(raw)
        if number is None:
            raise _fail(path, "a finite decimal number", raw)
        return _wire.check_float(number, kind, path)
    if kind == FieldDescriptor.TYPE_ENUM:
        return _wire.enum_from_json(_wire.enum_type_of(field), raw, path)
    if kind == FieldDescriptor.TYPE_BYTES:
        return _base64(raw, path)
    return raw


def query_bindable(field: FieldDescriptor) -> bool:
    """Whether `decode_query_param` can read `field` (or each element of it, when repeated)."""
    if field.message_type is None:
        return True
    return not _wire.is_map(field) and field.message_type.full_name == _wire.TIMESTAMP
