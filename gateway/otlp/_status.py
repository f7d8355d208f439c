"""Failures as OTLP/HTTP answers them: an HTTP status, and a `google.rpc.Status` body.

The HTTP status follows the gateway's one table (grpc-gateway's); the body is the
`google.rpc.Status` the OTLP specification asks for, in the request's encoding. An upstream
failure keeps the status the service sent (its ErrorInfo, RetryInfo, BadRequest details); the
gateway's own refusals carry one ErrorInfo (domain `mcpd`) and, for a 400, a BadRequest.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping

import grpc
import grpc.aio
from google.protobuf import any_pb2, json_format
from google.protobuf.message import DecodeError
from google.rpc import error_details_pb2, status_pb2

from gateway.rest import http_status, retry_after
from mcpd.runtime.errors import McpdError
from mcpd.runtime.errors_grpc import STATUS_DETAILS_KEY, retry_delay_s, to_rpc_status

log = logging.getLogger("mcpd.gateway.otlp")

RETRY_AFTER_METADATA = "retry_after_s"
"""ErrorInfo metadata key by which an mcpd service says how long to wait (the login throttle's)."""


class RefusalError(Exception):
    """The receiver answers `http` with `error`'s status, without (further) calling upstream."""

    def __init__(
        self, http: int, error: McpdError, *, headers: Mapping[str, str] | None = None
    ) -> None:
        super().__init__(error.message)
        self.http = http
        self.error = error
        self.headers = dict(headers or {})

    @classmethod
    def of(cls, error: McpdError) -> RefusalError:
        """The refusal of `error` at the HTTP status the gateway's table gives its code."""
        return cls(http_status(error.code), error)

    def status(self) -> status_pb2.Status:
        """The body: the error's Status, plus a BadRequest naming the field for a 400."""
        status = to_rpc_status(self.error)
        if self.http == 400:
            violation = error_details_pb2.BadRequest.FieldViolation(
                field=self.error.field or "", description=self.error.message
            )
            status.details.append(_pack(error_details_pb2.BadRequest(field_violations=[violation])))
        return status


def upstream_failure(exc: grpc.aio.AioRpcError) -> tuple[int, status_pb2.Status, dict[str, str]]:
    """The HTTP status, Status body and headers relaying a failed upstream call.

    429 and 503 get a `Retry-After` when the service said how long to wait: a RetryInfo detail
    (how OTLP/gRPC servers say it) or ErrorInfo metadata `retry_after_s` (how mcpd's do).
    """
    code = exc.code()
    status = _sent_status(exc)
    if status is None:  # grpc's own failure, or a peer that sends no details
        status = status_pb2.Status(code=code.value[0], message=exc.details() or "")
    return http_status(code), status, retry_after(code, _retry_after(status))


def encode_status(status: status_pb2.Status, *, json_body: bool) -> bytes:
    """`status` as binary protobuf, or as proto3 JSON (`details` with their `@type`)."""
    if not json_body:
        binary: bytes = status.SerializeToString()
        return binary
    try:
        document = json_format.MessageToDict(status)
    except (TypeError, KeyError):
        # A detail of a type this process does not know cannot be rendered as JSON: drop it.
        log.warning("dropping undecodable details of an upstream status")
        document = json_format.MessageToDict(
            status_pb2.Status(code=status.code, message=status.message)
        )
    return json.dumps(document, separators=(",", ":")).encode()


def _sent_status(exc: grpc.aio.AioRpcError) -> status_pb2.Status | None:
    for key, value in exc.trailing_metadata() or ():
        if key != STATUS_DETAILS_KEY or not isinstance(value, bytes):
            continue
        try:
            status = status_pb2.Status.FromString(value)
        except DecodeError:
            return None
        # A details trailer that disagrees with the status line was not written for this status.
        return status if status.code == exc.code().value[0] else None
    return None


def _retry_after(status: status_pb2.Status) -> float | None:
    delay = retry_delay_s(status.details)
    if delay is not None:
        return delay
    for detail in status.details:
        if detail.Is(error_details_pb2.ErrorInfo.DESCRIPTOR):
            error_info = error_details_pb2.ErrorInfo()
            detail.Unpack(error_info)
            raw = error_info.metadata.get(RETRY_AFTER_METADATA)
            if raw is not None and raw.isdigit():
                return int(raw)
    return None


def _pack(message: error_details_pb2.BadRequest) -> any_pb2.Any:
    packed = any_pb2.Any()
    packed.Pack(message)
    return packed
