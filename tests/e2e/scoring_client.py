"""A scoring pass over REST or gRPC, answered in the spec's JSON: what the scoring e2e tests
drive, one interface for both transports."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, cast

import grpc
import httpx

from mcpd import codec
from mcpd.evaluation.v1 import evaluation_service_pb2_grpc
from mcpd.model.v1 import evaluation_pb2
from mcpd.runtime.errors_grpc import rpc_failure_from
from mcpd.testing.daemon import DaemonProcess

__all__ = ["RefusedError", "Score", "scoring_client"]

Score = Callable[..., dict[str, Any]]
"""A pass: its body, and optionally a deadline in seconds (30 unless given)."""


class RefusedError(Exception):
    """A refused pass: the HTTP status (400 for a gRPC INVALID_ARGUMENT, else 500), the field
    and the message."""

    def __init__(self, status: int, field: str | None, message: str) -> None:
        super().__init__(status, field, message)
        self.status = status
        self.field = field
        self.message = message


@contextmanager
def scoring_client(transport: str, daemon: DaemonProcess) -> Iterator[Score]:
    """Scoring passes over `transport` (`rest` or `grpc`) to `daemon`."""
    if transport == "rest":
        with httpx.Client(base_url=f"{daemon.http_url}/v1/api", timeout=60) as http:

            def over_rest(body: dict[str, Any], deadline_s: float = 30.0) -> dict[str, Any]:
                headers = {"x-mcpd-timeout": str(deadline_s)}
                answer = http.post("/scorers/run", json=body, headers=headers)
                if answer.status_code != 200:
                    error = answer.json()["error"]
                    raise RefusedError(answer.status_code, error.get("field"), error["message"])
                result: dict[str, Any] = answer.json()
                return result

            yield over_rest
        return
    with grpc.insecure_channel(daemon.grpc_addr) as channel:
        stub = evaluation_service_pb2_grpc.EvaluationServiceStub(channel)

        def over_grpc(body: dict[str, Any], deadline_s: float = 30.0) -> dict[str, Any]:
            request = codec.decode(body, evaluation_pb2.ScoreRunRequest)
            try:
                return codec.encode(stub.RunScorers(request, timeout=deadline_s))
            except grpc.RpcError as error:
                failure = rpc_failure_from(cast(grpc.aio.AioRpcError, error))
                code = cast(grpc.aio.AioRpcError, error).code()
                status = 400 if code is grpc.StatusCode.INVALID_ARGUMENT else 500
                raise RefusedError(status, failure.field, failure.message) from None

        yield over_grpc
