"""What every mcpd process shares: settings, errors and their gRPC mapping, the gRPC server and
channels, telemetry, logging, ids and clocks.

The names below are the public surface (pinned by `tests/libs/runtime/test_exports.py`); modules
with a leading underscore are internal.

Names resolve lazily (PEP 562): `import mcpd.runtime.config` in `mcpd version` should not pay for
grpc's server machinery and the OpenTelemetry SDK. Type checkers see the plain imports.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from mcpd.runtime.channels import open_channel
    from mcpd.runtime.clock import Clock, ManualClock, SystemClock, from_timestamp, to_timestamp
    from mcpd.runtime.config import (
        GatewaySettings,
        GrpcSettings,
        LogFormat,
        LogLevel,
        SecuritySettings,
        SessionsSettings,
        Settings,
        StorageBackend,
        StorageSettings,
        load_settings,
        render_settings,
    )
    from mcpd.runtime.errors import (
        AlreadyExists,
        Conflict,
        FailedPrecondition,
        Internal,
        InvalidArgument,
        McpdError,
        NotFound,
        PermissionDenied,
        ResourceExhausted,
        Unauthenticated,
        Unavailable,
        Unimplemented,
    )
    from mcpd.runtime.errors_grpc import RpcFailure, abort_with, rpc_failure_from, to_rpc_status
    from mcpd.runtime.ids import new_id, new_span_id, new_trace_id
    from mcpd.runtime.interceptors import ErrorInterceptor
    from mcpd.runtime.logging import configure_logging, redact_url
    from mcpd.runtime.server import GrpcServer, ServiceRegistration
    from mcpd.runtime.telemetry import configure_telemetry

__all__ = [
    "AlreadyExists",
    "Clock",
    "Conflict",
    "ErrorInterceptor",
    "FailedPrecondition",
    "GatewaySettings",
    "GrpcServer",
    "GrpcSettings",
    "Internal",
    "InvalidArgument",
    "LogFormat",
    "LogLevel",
    "ManualClock",
    "McpdError",
    "NotFound",
    "PermissionDenied",
    "ResourceExhausted",
    "RpcFailure",
    "SecuritySettings",
    "ServiceRegistration",
    "SessionsSettings",
    "Settings",
    "StorageBackend",
    "StorageSettings",
    "SystemClock",
    "Unauthenticated",
    "Unavailable",
    "Unimplemented",
    "abort_with",
    "configure_logging",
    "configure_telemetry",
    "from_timestamp",
    "load_settings",
    "new_id",
    "new_span_id",
    "new_trace_id",
    "open_channel",
    "redact_url",
    "render_settings",
    "rpc_failure_from",
    "to_rpc_status",
    "to_timestamp",
]

# Which module defines each public name.
_MODULES = {
    "AlreadyExists": "mcpd.runtime.errors",
    "Clock": "mcpd.runtime.clock",
    "Conflict": "mcpd.runtime.errors",
    "ErrorInterceptor": "mcpd.runtime.interceptors",
    "FailedPrecondition": "mcpd.runtime.errors",
    "GatewaySettings": "mcpd.runtime.config",
    "SecuritySettings": "mcpd.runtime.config",
    "GrpcServer": "mcpd.runtime.server",
    "GrpcSettings": "mcpd.runtime.config",
    "Internal": "mcpd.runtime.errors",
    "InvalidArgument": "mcpd.runtime.errors",
    "LogFormat": "mcpd.runtime.config",
    "LogLevel": "mcpd.runtime.config",
    "ManualClock": "mcpd.runtime.clock",
    "McpdError": "mcpd.runtime.errors",
    "NotFound": "mcpd.runtime.errors",
    "PermissionDenied": "mcpd.runtime.errors",
    "ResourceExhausted": "mcpd.runtime.errors",
    "RpcFailure": "mcpd.runtime.errors_grpc",
    "ServiceRegistration": "mcpd.runtime.server",
    "SessionsSettings": "mcpd.runtime.config",
    "Settings": "mcpd.runtime.config",
    "StorageBackend": "mcpd.runtime.config",
    "StorageSettings": "mcpd.runtime.config",
    "SystemClock": "mcpd.runtime.clock",
    "Unauthenticated": "mcpd.runtime.errors",
    "Unavailable": "mcpd.runtime.errors",
    "Unimplemented": "mcpd.runtime.errors",
    "abort_with": "mcpd.runtime.errors_grpc",
    "configure_logging": "mcpd.runtime.logging",
    "configure_telemetry": "mcpd.runtime.telemetry",
    "from_timestamp": "mcpd.runtime.clock",
    "load_settings": "mcpd.runtime.config",
    "new_id": "mcpd.runtime.ids",
    "new_span_id": "mcpd.runtime.ids",
    "new_trace_id": "mcpd.runtime.ids",
    "open_channel": "mcpd.runtime.channels",
    "redact_url": "mcpd.runtime.logging",
    "render_settings": "mcpd.runtime.config",
    "rpc_failure_from": "mcpd.runtime.errors_grpc",
    "to_rpc_status": "mcpd.runtime.errors_grpc",
    "to_timestamp": "mcpd.runtime.clock",
}

if not TYPE_CHECKING:  # hidden from type checkers, which would otherwise accept any name

    def __getattr__(name: str) -> object:
        module = _MODULES.get(name)
        if module is None:
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        globals()[name] = value  # cache: __getattr__ runs once per name
        return value

    def __dir__() -> list[str]:
        return sorted({*globals(), *__all__})
