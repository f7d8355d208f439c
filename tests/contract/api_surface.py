"""The gRPC API surface, read from the generated descriptors."""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Iterator

from google.api import annotations_pb2
from google.api.http_pb2 import HttpRule
from google.protobuf.descriptor import FileDescriptor, MethodDescriptor, ServiceDescriptor

import mcpd
from mcpd.options.v1 import rendering_pb2

SERVICE_MODULE_SUFFIX = "_service_pb2"


def service_files() -> list[FileDescriptor]:
    """Every generated `*_service.proto` file of mcpd."""
    files = []
    for module in pkgutil.walk_packages(mcpd.__path__, "mcpd."):
        if module.name.endswith(SERVICE_MODULE_SUFFIX):
            files.append(importlib.import_module(module.name).DESCRIPTOR)
    return files


def services() -> list[ServiceDescriptor]:
    """Every mcpd gRPC service."""
    return [s for f in service_files() for s in f.services_by_name.values()]


def methods() -> Iterator[MethodDescriptor]:
    """Every RPC of every mcpd service."""
    for service in services():
        yield from service.methods


def http_rule(method: MethodDescriptor) -> HttpRule | None:
    """The method's `google.api.http` binding, None when it has none."""
    rule = method.GetOptions().Extensions[annotations_pb2.http]
    return rule if rule.WhichOneof("pattern") is not None else None


def rendered_twin(method: MethodDescriptor) -> MethodDescriptor | None:
    """The RPC of the same service and request answering `method`'s response already rendered as
    JSON (a google.api.HttpBody whose `json_body` names `method`'s output), if there is one."""
    for other in method.containing_service.methods:
        rendered = other.GetOptions().Extensions[rendering_pb2.json_body]
        if (
            other.input_type is method.input_type
            and other.output_type.full_name == "google.api.HttpBody"
            and rendered == method.output_type.full_name
        ):
            return other
    return None
