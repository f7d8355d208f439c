"""OTLP's JSON encoding, read into the opentelemetry-proto messages and written back.

OTLP/JSON is the proto3 JSON mapping (lowerCamelCase keys, 64-bit integers as strings or numbers,
unknown fields ignored) with one deviation that matters here: trace and span ids are hex
strings, not base64. `json_format` is the reference reading: the ids are rewritten as base64 in
the parsed document, where the message schema says they are, before it reads the document.
Enums are accepted as integers (what OTLP requires) and, as `json_format` also reads them, by
name. The usual document (what SDK exporters write) is read by `_json_fast` instead, which
skips the generic walk; whatever it declines goes the reference way, so both accept and refuse
the same documents.
"""

from __future__ import annotations

import base64
import functools
import json
from typing import Any

from google.protobuf import json_format
from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import Message

from gateway.otlp import _json_fast
from mcpd.runtime.errors import InvalidArgument, quoted

MALFORMED_JSON = "MALFORMED_JSON"
INVALID_ID = "INVALID_ID"

# The bytes fields OTLP/JSON writes in hex, wherever they occur (Span, Span.Link, LogRecord,
# Exemplar).
_ID_FIELDS = frozenset({"trace_id", "span_id", "parent_span_id"})

_ID = None
Plan = dict[str, "Plan | None"]
"""JSON key -> `_ID` for a hex id, or the plan of the message below it (either key spelling)."""


def parse(request_class: type[Message], body: bytes) -> Message:
    """The `request_class` message of an OTLP/JSON body; InvalidArgument if it is not one."""
    try:
        # An empty body is an empty export, as it is in protobuf.
        document = json.loads(body) if body and not body.isspace() else {}
    except (ValueError, RecursionError) as exc:
        raise InvalidArgument(f"the body is not JSON: {exc}", reason=MALFORMED_JSON) from exc
    if not isinstance(document, dict):
        raise InvalidArgument("the body must be a JSON object", reason=MALFORMED_JSON)
    try:
        return _json_fast.read(request_class, document)
    except _json_fast.DeclinedError:
        return parse_reference(request_class, document)


def parse_reference(request_class: type[Message], document: dict[str, Any]) -> Message:
    """`document` read by `json_format` once its hex ids are base64 (it rewrites them in place);
    InvalidArgument naming what is wrong if it is not a `request_class`."""
    try:
        _ids_to_base64(document, _plan(request_class.DESCRIPTOR))
    except _BadIdError as err:
        raise InvalidArgument(
            f"{err.path}: expected a hex string, got {quoted(err.value)}",
            reason=INVALID_ID,
            field=err.path,
        ) from None
    message = request_class()
    try:
        json_format.ParseDict(document, message, ignore_unknown_fields=True)
    except json_format.ParseError as exc:
        raise InvalidArgument(
            f"the body is not an OTLP/JSON {request_class.DESCRIPTOR.name}: {exc}",
            reason=MALFORMED_JSON,
        ) from exc
    except Exception as exc:
        # json_format does not turn every bad input into a ParseError: a lone surrogate where
        # it expects an object makes upb raise SystemError. The input is at fault, not us.
        raise InvalidArgument(
            f"the body is not an OTLP/JSON {request_class.DESCRIPTOR.name}",
            reason=MALFORMED_JSON,
        ) from exc
    return message


def encode(message: Message) -> bytes:
    """`message` in OTLP/JSON (what a response carries: no ids, so plain proto3 JSON)."""
    return json.dumps(json_format.MessageToDict(message), separators=(",", ":")).encode()


def _ids_to_base64(node: dict[str, Any], plan: Plan) -> None:
    for key, below in plan.items():
        value = node.get(key)
        if value is None:
            continue
        try:
            if below is _ID:
                node[key] = _base64_of_hex(value)
            elif isinstance(value, list):
                for index, item in enumerate(value):
                    if isinstance(item, dict):
                        try:
                            _ids_to_base64(item, below)
                        except _BadIdError as err:
                            err.parts.append(f"[{index}]")
                            raise
            elif isinstance(value, dict):
                _ids_to_base64(value, below)
            # Anything else is left for json_format to refuse with its own message.
        except _BadIdError as err:
            err.parts.append(key)
            raise


def _base64_of_hex(value: object) -> str:
    if not isinstance(value, str):
        raise _BadIdError(value)
    try:
        raw = bytes.fromhex(value)
    except ValueError:
        raise _BadIdError(value) from None
    # fromhex skips whitespace between bytes; an id has none.
    if len(raw) * 2 != len(value):
        raise _BadIdError(value)
    return base64.b64encode(raw).decode("ascii")


class _BadIdError(Exception):
    def __init__(self, value: object) -> None:
        super().__init__()
        self.value = value
        self.parts: list[str] = []  # innermost first

    @property
    def path(self) -> str:
        return "".join(
            part if part.startswith("[") or i == 0 else f".{part}"
            for i, part in enumerate(reversed(self.parts))
        )


@functools.cache
def _plan(descriptor: Descriptor) -> Plan:
    """Where the ids are below `descriptor`, pruned to the branches that can reach one."""
    plans: dict[str, Plan] = {}
    _collect(descriptor, plans)
    owner = {id(plan): name for name, plan in plans.items()}
    # A fixpoint, because message types can be recursive (AnyValue holds AnyValues).
    live = {name for name, plan in plans.items() if any(b is _ID for b in plan.values())}
    grew = True
    while grew:
        grew = False
        for name, plan in plans.items():
            if name not in live and any(
                below is not _ID and owner[id(below)] in live for below in plan.values()
            ):
                live.add(name)
                grew = True
    # The walk then never descends into attributes, which hold no ids.
    for plan in plans.values():
        for key, below in list(plan.items()):
            if below is not _ID and owner[id(below)] not in live:
                del plan[key]
    return plans[descriptor.full_name]


def _collect(descriptor: Descriptor, plans: dict[str, Plan]) -> Plan:
    known = plans.get(descriptor.full_name)
    if known is not None:
        return known
    plan: Plan = {}
    plans[descriptor.full_name] = plan
    for field in descriptor.fields:
        if field.type == FieldDescriptor.TYPE_BYTES and field.name in _ID_FIELDS:
            below: Plan | None = _ID
        elif field.message_type is not None:
            below = _collect(field.message_type, plans)
        else:
            continue
        plan[field.json_name] = below
        plan[field.name] = below
    return plan
