"""JSON Schema (2020-12, as OpenAPI 3.1 embeds it) for exactly what `encode` writes.

It lives beside the codec so the two are one piece of knowledge: change a wire rule here and in
`_encode` together, and the tests that validate encoded messages against these schemas say so.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from typing import Any, Protocol

from google.protobuf.descriptor import Descriptor, EnumDescriptor, FieldDescriptor

from mcpd.codec import _wire

Describe = Callable[[str], str | None]
"""Looks up the documentation of a full proto name (message, field, enum, or `Enum.VALUE`)."""


class SchemaRefs(Protocol):
    """How a schema points at the named schemas of other messages and enums (OpenAPI components)."""

    def message_ref(self, message: Descriptor, *, for_input: bool) -> str:
        """The `$ref` of `message`'s schema, as received in a request or as sent back."""
        ...

    def enum_ref(self, enum: EnumDescriptor) -> str:
        """The `$ref` of `enum`'s schema."""
        ...


_SCALARS: dict[int, dict[str, Any]] = {
    FieldDescriptor.TYPE_STRING: {"type": "string"},
    FieldDescriptor.TYPE_BOOL: {"type": "boolean"},
    FieldDescriptor.TYPE_DOUBLE: {"type": "number", "format": "double"},
    FieldDescriptor.TYPE_FLOAT: {"type": "number", "format": "float"},
    FieldDescriptor.TYPE_BYTES: {"type": "string", "contentEncoding": "base64"},
}
_WELL_KNOWN: dict[str, dict[str, Any]] = {
    _wire.TIMESTAMP: {
        "type": "string",
        "format": "date-time",
        "examples": [_wire.TIMESTAMP_EXAMPLE],
    },
    # Any JSON value at all: the empty schema.
    _wire.VALUE: {},
    _wire.STRUCT: {"type": "object"},
    _wire.LIST_VALUE: {"type": "array"},
}


def is_inline(message: Descriptor) -> bool:
    """Whether `message` is written as a JSON scalar or free JSON rather than an object schema."""
    return message.full_name in _WELL_KNOWN


def required_fields(message: Descriptor) -> list[str]:
    """The fields `encode` always writes: repeated fields and scalars without presence.

    An enum without presence is not among them, because its UNSPECIFIED value is omitted.
    """
    return [
        field.name
        for field in message.fields
        if field.is_repeated
        or (
            not field.has_presence
            and field.type not in (FieldDescriptor.TYPE_MESSAGE, FieldDescriptor.TYPE_ENUM)
        )
    ]


def _described(schema: dict[str, Any], describe: Describe | None, full_name: str) -> dict[str, Any]:
    text = describe(full_name) if describe else None
    return {**schema, "description": text} if text else schema


def _single(
    field: FieldDescriptor, refs: SchemaRefs, *, for_input: bool, describe: Describe | None
) -> dict[str, Any]:
    kind = field.type
    if kind == FieldDescriptor.TYPE_ENUM:
        return {"$ref": refs.enum_ref(_wire.enum_type_of(field))}
    if kind == FieldDescriptor.TYPE_MESSAGE:
        message = _wire.message_type_of(field)
        if message.GetOptions().map_entry:
            value = message.fields_by_name["value"]
            item = _single(value, refs, for_input=for_input, describe=describe)
            return {"type": "object", "additionalProperties": item}
        if is_inline(message):
            return dict(_WELL_KNOWN[message.full_name])
        return {"$ref": refs.message_ref(message, for_input=for_input)}
    if kind in _wire.INT_RANGES:
        low, high = _wire.INT_RANGES[kind]
        return {
            "type": "integer",
            "format": _wire.int_type_name(kind),
            "minimum": low,
            "maximum": high,
        }
    return dict(_SCALARS[kind])


def field_schema(
    field: FieldDescriptor,
    refs: SchemaRefs,
    *,
    for_input: bool = False,
    describe: Describe | None = None,
) -> dict[str, Any]:
    """The schema of `field`'s JSON value (an array schema when it is repeated, not a map)."""
    item = _single(field, refs, for_input=for_input, describe=describe)
    if field.is_repeated and not _wire.is_map(field):
        item = {"type": "array", "items": item}
    return _described(item, describe, field.full_name)


def message_schema(
    message: Descriptor,
    refs: SchemaRefs,
    *,
    for_input: bool = False,
    describe: Describe | None = None,
    exclude: Collection[str] = (),
) -> dict[str, Any]:
    """The object schema of `message`, leaving out the fields named in `exclude`.

    As sent (`for_input=False`) it lists the always-written fields as `required`. As received it
    requires nothing, since `decode` leaves absent fields at their zero value, and refuses unknown
    properties, since `decode` does.
    """
    if is_inline(message):
        return _described(dict(_WELL_KNOWN[message.full_name]), describe, message.full_name)
    properties = {
        field.name: field_schema(field, refs, for_input=for_input, describe=describe)
        for field in message.fields
        if field.name not in exclude
    }
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    if for_input:
        schema["additionalProperties"] = False
    else:
        required = [name for name in required_fields(message) if name not in exclude]
        if required:
            schema["required"] = required
    return _described(schema, describe, message.full_name)


def enum_schema(enum: EnumDescriptor, describe: Describe | None = None) -> dict[str, Any]:
    """A string schema of `enum`'s spec names; each value's documentation in the description."""
    names = _wire.enum_names(enum)
    schema: dict[str, Any] = {"type": "string", "enum": names.names()}
    if describe is None:
        return schema
    items = []
    for number, name in names.by_number.items():
        meaning = describe(f"{enum.full_name}.{enum.values_by_number[number].name}")
        items.append(f"- `{name}`: {meaning}" if meaning else f"- `{name}`")
    text = "\n\n".join(part for part in (describe(enum.full_name), "\n".join(items)) if part)
    if text:
        schema["description"] = text
    return schema
