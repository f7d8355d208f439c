"""The spec's JSON, both ways: the one place that knows how mcpd messages look on the wire.

REST and MCP bodies follow `spec/data-model.md`, not proto3's default JSON mapping: snake_case
names, lowercase enum names without their type prefix, RFC 3339 UTC timestamps with millisecond
precision, json fields as plain JSON, 64-bit integers as numbers, absent optional fields omitted.
`json_schema` describes exactly that shape for OpenAPI, so the document cannot drift from it.
"""

from mcpd.codec._decode import decode, decode_query_param, query_bindable
from mcpd.codec._encode import encode
from mcpd.codec._errors import UNKNOWN_FIELD, CodecError, EncodeError
from mcpd.codec._schema import (
    SchemaRefs,
    enum_schema,
    field_schema,
    is_inline,
    message_schema,
    required_fields,
)
from mcpd.codec._wire import EnumNames, enum_names, nanos_to_json

__all__ = [
    "UNKNOWN_FIELD",
    "CodecError",
    "EncodeError",
    "EnumNames",
    "SchemaRefs",
    "decode",
    "decode_query_param",
    "encode",
    "enum_names",
    "enum_schema",
    "field_schema",
    "is_inline",
    "message_schema",
    "nanos_to_json",
    "query_bindable",
    "required_fields",
]
