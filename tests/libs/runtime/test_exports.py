"""The public surface of mcpd.runtime, pinned: changing it is a decision, not an accident."""

from __future__ import annotations

import mcpd.runtime

EXPECTED = [
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


def test_all_is_pinned() -> None:
    assert mcpd.runtime.__all__ == EXPECTED


def test_every_exported_name_resolves_to_its_defining_module() -> None:
    for name in mcpd.runtime.__all__:
        value = getattr(mcpd.runtime, name)
        assert getattr(value, "__name__", name) == name
        assert value.__module__.startswith("mcpd.runtime.")


def test_unknown_names_are_attribute_errors() -> None:
    assert not hasattr(mcpd.runtime, "not_a_name")
