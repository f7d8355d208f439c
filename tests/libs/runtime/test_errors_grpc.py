"""McpdError <-> google.rpc.Status, without a network."""

from __future__ import annotations

import grpc
import grpc.aio
import pytest
from google.protobuf import any_pb2
from google.rpc import error_details_pb2, status_pb2

from mcpd.runtime.errors import (
    Conflict,
    InvalidArgument,
    McpdError,
    NotFound,
    ResourceExhausted,
    Unavailable,
)
from mcpd.runtime.errors_grpc import (
    STATUS_DETAILS_KEY,
    RpcFailure,
    rpc_failure_from,
    to_rpc_status,
)

RETRY_INFO = error_details_pb2.RetryInfo.DESCRIPTOR


def _infos(status: status_pb2.Status) -> list[error_details_pb2.ErrorInfo]:
    infos = []
    for detail in status.details:
        if detail.Is(RETRY_INFO):
            continue
        info = error_details_pb2.ErrorInfo()
        assert detail.Unpack(info)
        infos.append(info)
    return infos


def test_status_carries_code_message_and_one_error_info() -> None:
    err = InvalidArgument("limit too big", field="limit", metadata={"max": "1000"})
    status = to_rpc_status(err)
    assert status.code == grpc.StatusCode.INVALID_ARGUMENT.value[0]
    assert status.message == "limit too big"
    [info] = _infos(status)
    assert (info.reason, info.domain) == ("INVALID_ARGUMENT", "mcpd")
    assert dict(info.metadata) == {"max": "1000", "field": "limit"}


def test_status_without_field_has_no_field_key() -> None:
    [info] = _infos(to_rpc_status(Conflict("lease lost", reason="STALE_LEASE")))
    assert info.reason == "STALE_LEASE"
    assert "field" not in info.metadata


def _rpc_error(
    code: grpc.StatusCode, message: str, *trailers: tuple[str, bytes]
) -> grpc.aio.AioRpcError:
    return grpc.aio.AioRpcError(
        code, grpc.aio.Metadata(), grpc.aio.Metadata(*trailers), details=message
    )


def test_round_trip_through_the_trailer() -> None:
    status = to_rpc_status(NotFound("no trace t1", field="trace_id", metadata={"id": "t1"}))
    exc = _rpc_error(
        grpc.StatusCode.NOT_FOUND, "no trace t1", (STATUS_DETAILS_KEY, status.SerializeToString())
    )
    assert rpc_failure_from(exc) == RpcFailure(
        code=grpc.StatusCode.NOT_FOUND,
        message="no trace t1",
        reason="NOT_FOUND",
        field="trace_id",
        metadata={"id": "t1"},
    )


def test_a_retry_delay_travels_as_retry_info() -> None:
    status = to_rpc_status(ResourceExhausted("queue full", retry_after_s=1.25))
    [retry] = [detail for detail in status.details if detail.Is(RETRY_INFO)]
    info = error_details_pb2.RetryInfo()
    assert retry.Unpack(info)
    assert (info.retry_delay.seconds, info.retry_delay.nanos) == (1, 250_000_000)
    exc = _rpc_error(
        grpc.StatusCode.RESOURCE_EXHAUSTED,
        "queue full",
        (STATUS_DETAILS_KEY, status.SerializeToString()),
    )
    failure = rpc_failure_from(exc)
    assert (failure.reason, failure.retry_after_s) == ("RESOURCE_EXHAUSTED", 1.25)
    relayed = failure.to_error()
    assert isinstance(relayed, ResourceExhausted)
    assert relayed.retry_after_s == 1.25


def test_no_retry_delay_no_retry_info() -> None:
    status = to_rpc_status(ResourceExhausted("quota spent"))
    assert not [detail for detail in status.details if detail.Is(RETRY_INFO)]


def test_without_details_the_reason_is_the_code_name() -> None:
    failure = rpc_failure_from(_rpc_error(grpc.StatusCode.DEADLINE_EXCEEDED, "Deadline Exceeded"))
    assert failure == RpcFailure(
        grpc.StatusCode.DEADLINE_EXCEEDED, "Deadline Exceeded", "DEADLINE_EXCEEDED"
    )


@pytest.mark.parametrize(
    "trailer",
    [
        b"\xff\xfe not a status",
        # A status for another code: written by someone else, not trusted.
        to_rpc_status(NotFound("x")).SerializeToString(),
        # A status whose detail is not an ErrorInfo.
        status_pb2.Status(
            code=grpc.StatusCode.UNAVAILABLE.value[0],
            details=[any_pb2.Any(type_url="type.googleapis.com/google.rpc.RetryInfo")],
        ).SerializeToString(),
    ],
)
def test_unusable_details_fall_back_to_the_code(trailer: bytes) -> None:
    failure = rpc_failure_from(
        _rpc_error(grpc.StatusCode.UNAVAILABLE, "down", (STATUS_DETAILS_KEY, trailer))
    )
    assert (failure.reason, failure.field, failure.metadata) == ("UNAVAILABLE", None, {})


def test_failures_relay_as_the_matching_error_class() -> None:
    relayed = RpcFailure(
        grpc.StatusCode.UNAVAILABLE, "store down", "STORE_DOWN", None, {"a": "b"}
    ).to_error()
    assert isinstance(relayed, Unavailable)
    assert (relayed.message, relayed.reason, relayed.metadata) == (
        "store down",
        "STORE_DOWN",
        {"a": "b"},
    )

    relayed = RpcFailure(grpc.StatusCode.ABORTED, "raced", "CONFLICT", "step").to_error()
    assert isinstance(relayed, Conflict)
    assert relayed.field == "step"

    relayed = RpcFailure(grpc.StatusCode.DEADLINE_EXCEEDED, "late", "DEADLINE_EXCEEDED").to_error()
    assert type(relayed) is McpdError
    assert relayed.code == grpc.StatusCode.DEADLINE_EXCEEDED
    assert McpdError.code == grpc.StatusCode.UNKNOWN  # the class default is untouched
