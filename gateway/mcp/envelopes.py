"""Error envelopes the MCP edge writes itself, and what a tool answers.

The tools write their own envelopes (success and error, `spec/mcp-search-interface.md`). The edge
writes one only when the tool never answered: an unknown tool name, credentials the gRPC
auth layer refused, an unreachable or failing query service. Those are still in-band tool
results (`isError: true`, the envelope in `structuredContent`), never JSON-RPC errors.

gRPC status -> error code:

| gRPC status | `error.code` | `error.details` |
|---|---|---|
| INVALID_ARGUMENT, FAILED_PRECONDITION, OUT_OF_RANGE | `invalid_request` | `field` when known |
| UNAUTHENTICATED | `invalid_request` | `reason: "unauthenticated"` |
| PERMISSION_DENIED | `invalid_request` | `reason: "permission_denied"`, `field` when known |
| NOT_FOUND | `not_found` | |
| RESOURCE_EXHAUSTED | `busy` | `retryable: true` |
| UNAVAILABLE | `backend_failure` | `retryable: true` |
| DEADLINE_EXCEEDED | `deadline_exceeded` | |
| CANCELLED | `cancelled` | |
| anything else | `internal_error` | |

Every edge-written error also carries `details.grpc_status` (the status name) and, when the
service sent one, `details.grpc_reason` (its ErrorInfo reason), so an operator can match it
with the service's logs and audit events.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Mapping
from typing import Any

import grpc

from mcpd.runtime.errors_grpc import RpcFailure

ERROR_SCHEMA_VERSION = "moraine.mcp.error.v1"

# The spec's order of the envelope's top-level fields; a gRPC Struct does not keep any order.
ENVELOPE_ORDER = ("schema_version", "tool", "request", "data", "error", "warnings", "performance")


@dataclasses.dataclass(frozen=True, slots=True)
class ToolAnswer:
    """What a tool answered: the spec's envelope, and whether it is an error envelope."""

    envelope: dict[str, Any]
    is_error: bool


def error_answer(
    tool: str,
    request: Mapping[str, Any],
    code: str,
    message: str,
    *,
    details: Mapping[str, Any] | None = None,
    elapsed_ms: int = 0,
) -> ToolAnswer:
    """An error envelope, shaped exactly like the ones the tools write."""
    envelope = {
        "schema_version": ERROR_SCHEMA_VERSION,
        "tool": tool,
        "request": dict(request),
        "error": {"code": code, "message": message, "details": dict(details or {})},
        "warnings": [],
        "performance": {"elapsed_ms": elapsed_ms},
    }
    return ToolAnswer(envelope, is_error=True)


_CODES: Mapping[grpc.StatusCode, str] = {
    grpc.StatusCode.INVALID_ARGUMENT: "invalid_request",
    grpc.StatusCode.FAILED_PRECONDITION: "invalid_request",
    grpc.StatusCode.OUT_OF_RANGE: "invalid_request",
    grpc.StatusCode.UNAUTHENTICATED: "invalid_request",
    grpc.StatusCode.PERMISSION_DENIED: "invalid_request",
    grpc.StatusCode.NOT_FOUND: "not_found",
    grpc.StatusCode.RESOURCE_EXHAUSTED: "busy",
    grpc.StatusCode.UNAVAILABLE: "backend_failure",
    grpc.StatusCode.DEADLINE_EXCEEDED: "deadline_exceeded",
    grpc.StatusCode.CANCELLED: "cancelled",
}

_AUTH_REASONS: Mapping[grpc.StatusCode, str] = {
    grpc.StatusCode.UNAUTHENTICATED: "unauthenticated",
    grpc.StatusCode.PERMISSION_DENIED: "permission_denied",
}

_RETRYABLE = frozenset({grpc.StatusCode.RESOURCE_EXHAUSTED, grpc.StatusCode.UNAVAILABLE})


def failure_answer(
    tool: str, request: Mapping[str, Any], failure: RpcFailure, *, elapsed_ms: int
) -> ToolAnswer:
    """The error envelope for a failed call to the query service (see the module's table)."""
    code = _CODES.get(failure.code, "internal_error")
    details: dict[str, Any] = {"grpc_status": failure.code.name}
    if failure.reason and failure.reason != failure.code.name:
        details["grpc_reason"] = failure.reason
    if failure.code in _AUTH_REASONS:
        details["reason"] = _AUTH_REASONS[failure.code]
    if failure.field:
        details["field"] = failure.field
    if failure.code in _RETRYABLE:
        details["retryable"] = True
    message = failure.message or f"the query service answered {failure.code.name}"
    return error_answer(tool, request, code, message, details=details, elapsed_ms=elapsed_ms)


def in_spec_order(envelope: Mapping[str, Any]) -> dict[str, Any]:
    """`envelope` with its top-level fields in the spec's order (unknown ones last)."""
    ordered = {key: envelope[key] for key in ENVELOPE_ORDER if key in envelope}
    ordered.update((key, value) for key, value in envelope.items() if key not in ordered)
    return ordered


def elapsed_since(began: float) -> int:
    """Whole milliseconds since `began` (a `time.monotonic()` reading)."""
    return max(0, round((time.monotonic() - began) * 1000))
