"""A fast reader of the usual OTLP/JSON: the document straight into message constructors.

`json_format` walks a document in Python field by field, consulting descriptors at every
step; handing upb constructor keyword arguments built from a per-message plan does the same
work with far less Python per field. This reader only takes what OTLP exporters write: integer
enums, hex ids, 64-bit integers as decimal strings or numbers, base64 for other bytes. Anything
else (an enum by name, a number in another form, a wrong type, a value out of range, a
well-known type or map) raises `DeclinedError`, and the caller reads the document with
`json_format`, whose result, or error, is the reference.
"""

from __future__ import annotations

import base64
import binascii
import functools
from collections.abc import Callable
from typing import Any, cast

from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import Message

_ID_FIELDS = frozenset({"trace_id", "span_id", "parent_span_id"})
_T = FieldDescriptor
_INTEGERS = frozenset(
    {
        _T.TYPE_INT64,
        _T.TYPE_UINT64,
        _T.TYPE_SINT64,
        _T.TYPE_FIXED64,
        _T.TYPE_SFIXED64,
        _T.TYPE_INT32,
        _T.TYPE_UINT32,
        _T.TYPE_SINT32,
        _T.TYPE_FIXED32,
        _T.TYPE_SFIXED32,
        _T.TYPE_ENUM,
    }
)


class DeclinedError(Exception):
    """The document is not in the form this reader takes; read it with json_format."""


Scalar = Callable[[Any], Any]
# (field name, repeated, converter of a scalar or None, the message type of a message field)
_Field = tuple[str, bool, Scalar | None, Descriptor | None]


def read(message_class: type[Message], document: dict[str, Any]) -> Message:
    """`document` as a `message_class`; DeclinedError if it is not in the usual form."""
    try:
        # The stubs allow for the pure-Python descriptor class; under upb they are one class.
        descriptor = cast(Descriptor, message_class.DESCRIPTOR)
        return message_class(**_arguments(document, descriptor, 0))
    except (TypeError, ValueError) as exc:
        # upb refusing a value: out of range, not UTF-8.
        raise DeclinedError from exc


# Deeper documents (attribute values nested in attribute values) go to json_format, which
# refuses beyond 100 levels: this reader must never accept what json_format would refuse.
_MAX_DEPTH = 64


def _arguments(document: Any, descriptor: Descriptor, depth: int) -> dict[str, Any]:
    plan = _plan(descriptor)
    if type(document) is not dict or plan is None or depth > _MAX_DEPTH:
        raise DeclinedError
    fields, oneofs = plan
    arguments: dict[str, Any] = {}
    for key, value in document.items():
        field = fields.get(key)
        if field is None or value is None:
            continue  # unknown fields are ignored, as OTLP requires; null is unset
        name, repeated, scalar, message = field
        if repeated and type(value) is not list:
            raise DeclinedError
        if message is not None:
            if repeated:
                arguments[name] = [_arguments(item, message, depth + 1) for item in value]
            else:
                arguments[name] = _arguments(value, message, depth + 1)
        else:
            assert scalar is not None
            arguments[name] = [scalar(item) for item in value] if repeated else scalar(value)
    for members in oneofs:
        # upb would keep the last member given; json_format refuses two.
        if len(members.intersection(arguments)) > 1:
            raise DeclinedError
    return arguments


@functools.cache
def _plan(descriptor: Descriptor) -> tuple[dict[str, _Field], list[frozenset[str]]] | None:
    """How to read each field, by both key spellings (lowerCamelCase and the proto name), and
    the field names of each oneof; None for the messages left to json_format."""
    if descriptor.full_name.startswith("google.protobuf.") or descriptor.GetOptions().map_entry:
        # Well-known types and maps have JSON forms of their own (none is in an OTLP export).
        return None
    fields: dict[str, _Field] = {}
    for field in descriptor.fields:
        entry: _Field
        if field.message_type is not None:
            entry = (field.name, field.is_repeated, None, field.message_type)
        else:
            entry = (field.name, field.is_repeated, _scalar(field), None)
        fields[field.json_name] = entry
        fields[field.name] = entry
    oneofs = [
        frozenset(field.name for field in oneof.fields)
        for oneof in descriptor.oneofs
        if len(oneof.fields) > 1
    ]
    return fields, oneofs


def _scalar(field: FieldDescriptor) -> Scalar:
    if field.type == _T.TYPE_BYTES:
        return _hex if field.name in _ID_FIELDS else _base64
    if field.type in _INTEGERS:
        return _integer
    if field.type in (_T.TYPE_DOUBLE, _T.TYPE_FLOAT):
        return _number
    if field.type == _T.TYPE_STRING:
        return _string
    if field.type == _T.TYPE_BOOL:
        return _boolean
    raise AssertionError(f"unexpected field type {field.type} of {field.full_name}")


def _integer(value: Any) -> int:
    if type(value) is int:  # not bool
        return int(value)
    if type(value) is str:
        digits = value[1:] if value[:1] == "-" else value
        if digits.isascii() and digits.isdigit():
            return int(value)
    raise DeclinedError


def _number(value: Any) -> float:
    if type(value) is float or type(value) is int:
        return float(value)
    raise DeclinedError  # "NaN", "Infinity", numeric strings: json_format's


def _string(value: Any) -> str:
    if type(value) is str:
        return str(value)
    raise DeclinedError


def _boolean(value: Any) -> bool:
    if type(value) is bool:
        return bool(value)
    raise DeclinedError


def _hex(value: Any) -> bytes:
    if type(value) is not str:
        raise DeclinedError
    try:
        raw = bytes.fromhex(value)
    except ValueError:
        raise DeclinedError from None
    if len(raw) * 2 != len(value):  # fromhex skips whitespace; an id has none
        raise DeclinedError
    return raw


def _base64(value: Any) -> bytes:
    if type(value) is not str:
        raise DeclinedError
    try:
        return base64.b64decode(value, validate=True)
    except binascii.Error:
        raise DeclinedError from None
