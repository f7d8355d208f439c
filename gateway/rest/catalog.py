"""Every REST-exposed RPC, read from the descriptors of the generated service modules.

Nothing here is written per RPC: a method with a `google.api.http` annotation becomes one `Rpc`
per binding, and the router, the binder and the OpenAPI document are all built from these.
"""

from __future__ import annotations

import dataclasses
import importlib
import pkgutil
from collections.abc import Iterable

# googleapis-common-protos ships .pyi stubs but no py.typed marker.
from google.api import annotations_pb2, http_pb2, httpbody_pb2
from google.protobuf.descriptor import (
    Descriptor,
    FieldDescriptor,
    FileDescriptor,
    MethodDescriptor,
    ServiceDescriptor,
)
from google.protobuf.message import Message
from google.protobuf.message_factory import GetMessageClass

import mcpd
from gateway.rest.templates import PathTemplate
from mcpd import codec
from mcpd.options.v1 import access_pb2, rendering_pb2

SERVICE_MODULE_SUFFIX = "_service_pb2"
_PATTERNS = ("get", "put", "post", "delete", "patch")
HTTP_BODY: str = httpbody_pb2.HttpBody.DESCRIPTOR.full_name


@dataclasses.dataclass(frozen=True, slots=True)
class Rpc:
    """One HTTP binding of one unary RPC."""

    method: MethodDescriptor
    http_method: str
    template: PathTemplate
    body: str
    """The `body` rule: "" (no body), "*" (every field not bound by the path) or a field name."""
    access: access_pb2.Access

    @property
    def service(self) -> ServiceDescriptor:
        """The proto service the RPC belongs to."""
        return self.method.containing_service

    @property
    def grpc_path(self) -> str:
        """The gRPC method path: `/mcpd.query.v1.QueryService/GetTrace`."""
        return f"/{self.service.full_name}/{self.method.name}"

    @property
    def operation_id(self) -> str:
        """A document-wide unique id: `QueryService_GetTrace`."""
        return f"{self.service.name}_{self.method.name}"

    @property
    def input_class(self) -> type[Message]:
        """The request message class."""
        return GetMessageClass(self.method.input_type)

    @property
    def output_class(self) -> type[Message]:
        """The response message class."""
        return GetMessageClass(self.method.output_type)

    @property
    def returns_http_body(self) -> bool:
        """Whether the RPC answers `google.api.HttpBody`: an HTTP body served as it is."""
        return self.method.output_type.full_name == HTTP_BODY

    @property
    def response_message(self) -> Descriptor:
        """The message the 200 body is documented as: the `json_body` message for an HttpBody
        answer (the body is that message's JSON), else the output type."""
        if self.returns_http_body:
            return _json_body_message(self.method)
        return self.method.output_type

    @property
    def body_field(self) -> FieldDescriptor | None:
        """The request field the body decodes into when the rule names one."""
        if self.body in ("", "*"):
            return None
        return self.method.input_type.fields_by_name[self.body]

    @property
    def body_message(self) -> Descriptor | None:
        """The message type the JSON body decodes into; None when the RPC takes no body."""
        if not self.body:
            return None
        field = self.body_field
        return self.method.input_type if field is None else field.message_type

    @property
    def body_required(self) -> bool:
        """Whether an empty body is refused: the body message has fields `encode` always writes.

        With `*`, fields bound from the path do not count; they never come from the body.
        """
        message = self.body_message
        if message is None:
            return False
        bound = {path[0] for path in self.template.field_paths} if self.body == "*" else set()
        return any(name not in bound for name in codec.required_fields(message))


def service_modules() -> list[str]:
    """The generated `*_service_pb2` modules under the `mcpd` package, sorted."""
    names = [
        module.name
        for module in pkgutil.walk_packages(mcpd.__path__, "mcpd.")
        if module.name.endswith(SERVICE_MODULE_SUFFIX)
    ]
    return sorted(names)


def service_files() -> list[FileDescriptor]:
    """The file descriptors of every generated service module."""
    return [importlib.import_module(name).DESCRIPTOR for name in service_modules()]


def load_rpcs(files: Iterable[FileDescriptor] | None = None) -> list[Rpc]:
    """One `Rpc` per HTTP binding of every annotated method in `files` (default: all of mcpd).

    Raises `ValueError` for an annotation the gateway cannot serve (a streaming method, a path
    template feature it does not implement, a body or path field that does not fit, an HttpBody
    answer without a `json_body` naming a known message), so a proto change that would break
    REST fails at start and in tests, not on the first request.
    """
    rpcs: list[Rpc] = []
    for file in service_files() if files is None else files:
        for service in file.services_by_name.values():
            for method in service.methods:
                options = method.GetOptions()
                if not options.HasExtension(annotations_pb2.http):
                    continue
                rule = options.Extensions[annotations_pb2.http]
                access = options.Extensions[access_pb2.access]
                for binding in (rule, *rule.additional_bindings):
                    rpcs.append(_rpc(method, binding, access))
    return rpcs


def _rpc(method: MethodDescriptor, rule: http_pb2.HttpRule, access: access_pb2.Access) -> Rpc:
    where = f"{method.full_name}"
    if method.client_streaming or method.server_streaming:
        raise ValueError(f"{where}: streaming methods cannot be transcoded to REST")
    if rule.response_body:
        raise ValueError(f"{where}: response_body is not supported")
    pattern = rule.WhichOneof("pattern")
    if pattern == "custom":
        http_method, path = rule.custom.kind.upper(), rule.custom.path
    elif pattern in _PATTERNS:
        http_method, path = pattern.upper(), getattr(rule, pattern)
    else:
        raise ValueError(f"{where}: the http rule names no method and path")
    template = PathTemplate.parse(path, method.input_type)
    if rule.body not in ("", "*"):
        field = method.input_type.fields_by_name.get(rule.body)
        if field is None or field.is_repeated or field.message_type is None:
            raise ValueError(f"{where}: body {rule.body!r} must name a singular message field")
        if any(path[0] == rule.body for path in template.field_paths):
            raise ValueError(f"{where}: body field {rule.body!r} is also bound by the path")
    if method.output_type.full_name == HTTP_BODY:
        _json_body_message(method)
    elif method.GetOptions().HasExtension(rendering_pb2.json_body):
        raise ValueError(f"{where}: json_body is only for methods returning {HTTP_BODY}")
    return Rpc(method, http_method, template, rule.body, access)


def _json_body_message(method: MethodDescriptor) -> Descriptor:
    # Bytes alone cannot be documented: the option names the message whose JSON they hold.
    name = method.GetOptions().Extensions[rendering_pb2.json_body]
    if not name:
        raise ValueError(f"{method.full_name}: an {HTTP_BODY} answer needs the json_body option")
    try:
        return method.containing_service.file.pool.FindMessageTypeByName(name)
    except KeyError:
        raise ValueError(f"{method.full_name}: json_body names no known message {name!r}") from None
