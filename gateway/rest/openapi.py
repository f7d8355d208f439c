"""The OpenAPI 3.1 document of the REST surface, generated from the same `Rpc`s the router serves.

Schemas come from `mcpd.codec` (the only owner of the wire shape), descriptions from the proto
comments. Messages get two schemas when they travel both ways: `Span` as the server writes it
(with `required`) and `SpanInput` as the server accepts it (nothing required, no unknown fields).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from google.protobuf.descriptor import Descriptor, EnumDescriptor, FieldDescriptor

from gateway.rest.binding import query_fields
from gateway.rest.catalog import Rpc
from mcpd import codec

COMPONENTS = "#/components/schemas/"
ERROR_SCHEMA = "ErrorResponse"
INPUT_SUFFIX = "Input"
BEARER = "bearer"


class _Components:
    """Collects the schemas a document references, naming each on first use (`codec.SchemaRefs`)."""

    def __init__(self, describe: Mapping[str, str]) -> None:
        self.schemas: dict[str, dict[str, Any]] = {}
        self._describe = describe.get
        self._owners: dict[str, str] = {}

    def _name(self, full_name: str, short: str) -> str:
        # Short names read best and are unique in mcpd today; a clash falls back to the full name.
        owner = self._owners.setdefault(short, full_name)
        if owner == full_name:
            return short
        qualified = full_name.replace(".", "_")
        self._owners.setdefault(qualified, full_name)
        return qualified

    def message_ref(self, message: Descriptor, *, for_input: bool) -> str:
        suffix = INPUT_SUFFIX if for_input else ""
        name = self._name(message.full_name + suffix, message.name + suffix)
        if name not in self.schemas:
            self.schemas[name] = {}  # reserve first: messages may refer to themselves
            self.schemas[name] = codec.message_schema(
                message, self, for_input=for_input, describe=self._describe
            )
        return COMPONENTS + name

    def enum_ref(self, enum: EnumDescriptor) -> str:
        name = self._name(enum.full_name, enum.name)
        if name not in self.schemas:
            self.schemas[name] = codec.enum_schema(enum, self._describe)
        return COMPONENTS + name

    def field(self, field: FieldDescriptor) -> dict[str, Any]:
        return codec.field_schema(field, self, for_input=True, describe=self._describe)

    def body(self, message: Descriptor, exclude: Iterable[str]) -> dict[str, Any]:
        excluded = set(exclude)
        if not excluded:
            return {"$ref": self.message_ref(message, for_input=True)}
        return codec.message_schema(
            message, self, for_input=True, describe=self._describe, exclude=excluded
        )

    def response(self, message: Descriptor) -> dict[str, Any]:
        if codec.is_inline(message):
            return codec.message_schema(message, self, describe=self._describe)
        return {"$ref": self.message_ref(message, for_input=False)}


def _error_schema() -> dict[str, Any]:
    return {
        "type": "object",
        "description": "The body of every error response.",
        "required": ["error"],
        "properties": {
            "error": {
                "type": "object",
                "required": ["code", "status", "reason", "message"],
                "properties": {
                    "code": {"type": "integer", "description": "The HTTP status code."},
                    "status": {"type": "string", "description": "The gRPC status code name."},
                    "reason": {
                        "type": "string",
                        "description": "UPPER_SNAKE identifier a program can branch on.",
                    },
                    "message": {"type": "string", "description": "What went wrong."},
                    "field": {
                        "type": "string",
                        "description": "Dotted path of the request field at fault, when known.",
                    },
                },
            }
        },
    }


def _summary(text: str | None) -> str | None:
    if not text:
        return None
    first = text.split("\n\n", 1)[0].replace("\n", " ")
    return first.split(". ", 1)[0].rstrip(".")


def _operation(rpc: Rpc, components: _Components, describe: Mapping[str, str]) -> dict[str, Any]:
    doc = describe.get(rpc.method.full_name)
    operation: dict[str, Any] = {"operationId": rpc.operation_id, "tags": [rpc.service.name]}
    if summary := _summary(doc):
        operation["summary"] = summary
    if doc:
        operation["description"] = doc
    parameters: list[dict[str, Any]] = []
    for variable in rpc.template.variables:
        parameters.append(
            {
                "name": variable.name,
                "in": "path",
                "required": True,
                "schema": components.field(variable.fields[-1]),
            }
        )
    for name, path in query_fields(rpc).items():
        parameter: dict[str, Any] = {
            "name": name,
            "in": "query",
            "required": False,
            "schema": components.field(path[-1]),
        }
        if path[-1].is_repeated:
            # Repeated keys; the gateway also splits each value on commas.
            parameter.update(style="form", explode=True)
        parameters.append(parameter)
    if parameters:
        operation["parameters"] = parameters
    body = rpc.body_message
    if body is not None:
        exclude = [p[0] for p in rpc.template.field_paths] if rpc.body == "*" else []
        operation["requestBody"] = {
            "required": rpc.body_required,
            "content": {"application/json": {"schema": components.body(body, exclude)}},
        }
    error = {"$ref": "#/components/responses/Error"}
    # For an HttpBody answer this is the message whose JSON the body holds, not HttpBody itself.
    response = rpc.response_message
    operation["responses"] = {
        "200": {
            "description": response.name,
            "content": {"application/json": {"schema": components.response(response)}},
        },
        "4XX": error,
        "5XX": error,
    }
    access = rpc.access
    if access.open:
        operation["security"] = []
    extension: dict[str, Any] = {"open": access.open, "session": access.session}
    if access.scope:
        scopes = codec.enum_names(access.DESCRIPTOR.fields_by_name["scope"].enum_type)
        extension["scope"] = scopes.by_number[access.scope]
    if access.audit_action:
        extension["audit_action"] = access.audit_action
    operation["x-mcpd-access"] = extension
    return operation


def build_openapi(
    rpcs: Iterable[Rpc],
    *,
    describe: Mapping[str, str],
    version: str,
    extra_paths: Mapping[str, dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """The OpenAPI 3.1 document: one operation per `Rpc`, every reachable schema in components.

    `describe` maps proto full names to their comments (`comments.load_comments`); `extra_paths`
    adds hand-described paths that are not RPCs (the document's own path, OTLP, MCP).
    """
    components = _Components(describe)
    paths: dict[str, dict[str, Any]] = {}
    tags: dict[str, str | None] = {}
    for rpc in rpcs:
        item = paths.setdefault(rpc.template.text, {})
        item[rpc.http_method.lower()] = _operation(rpc, components, describe)
        tags.setdefault(rpc.service.name, describe.get(rpc.service.full_name))
    for path, item in (extra_paths or {}).items():
        paths.setdefault(path, {}).update(item)
    if ERROR_SCHEMA in components.schemas:
        raise ValueError(f"a message is named {ERROR_SCHEMA}, which the error schema needs")
    schemas = dict(sorted(components.schemas.items()))
    schemas[ERROR_SCHEMA] = _error_schema()
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "mcpd REST API",
            "version": version,
            "description": "The REST surface of mcpd. Bodies follow spec/data-model.md.",
        },
        "tags": [
            {"name": name, **({"description": text} if text else {})} for name, text in tags.items()
        ],
        "security": [{BEARER: []}],
        "paths": paths,
        "components": {
            "schemas": schemas,
            "responses": {
                "Error": {
                    "description": "Any error, in the one error shape.",
                    "content": {
                        "application/json": {"schema": {"$ref": COMPONENTS + ERROR_SCHEMA}}
                    },
                }
            },
            "securitySchemes": {
                BEARER: {
                    "type": "http",
                    "scheme": "bearer",
                    "description": "An API key or an account session token.",
                }
            },
        },
    }
