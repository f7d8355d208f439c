"""The gRPC API surface, read from the generated descriptors."""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Iterator

from google.protobuf.descriptor import FileDescriptor, MethodDescriptor, ServiceDescriptor

import mcpd

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
