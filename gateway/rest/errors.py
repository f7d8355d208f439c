"""The one REST error body, and the gRPC status -> HTTP status table (grpc-gateway's).

Every error the gateway answers (no route, wrong method, a request it cannot bind, a failed or
unreachable upstream) has the same shape:

    {"error": {"code": 404, "status": "NOT_FOUND", "reason": "TRACE_NOT_FOUND",
               "message": "...", "field": "trace_id"}}

`field` is present only when known. A 429 or 503 whose error says how long to wait (a
`google.rpc.RetryInfo` from upstream) carries `Retry-After`. Bodies the spec defines for particular
errors (StepConflict on a 409) are a later addition at `failure_response`, the single place that
renders upstream errors.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import grpc
from starlette.responses import JSONResponse

from mcpd import codec
from mcpd.model.v1 import runs_pb2
from mcpd.runtime.errors import McpdError
from mcpd.runtime.errors_grpc import RpcFailure

HTTP_STATUS: Mapping[grpc.StatusCode, int] = {
    grpc.StatusCode.OK: 200,
    grpc.StatusCode.CANCELLED: 499,
    grpc.StatusCode.UNKNOWN: 500,
    grpc.StatusCode.INVALID_ARGUMENT: 400,
    grpc.StatusCode.DEADLINE_EXCEEDED: 504,
    grpc.StatusCode.NOT_FOUND: 404,
    grpc.StatusCode.ALREADY_EXISTS: 409,
    grpc.StatusCode.PERMISSION_DENIED: 403,
    grpc.StatusCode.UNAUTHENTICATED: 401,
    grpc.StatusCode.RESOURCE_EXHAUSTED: 429,
    grpc.StatusCode.FAILED_PRECONDITION: 400,
    grpc.StatusCode.ABORTED: 409,
    grpc.StatusCode.OUT_OF_RANGE: 400,
    grpc.StatusCode.UNIMPLEMENTED: 501,
    grpc.StatusCode.INTERNAL: 500,
    grpc.StatusCode.UNAVAILABLE: 503,
    grpc.StatusCode.DATA_LOSS: 500,
}

# Reasons of the errors the gateway itself raises, before any upstream is called.
ROUTE_NOT_FOUND = "ROUTE_NOT_FOUND"
METHOD_NOT_ALLOWED = "METHOD_NOT_ALLOWED"
MALFORMED_JSON = "MALFORMED_JSON"
BODY_REQUIRED = "BODY_REQUIRED"
BODY_NOT_ALLOWED = "BODY_NOT_ALLOWED"
UNKNOWN_PARAMETER = "UNKNOWN_PARAMETER"
INVALID_HEADER = "INVALID_HEADER"
UPSTREAM_NOT_CONFIGURED = "UPSTREAM_NOT_CONFIGURED"
INTERNAL = "INTERNAL"


# The statuses that tell a client to come back later, so may say when (RFC 9110 Retry-After).
RETRYABLE_HTTP = frozenset({429, 503})


def http_status(code: grpc.StatusCode) -> int:
    """The HTTP status grpc-gateway answers for `code`."""
    return HTTP_STATUS.get(code, 500)


def retry_after(code: grpc.StatusCode, delay_s: float | None) -> dict[str, str]:
    """The `Retry-After` header (whole seconds, rounded up) of a refusal with `code` that says
    to wait `delay_s`; no header for other statuses or without a delay."""
    if delay_s is None or http_status(code) not in RETRYABLE_HTTP:
        return {}
    return {"Retry-After": str(max(0, math.ceil(delay_s)))}


def error_body(
    code: grpc.StatusCode,
    message: str,
    *,
    reason: str | None = None,
    field: str | None = None,
    http: int | None = None,
) -> dict[str, Any]:
    """The error body. `http` overrides the table: 405 carries UNIMPLEMENTED, as in grpc-gateway."""
    inner: dict[str, Any] = {
        "code": http if http is not None else http_status(code),
        "status": code.name,
        "reason": reason or code.name,
        "message": message,
    }
    if field:
        inner["field"] = field
    return {"error": inner}


def error_response(
    code: grpc.StatusCode,
    message: str,
    *,
    reason: str | None = None,
    field: str | None = None,
    http: int | None = None,
    headers: Mapping[str, str] | None = None,
) -> JSONResponse:
    """A JSON response carrying `error_body` with the matching HTTP status."""
    body = error_body(code, message, reason=reason, field=field, http=http)
    return JSONResponse(body, status_code=body["error"]["code"], headers=headers)


def mcpd_error_response(err: McpdError) -> JSONResponse:
    """The response for an error the gateway raised itself (binding, a bad header)."""
    return error_response(err.code, err.message, reason=err.reason, field=err.field)


def failure_response(failure: RpcFailure) -> JSONResponse:
    """The response for a failed upstream call, its ErrorInfo reason and field included, and
    `Retry-After` when it carried a RetryInfo. A worker call's conflict answers the StepConflict
    it carried as the whole body (spec, StepConflict), with the status of its code."""
    for detail in failure.details:
        if detail.Is(runs_pb2.StepConflict.DESCRIPTOR):
            conflict = runs_pb2.StepConflict()
            detail.Unpack(conflict)
            return JSONResponse(codec.encode(conflict), status_code=http_status(failure.code))
    return error_response(
        failure.code,
        failure.message,
        reason=failure.reason,
        field=failure.field,
        headers=retry_after(failure.code, failure.retry_after_s),
    )
