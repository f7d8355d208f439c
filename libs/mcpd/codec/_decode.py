"""The spec's JSON (already parsed) -> message, strictly: anything unexpected is a CodecError.

Decoding follows a plan per message type instead of querying the descriptor for every value:
`_merger` turns a descriptor, once, into the function that fills such a message. For an
ordinary message that function looks each JSON key up in a dict of prepared fields (a setter
that knows its field's kind, integer range or enum names, whether null means absent and the
merger of a nested message), so a value costs one dict lookup and, for a string or a bool, not
even a call. Error paths are built only when a value is refused or a nested one needs its own.

The rules stay in one place: `_scalar` (and `_json_value` for json fields) decide what a field
takes and what a refusal says. Each plan's fast paths take only values of exactly the types
those rules accept as they are (a `str` for a string field, an in-range `int` for an integer
one) and hand everything else to the rules, so they cannot disagree.
"""

from __future__ import annotations

import base64
import binascii
import functools
from collections.abc import Callable, Mapping
from math import isfinite
from typing import Any, NamedTuple, TypeVar

from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import Message
from google.protobuf.struct_pb2 import ListValue, NullValue, Struct, Value
from google.protobuf.timestamp_pb2 import Timestamp

from mcpd.codec import _wire
from mcpd.codec._errors import UNKNOWN_FIELD, CodecError, child_path
from mcpd.runtime.errors import quoted

M = TypeVar("M", bound=Message)

_FLOAT_TYPES = (FieldDescriptor.TYPE_DOUBLE, FieldDescriptor.TYPE_FLOAT)

_Merge = Callable[[Message, object, str], None]
"""Fills a new message of one type from its JSON value; the str is that value's path."""

_Setter = Callable[[Message, object, str], None]
"""Sets one field from the JSON value under its key; the str is the path of the message."""

_Convert = Callable[[object], object]
"""What to store for a JSON value when it is of a type the rules take as it is, else `_SLOW`."""

_SLOW: Any = object()
"""Returned by a `_Convert` for a value only the rules (`_scalar`) can decide on."""


class _Never:
    """No JSON value is of this type: the `plain` of a field whose values all need a setter."""


class _Field(NamedTuple):
    """One field of a message plan."""

    plain: type
    """A value of exactly this type is stored as it is, without calling `setter`."""
    setter: _Setter


class _Member(NamedTuple):
    """A field that belongs to a oneof of two or more fields."""

    oneof: str
    null_is_absent: bool


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
    _merger(_wire.descriptor_of(message))(message, data, path)
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
        return f"the string {quoted(value)}"
    if isinstance(value, Mapping):
        return "an object"
    if isinstance(value, list):
        return "an array"
    return f"a {type(value).__name__}"


def _fail(path: str, expected: str, got: object) -> CodecError:
    return CodecError(f"{path or 'body'}: expected {expected}, got {describe(got)}", field=path)


# --- plans -----------------------------------------------------------------------------------


@functools.cache
def _merger(descriptor: Descriptor) -> _Merge:
    """The function that fills a message of type `descriptor`, built on first use."""
    special = _SPECIAL_MERGERS.get(descriptor.full_name)
    return special if special is not None else _object_merger(descriptor)


def _object_merger(descriptor: Descriptor) -> _Merge:
    fields = {field.name: _prepare(field) for field in descriptor.fields}
    members = _members(descriptor)
    type_name = descriptor.name

    def merge_object(message: Message, data: object, path: str) -> None:
        if type(data) is not dict and not isinstance(data, Mapping):
            raise _fail(path, f"a JSON object ({type_name})", data)
        seen: dict[str, str] = {}
        for key, value in data.items():
            field = fields.get(key) if type(key) is str else _lookup(fields, key)
            if field is None:
                name = child_path(path, str(key))
                raise CodecError(
                    f"{name}: unknown field {quoted(key)} in {type_name}",
                    field=name,
                    reason=UNKNOWN_FIELD,
                )
            if members:
                _claim(members, seen, key, value, path)
            if type(value) is field.plain:
                setattr(message, key, value)
            else:
                field.setter(message, value, path)

    return merge_object


def _lookup(fields: dict[str, _Field], key: object) -> _Field | None:
    # Keys of a JSON object are strings; a Mapping built in code might hold anything.
    return fields.get(key) if isinstance(key, str) else None


def _members(descriptor: Descriptor) -> dict[str, _Member]:
    # The synthetic oneof of a proto3 `optional` has one member, so it can never conflict.
    return {
        field.name: _Member(oneof.name, _null_is_absent(field))
        for oneof in descriptor.oneofs
        if len(oneof.fields) > 1
        for field in oneof.fields
    }


def _claim(
    members: dict[str, _Member], seen: dict[str, str], key: str, value: object, path: str
) -> None:
    # Protobuf would silently keep the last member of a oneof; refuse instead. A null that means
    # absent claims nothing.
    member = members.get(key)
    if member is None or (value is None and member.null_is_absent):
        return
    other = seen.setdefault(member.oneof, key)
    if other != key:
        name = child_path(path, str(key))
        raise CodecError(
            f"{name}: {other!r} and {key!r} are alternatives; send only one", field=name
        )


