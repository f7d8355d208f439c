"""The gRPC side of the error hierarchy: `McpdError` to `google.rpc.Status` and back.

Servers answer with a `google.rpc.Status` carrying exactly one `google.rpc.ErrorInfo` (domain
`mcpd`), and a `google.rpc.RetryInfo` when the error says how long to wait, in the
`grpc-status-details-bin` trailer; clients and the gateway decode that trailer into an
`RpcFailure`, whatever produced it (an mcpd servicer, grpc itself, a proxy in between).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any, NoReturn, TypeVar

import grpc
import grpc.aio
from google.protobuf import any_pb2, duration_pb2
from google.protobuf.message import DecodeError, Message
from google.rpc import error_details_pb2, status_pb2
from grpc_status import rpc_status

from mcpd.runtime import errors
from mcpd.runtime.errors import DOMAIN, McpdError

# The trailer grpc uses for the binary google.rpc.Status (grpc_status uses the same constant).
STATUS_DETAILS_KEY = "grpc-status-details-bin"

# ErrorInfo.metadata key carrying McpdError.field; RpcFailure lifts it back out.
FIELD_KEY = "field"

_ERROR_CLASSES: Mapping[grpc.StatusCode, type[McpdError]] = {
    cls.code: cls
    for cls in (
        errors.InvalidArgument,
        errors.FailedPrecondition,
        errors.NotFound,
        errors.AlreadyExists,
        errors.Conflict,
        errors.Unauthenticated,
        errors.PermissionDenied,
        errors.ResourceExhausted,
        errors.Unavailable,
        errors.Unimplemented,
        errors.Internal,
    )
}


def to_rpc_status(err: McpdError) -> status_pb2.Status:
    """The `google.rpc.Status` for `err`: its code and message, one `ErrorInfo` detail, and a
    `RetryInfo` when `err.retry_after_s` is set (what OpenTelemetry exporters wait for).

    The ErrorInfo carries `reason`, domain `mcpd`, and `err.metadata` plus `field` when set.
    """
    metadata = dict(err.metadata)
    if err.field is not None:
        metadata[FIELD_KEY] = err.field
    details = [
        _packed(error_details_pb2.ErrorInfo(reason=err.reason, domain=DOMAIN, metadata=metadata))
    ]
    if err.retry_after_s is not None:
        delay = duration_pb2.Duration()
        delay.FromNanoseconds(round(err.retry_after_s * 1e9))
        details.append(_packed(error_details_pb2.RetryInfo(retry_delay=delay)))
    details.extend(_packed(detail) for detail in err.details)
    return status_pb2.Status(code=err.code.value[0], message=err.message, details=details)


def _packed(message: Message) -> any_pb2.Any:
    if isinstance(message, any_pb2.Any):
        return message
    detail = any_pb2.Any()
    detail.Pack(message)
    return detail


async def abort_with(context: grpc.aio.ServicerContext[Any, Any], err: McpdError) -> NoReturn:
    """End the RPC behind `context` with `err`'s status (code, message, ErrorInfo trailer).

    Raises grpc's `AbortError` like `context.abort` does; let it propagate.
    """
    status = rpc_status.to_status(to_rpc_status(err))
    await context.abort(status.code, status.details, status.trailing_metadata)
    raise AssertionError("context.abort returned")  # pragma: no cover - abort always raises


@dataclasses.dataclass(frozen=True, slots=True)
class RpcFailure:
    """A failed RPC as a caller sees it.

    `reason`, `field` and `metadata` come from the `ErrorInfo` detail when the server sent one;
    without it (grpc's own errors, a proxy, a peer that is not mcpd) `reason` is the code's name
    (`UNAVAILABLE`), `field` is None and `metadata` is empty. `retry_after_s` is the delay of a
    `RetryInfo` detail, when the server sent one; `details` every other detail, packed.
    """

    code: grpc.StatusCode
    message: str
    reason: str
    field: str | None = None
    metadata: dict[str, str] = dataclasses.field(default_factory=dict)
    retry_after_s: float | None = None
    details: tuple[any_pb2.Any, ...] = ()

    def to_error(self) -> McpdError:
        """The `McpdError` to re-raise when relaying this failure to our own caller.

        Codes without a class of their own (DEADLINE_EXCEEDED, CANCELLED, ...) give a plain
        `McpdError` whose `code` is the failure's code.
        """
        cls = _ERROR_CLASSES.get(self.code, McpdError)
        err = cls(
            self.message,
            reason=self.reason,
            field=self.field,
            metadata=self.metadata,
            retry_after_s=self.retry_after_s,
            details=self.details,
        )
        if cls is McpdError:
            # Instance attribute shadows the class default, so the code survives the round trip.
            err.code = self.code
        return err


def rpc_failure_from(exc: grpc.aio.AioRpcError) -> RpcFailure:
    """Decode a client-side `AioRpcError`, reading the `grpc-status-details-bin` trailer."""
    code = exc.code()
    message = exc.details() or ""
    details = _details(exc.trailing_metadata(), code)
    retry_after_s = retry_delay_s(details)
    info = _unpacked(details, error_details_pb2.ErrorInfo)
    if info is None:
        return RpcFailure(code=code, message=message, reason=code.name, retry_after_s=retry_after_s)
    metadata = dict(info.metadata)
    field_path = metadata.pop(FIELD_KEY, None)
    others = tuple(
        detail
        for detail in details
        if not detail.Is(error_details_pb2.ErrorInfo.DESCRIPTOR)
        and not detail.Is(error_details_pb2.RetryInfo.DESCRIPTOR)
    )
    return RpcFailure(
        code=code,
        message=message,
        reason=info.reason or code.name,
        field=field_path,
        metadata=metadata,
        retry_after_s=retry_after_s,
        details=others,
    )


def _details(trailers: grpc.aio.Metadata | None, code: grpc.StatusCode) -> Sequence[any_pb2.Any]:
    """The details of the Status in `trailers` (none when absent or not written for `code`)."""
    if trailers is None:
        return ()
    for key, value in trailers:
        if key != STATUS_DETAILS_KEY or not isinstance(value, bytes):
            continue
        try:
            status = status_pb2.Status.FromString(value)
        except DecodeError:
            return ()
        # A details trailer that disagrees with the status line was not written for this status
        # (a proxy rewrote the code); trusting it would misreport the failure.
        if status.code != code.value[0]:
            return ()
        return list(status.details)
    return ()


def retry_delay_s(details: Sequence[any_pb2.Any]) -> float | None:
    """The delay of the first `RetryInfo` among a Status's `details`, in seconds."""
    retry = _unpacked(details, error_details_pb2.RetryInfo)
    if retry is None:
        return None
    delay: float = retry.retry_delay.seconds + retry.retry_delay.nanos / 1e9
    return delay


_Detail = TypeVar("_Detail", error_details_pb2.ErrorInfo, error_details_pb2.RetryInfo)


def _unpacked(details: Sequence[any_pb2.Any], kind: type[_Detail]) -> _Detail | None:
    """The first detail of type `kind`, unpacked."""
    for detail in details:
        if detail.Is(kind.DESCRIPTOR):
            found = kind()
            detail.Unpack(found)
            return found
    return None
