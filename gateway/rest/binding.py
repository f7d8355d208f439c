"""HTTP request -> request message, by the RPC's `google.api.http` rule.

Path variables fill the fields they name; the body fills everything (`*`) or one field; query
parameters fill what is left, and a query parameter that names nothing fillable is refused rather
than ignored, so a misspelt filter is an error and not a silently unfiltered list. Every failure
is an `InvalidArgument` naming the parameter or body field at fault.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import Message
from google.protobuf.timestamp_pb2 import Timestamp

from gateway.rest import errors
from gateway.rest.catalog import Rpc
from mcpd import codec
from mcpd.runtime.errors import InvalidArgument, quoted

_MAX_QUERY_DEPTH = 4


def bind_request(
    rpc: Rpc,
    path_params: Mapping[str, str],
    query: Sequence[tuple[str, str]],
    body: bytes,
) -> Message:
    """Build `rpc`'s request message; raises `InvalidArgument` (often a `CodecError`)."""
    request = rpc.input_class()
    _bind_body(rpc, request, body)
    for variable in rpc.template.variables:
        _assign(request, variable.fields, path_params[variable.name], variable.name)
    _bind_query(rpc, request, query)
    return request


def query_fields(rpc: Rpc) -> dict[str, tuple[FieldDescriptor, ...]]:
    """The query parameters `rpc` accepts, by dotted name, with the field path each one sets.

    Every URL-readable field the path and the body do not bind; nested message fields (other than
    the body's) by their dotted name. With body `*` the body binds everything, so there are none.
    """
    if rpc.body == "*":
        return {}
    bound = {".".join(path) for path in rpc.template.field_paths}
    out: dict[str, tuple[FieldDescriptor, ...]] = {}
    _collect(rpc.method.input_type, (), {rpc.body} if rpc.body else set(), bound, out)
    return out


def _collect(
    message: Descriptor,
    prefix: tuple[FieldDescriptor, ...],
    skip: set[str],
    bound: set[str],
    out: dict[str, tuple[FieldDescriptor, ...]],
) -> None:
    for field in message.fields:
        if field.name in skip:
            continue
        path = (*prefix, field)
        name = ".".join(f.name for f in path)
        if name in bound:
            continue
        if codec.query_bindable(field):
            out[name] = path
        elif (
            not field.is_repeated
            and field.message_type is not None
            and not field.message_type.GetOptions().map_entry
            and len(path) < _MAX_QUERY_DEPTH
            and field.message_type.full_name.startswith("mcpd.")
        ):
            _collect(field.message_type, path, set(), bound, out)


def _bind_body(rpc: Rpc, request: Message, body: bytes) -> None:
    if not rpc.body:
        # Methods without a body rule take their input from the URL. `{}` is tolerated because
        # many clients send it with every POST; anything else would be silently dropped.
        if body.strip() and _parse_json(body) != {}:
            raise InvalidArgument(
                f"{rpc.http_method} {rpc.template.text} takes no request body;"
                " send its parameters in the URL",
                reason=errors.BODY_NOT_ALLOWED,
            )
        return
    if not body.strip():
        if rpc.body_required:
            raise InvalidArgument(
                f"{rpc.http_method} {rpc.template.text} needs a JSON body",
                reason=errors.BODY_REQUIRED,
            )
        return
    data = _parse_json(body)
    field = rpc.body_field
    if field is None:
        for path in rpc.template.field_paths:
            if _present(data, path):
                name = ".".join(path)
                raise InvalidArgument(f"{name}: set by the URL path, not the body", field=name)
        request.MergeFrom(codec.decode(data, type(request)))
        return
    # Error paths are relative to the JSON the client sent, which is the body field's value.
    sub: Message = getattr(request, field.name)
    sub.CopyFrom(codec.decode(data, type(sub)))


def _present(data: object, path: Sequence[str]) -> bool:
    for name in path:
        if not isinstance(data, dict) or name not in data:
            return False
        data = data[name]
    return True


def _parse_json(body: bytes) -> Any:
    try:
        data = json.loads(body, parse_constant=_refuse_constant, object_pairs_hook=_unique_keys)
        if _SURROGATE_ESCAPE.search(body):
            # JSON lets `\ud800` stand alone; such a string is not Unicode text and can be
            # neither stored nor sent on as UTF-8. Only an escape can produce one, so the scan
            # runs only when the body holds one.
            json.dumps(data, ensure_ascii=False).encode("utf-8")
        return data
    except UnicodeEncodeError:
        raise InvalidArgument(
            "the request body holds a lone UTF-16 surrogate escape (such as \\ud800), which is"
            " not Unicode text",
            reason=errors.MALFORMED_JSON,
        ) from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise InvalidArgument(
            f"the request body is not valid JSON: {exc}", reason=errors.MALFORMED_JSON
        ) from None
    except RecursionError:
        raise InvalidArgument(
            "the request body nests too deeply to parse", reason=errors.MALFORMED_JSON
        ) from None


_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def _unique_keys(pairs: Iterable[tuple[str, Any]]) -> dict[str, Any]:
    # Duplicate keys mean different things to different parsers; refusing them keeps the gateway
    # and anything in front of it from disagreeing about what was sent.
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise ValueError(f"duplicate key {quoted(key)}")
        out[key] = value
    return out


def _bind_query(rpc: Rpc, request: Message, query: Sequence[tuple[str, str]]) -> None:
    allowed = query_fields(rpc)
    grouped: dict[str, list[str]] = {}
    for key, value in query:
        if key not in allowed:
            known = ", ".join(allowed) or "none"
            raise InvalidArgument(
                f"{key}: unknown query parameter for {rpc.http_method} {rpc.template.text}"
                f" (accepted: {known})",
                reason=errors.UNKNOWN_PARAMETER,
                field=key,
            )
        grouped.setdefault(key, []).append(value)
    for name, values in grouped.items():
        path = allowed[name]
        if path[-1].is_repeated:
            # Both `include=logs&include=scores` and `include=logs,scores`.
            items = [item for value in values for item in value.split(",") if item]
            _extend(request, path, items, name)
        elif len(values) > 1:
            raise InvalidArgument(f"{name}: given more than once, takes one value", field=name)
        else:
            _assign(request, path, values[0], name)


def _parent(request: Message, path: Sequence[FieldDescriptor]) -> Message:
    target = request
    for field in path[:-1]:
        target = getattr(target, field.name)
    return target


def _assign(request: Message, path: Sequence[FieldDescriptor], raw: str, name: str) -> None:
    field = path[-1]
    value = codec.decode_query_param(field, raw, name)
    target = _parent(request, path)
    if isinstance(value, Timestamp):
        getattr(target, field.name).CopyFrom(value)
    else:
        setattr(target, field.name, value)


def _extend(request: Message, path: Sequence[FieldDescriptor], raw: list[str], name: str) -> None:
    field = path[-1]
    container: Any = getattr(_parent(request, path), field.name)
    for i, item in enumerate(raw):
        value = codec.decode_query_param(field, item, f"{name}[{i}]")
        if isinstance(value, Timestamp):
            container.add().CopyFrom(value)
        else:
            container.append(value)