def _null_is_absent(field: FieldDescriptor) -> bool:
    # A json field takes null as its JSON value; elsewhere null means "not sent", which only a
    # field with presence can express.
    if field.is_repeated or not field.has_presence:
        return False
    return field.message_type is None or field.message_type.full_name != _wire.VALUE


def _prepare(field: FieldDescriptor) -> _Field:
    if _wire.is_map(field):
        return _Field(_Never, _map_setter(field))
    if field.is_repeated:
        if field.type == FieldDescriptor.TYPE_MESSAGE:
            return _Field(_Never, _repeated_message_setter(field))
        return _Field(_Never, _repeated_scalar_setter(field))
    if field.type == FieldDescriptor.TYPE_MESSAGE:
        return _Field(_Never, _message_setter(field))
    return _Field(_PLAIN.get(field.type, _Never), _scalar_setter(field))


# Fields whose JSON value of exactly this type is what protobuf stores.
_PLAIN: dict[int, type] = {FieldDescriptor.TYPE_STRING: str, FieldDescriptor.TYPE_BOOL: bool}


def _scalar_setter(field: FieldDescriptor) -> _Setter:
    name = field.name
    convert = _converter(field)
    null_is_absent = _null_is_absent(field)

    def set_scalar(message: Message, value: object, path: str) -> None:
        converted = convert(value)
        if converted is _SLOW:
            if value is None and null_is_absent:
                return
            converted = _scalar(field, value, child_path(path, name))
        setattr(message, name, converted)

    return set_scalar


def _message_setter(field: FieldDescriptor) -> _Setter:
    name = field.name
    message_type = _wire.message_type_of(field)
    null_is_absent = _null_is_absent(field)

    def set_message(message: Message, value: object, path: str) -> None:
        if value is None and null_is_absent:
            return
        sub: Message = getattr(message, name)
        sub.SetInParent()
        # Looked up per value, not while planning: a message type may contain itself.
        _merger(message_type)(sub, value, child_path(path, name))

    return set_message


def _repeated_message_setter(field: FieldDescriptor) -> _Setter:
    name = field.name
    item_type = _wire.message_type_of(field)

    def set_messages(message: Message, value: object, path: str) -> None:
        own = child_path(path, name)
        if type(value) is not list and not isinstance(value, list):
            raise _fail(own, "a JSON array", value)
        target: Any = getattr(message, name)
        merge = _merger(item_type)
        for i, item in enumerate(value):
            merge(target.add(), item, f"{own}[{i}]")

    return set_messages


def _repeated_scalar_setter(field: FieldDescriptor) -> _Setter:
    name = field.name
    convert = _converter(field)

    def set_scalars(message: Message, value: object, path: str) -> None:
        own = child_path(path, name)
        if type(value) is not list and not isinstance(value, list):
            raise _fail(own, "a JSON array", value)
        target: Any = getattr(message, name)
        for i, item in enumerate(value):
            converted = convert(item)
            if converted is _SLOW:
                converted = _scalar(field, item, f"{own}[{i}]")
            target.append(converted)

    return set_scalars


def _map_setter(field: FieldDescriptor) -> _Setter:
    name = field.name
    entry = _wire.message_type_of(field)
    key_field = entry.fields_by_name["key"]
    value_field = entry.fields_by_name["value"]
    value_type = value_field.message_type
    convert = _converter(value_field)

    def set_map(message: Message, value: object, path: str) -> None:
        own = child_path(path, name)
        if not isinstance(value, Mapping):
            raise _fail(own, "a JSON object", value)
        target: Any = getattr(message, name)
        for raw_key, item in value.items():
            item_path = f"{own}.{raw_key}"
            key = _map_key(key_field, str(raw_key), item_path)
            if value_type is not None:
                _merger(value_type)(target[key], item, item_path)
                continue
            converted = convert(item)
            if converted is _SLOW:
                converted = _scalar(value_field, item, item_path)
            target[key] = converted

    return set_map


def _map_key(field: FieldDescriptor, raw: str, path: str) -> object:
    # JSON object keys are always strings; the key type decides how to read them.
    if field.type == FieldDescriptor.TYPE_STRING:
        return raw
    return decode_query_param(field, raw, path)


# --- scalars ---------------------------------------------------------------------------------


def _converter(field: FieldDescriptor) -> _Convert:
    """The fast path of `_scalar` for `field`: exactly the values it returns unchanged."""
    kind = field.type
    if kind == FieldDescriptor.TYPE_STRING:
        return _same_if(str)
    if kind == FieldDescriptor.TYPE_BOOL:
        return _same_if(bool)
    if kind == FieldDescriptor.TYPE_ENUM:
        by_name = _wire.enum_names(_wire.enum_type_of(field)).by_name
        return lambda value: by_name.get(value, _SLOW) if type(value) is str else _SLOW
    if kind in _wire.INT_RANGES:
        low, high = _wire.INT_RANGES[kind]
        return lambda value: value if type(value) is int and low <= value <= high else _SLOW
    if kind == FieldDescriptor.TYPE_DOUBLE:
        return lambda value: value if type(value) is float and isfinite(value) else _SLOW
    if kind == FieldDescriptor.TYPE_FLOAT:
        bound = _wire.FLOAT32_MAX
        # The chained comparison is false for NaN and the infinities too.
        return lambda value: value if type(value) is float and -bound <= value <= bound else _SLOW
    return lambda value: _SLOW


def _same_if(exact: type) -> _Convert:
    return lambda value: value if type(value) is exact else _SLOW


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
        return _wire.check_float(_double(value, path), kind, path)
    if kind in _wire.INT_RANGES:
        return _integer(kind, value, path)
    if kind == FieldDescriptor.TYPE_BYTES:
        if not isinstance(value, str):
            raise _fail(path, "a base64 string", value)
        return _base64(value, path)
    raise TypeError(f"{path}: unsupported field type {kind}")


def _double(value: int | float, path: str) -> float:
    try:
        return float(value)
    except OverflowError:
        raise _fail(path, "a number within double range", value) from None


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


# --- well-known types ------------------------------------------------------------------------


def _merge_timestamp(message: Message, data: object, path: str) -> None:
    assert isinstance(message, Timestamp)
    if not isinstance(data, str):
        raise _fail(path, f"an RFC 3339 timestamp such as {_wire.TIMESTAMP_EXAMPLE}", data)
    message.seconds, message.nanos = _wire.timestamp_parts(data, path)


MAX_JSON_DEPTH = 24
"""How deeply a json field's value may nest. Each JSON level costs protobuf two or three message
levels (Value, Struct, map entry), and protobuf refuses to parse past 100: deeper JSON would be
accepted here and then fail, opaquely, in the service that parses it."""


def _merge_value(message: Message, data: object, path: str) -> None:
    assert isinstance(message, Value)
    _json_value(message, data, path, None, 0)


def _merge_struct(message: Message, data: object, path: str) -> None:
    assert isinstance(message, Struct)
    _json_object(message, data, path, 0)


def _merge_list_value(message: Message, data: object, path: str) -> None:
    assert isinstance(message, ListValue)
    _json_array(message, data, path, 0)


_SPECIAL_MERGERS: dict[str, _Merge] = {
    _wire.TIMESTAMP: _merge_timestamp,
    _wire.VALUE: _merge_value,
    _wire.STRUCT: _merge_struct,
    _wire.LIST_VALUE: _merge_list_value,
}


def _json_object(message: Struct, data: object, path: str, depth: int) -> None:
    if depth >= MAX_JSON_DEPTH:
        raise CodecError(f"{path}: JSON nests deeper than {MAX_JSON_DEPTH} levels", field=path)
    if type(data) is not dict and not isinstance(data, Mapping):
        raise _fail(path, "a JSON object", data)
    fields = message.fields
    if not data:
        # Nothing below selects the Struct, yet an empty object is a value.
        message.SetInParent()
    depth += 1
    for key, item in data.items():
        name = key if type(key) is str else str(key)
        if type(item) is str:
            fields[name].string_value = item
        else:
            _json_value(fields[name], item, path, name, depth)


def _json_array(message: ListValue, data: object, path: str, depth: int) -> None:
    if depth >= MAX_JSON_DEPTH:
        raise CodecError(f"{path}: JSON nests deeper than {MAX_JSON_DEPTH} levels", field=path)
    if type(data) is not list and not isinstance(data, list):
        raise _fail(path, "a JSON array", data)
    values = message.values
    if not data:
        message.SetInParent()
    depth += 1
    for i, item in enumerate(data):
        if type(item) is str:
            values.add().string_value = item
        else:
            _json_value(values.add(), item, path, i, depth)


def _json_value(
    target: Value, data: object, parent: str, key: str | int | None, depth: int
) -> None:
    """Set `target` to JSON `data`, found under `key` of the object or array at `parent`.

    The value's own path is only spelled out when it is refused or holds nested values. The
    commonest exact types come first; everything else (an integer, a non-finite float, a
    subclass, a Mapping) takes the general chain, whose order decides between overlapping types.
    """
    if type(data) is str:
        target.string_value = data
    elif type(data) is dict:
        _json_object(target.struct_value, data, child_path(parent, key), depth)
    elif type(data) is list:
        _json_array(target.list_value, data, child_path(parent, key), depth)
    elif type(data) is float and isfinite(data):
        target.number_value = data
    elif data is None:
        target.null_value = NullValue.NULL_VALUE
    elif isinstance(data, bool):
        target.bool_value = data
    elif isinstance(data, int | float):
        path = child_path(parent, key)
        number = _double(data, path)
        target.number_value = _wire.check_float(number, FieldDescriptor.TYPE_DOUBLE, path)
    elif isinstance(data, str):
        target.string_value = data
    elif isinstance(data, Mapping):
        _json_object(target.struct_value, data, child_path(parent, key), depth)
    elif isinstance(data, list):
        _json_array(target.list_value, data, child_path(parent, key), depth)
    else:
        raise _fail(child_path(parent, key), "a JSON value", data)


# --- text values -----------------------------------------------------------------------------


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
