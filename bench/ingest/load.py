"""The load client: pre-encoded requests sent closed-loop over one route, every reply checked.

Routes:

- ``native``: ``POST /v1/api/ingest`` with an ``IngestBatch`` JSON body (mcpd only); a reply
  counts when it is a 200 whose ``accepted`` is every span of the request.
- ``otlp-http``: ``POST /v1/traces`` with an ``ExportTraceServiceRequest`` protobuf body; a
  200 counts when its ``partial_success`` rejects nothing.
- ``otlp-grpc``: ``TraceService/Export`` over ``grpc.aio`` with the same bytes (a generic
  unary call: no serializers, bytes in and out); an OK counts under the same condition.

HTTP is httpx over HTTP/1.1 keep-alive, one pool of ``concurrency`` connections; gRPC is one
channel (one HTTP/2 connection, calls multiplexed). A refusal that asks the client to slow down
(HTTP 429 or 503, gRPC ``UNAVAILABLE`` or ``RESOURCE_EXHAUSTED`` other than "message too
large") is counted apart and the worker waits :data:`REFUSAL_BACKOFF_S` before its next
request, as an OTLP exporter backs off; any other failure is an error (the worker waits too, so
a broken route does not spin).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import time
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Literal

import grpc
import grpc.aio
import httpx
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2

from bench.harness import describe_error
from bench.ingest.spans import Template

Route = Literal["native", "otlp-http", "otlp-grpc"]
ROUTES: tuple[Route, ...] = ("native", "otlp-http", "otlp-grpc")
EXPORT_METHOD = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"
REQUEST_TIMEOUT_S = 60.0
REFUSAL_BACKOFF_S = 0.1
ERROR_BACKOFF_S = 0.1
# grpc honours http_proxy from the environment; loopback must never go through one. Messages
# of 512 spans of 10 KB are larger than gRPC's 4 MiB default.
CHANNEL_OPTIONS = (
    ("grpc.enable_http_proxy", 0),
    ("grpc.max_send_message_length", 64 * 1024 * 1024),
    ("grpc.max_receive_message_length", 64 * 1024 * 1024),
)


class RefusedError(Exception):
    """The server asked the client to back off (queue full): not an acknowledgement.
    ``retry_after`` is the HTTP refusal's ``Retry-After`` header, when it had one."""

    def __init__(self, message: str, *, retry_after: str | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class RejectedError(Exception):
    """The server answered but did not accept every span of the request."""


@dataclasses.dataclass(slots=True)
class Stream:
    """Requests in turn from ``templates``; request ``i`` is template ``i % n`` stamped with
    ``i // n``, so no two requests of a stream share an id."""

    templates: Sequence[Template]
    sent: int = 0

    def next(self) -> tuple[int, int, bytes]:
        """``(template index, seq, body)`` of the next request."""
        index = self.sent % len(self.templates)
        seq = self.sent // len(self.templates)
        self.sent += 1
        return index, seq, self.templates[index].stamp(seq)


@dataclasses.dataclass(slots=True)
class LoadOutcome:
    """What one closed-loop run sent and had acknowledged."""

    concurrency: int
    requests: int = 0
    acked_requests: int = 0
    acked_spans: int = 0
    refused_requests: int = 0
    errors: Counter[str] = dataclasses.field(default_factory=Counter)
    latencies_s: list[float] = dataclasses.field(default_factory=list)
    started_at: float = 0.0
    """``time.perf_counter()`` when the first request was sent."""
    ended_at: float = 0.0
    """``time.perf_counter()`` when the last reply came back."""
    client_cpu_s: float = 0.0
    first_refusal_at: float | None = None
    spans_acked_before_first_refusal: int | None = None
    acked: list[tuple[int, int]] = dataclasses.field(default_factory=list)
    """``(template index, seq)`` of every acknowledged request."""

    @property
    def elapsed_s(self) -> float:
        return max(self.ended_at - self.started_at, 0.0)


Send = Callable[[bytes], Awaitable[None]]


def _check_export_response(body: bytes) -> None:
    if not body:
        return
    response = trace_service_pb2.ExportTraceServiceResponse.FromString(body)
    if response.HasField("partial_success") and response.partial_success.rejected_spans:
        raise RejectedError(
            f"{response.partial_success.rejected_spans} spans rejected: "
            f"{response.partial_success.error_message[:200]}"
        )


def _check_http(response: httpx.Response) -> None:
    if response.status_code in (429, 503):
        raise RefusedError(
            f"HTTP {response.status_code}", retry_after=response.headers.get("retry-after")
        )
    if response.status_code != 200:
        raise RejectedError(f"HTTP {response.status_code}: {response.text[:200]}")


def native_sender(client: httpx.AsyncClient, spans_per_request: int) -> Send:
    async def send(body: bytes) -> None:
        response = await client.post(
            "/v1/api/ingest", content=body, headers={"content-type": "application/json"}
        )
        _check_http(response)
        result = json.loads(response.content)
        if result.get("accepted") != spans_per_request or result.get("rejected"):
            raise RejectedError(
                f"accepted {result.get('accepted')}, rejected {result.get('rejected')}: "
                f"{str(result.get('errors'))[:200]}"
            )

    return send


def otlp_http_sender(client: httpx.AsyncClient) -> Send:
    async def send(body: bytes) -> None:
        response = await client.post(
            "/v1/traces", content=body, headers={"content-type": "application/x-protobuf"}
        )
        _check_http(response)
        _check_export_response(response.content)

    return send


def otlp_grpc_sender(channel: grpc.aio.Channel) -> Send:
    # No serializers: the pre-encoded bytes go out as they are, the reply comes back as bytes.
    call: grpc.aio.UnaryUnaryMultiCallable[bytes, bytes] = channel.unary_unary(EXPORT_METHOD)

    async def send(body: bytes) -> None:
        try:
            reply = await call(body, timeout=REQUEST_TIMEOUT_S)
        except grpc.aio.AioRpcError as exc:
            code = exc.code()
            details = exc.details() or ""
            too_large = "larger than max" in details or "message larger" in details
            if code == grpc.StatusCode.UNAVAILABLE or (
                code == grpc.StatusCode.RESOURCE_EXHAUSTED and not too_large
            ):
                raise RefusedError(f"grpc {code.name}") from exc
            raise
        _check_export_response(reply)

    return send


def http_client(base_url: str, concurrency: int) -> httpx.AsyncClient:
    return httpx.AsyncClient(
        base_url=base_url,
        http1=True,
        http2=False,
        limits=httpx.Limits(
            max_connections=concurrency,
            max_keepalive_connections=concurrency,
            keepalive_expiry=120.0,
        ),
        timeout=httpx.Timeout(REQUEST_TIMEOUT_S),
        trust_env=False,
    )


@contextlib.asynccontextmanager
async def open_sender(
    route: Route, *, http_url: str, grpc_addr: str, concurrency: int, spans_per_request: int
) -> AsyncIterator[Send]:
    """A ``send(body)`` for ``route``, with its connections open for the block."""
    if route == "otlp-grpc":
        async with grpc.aio.insecure_channel(grpc_addr, options=CHANNEL_OPTIONS) as channel:
            yield otlp_grpc_sender(channel)
        return
    async with http_client(http_url, concurrency) as client:
        if route == "native":
            yield native_sender(client, spans_per_request)
        else:
            yield otlp_http_sender(client)


def classify_error(exc: BaseException) -> str:
    if isinstance(exc, grpc.aio.AioRpcError):
        return f"grpc {exc.code().name}: {(exc.details() or '')[:100]}"
    if isinstance(exc, RejectedError):
        return f"rejected: {str(exc)[:120]}"
    return describe_error(exc)


async def drive(
    send: Send,
    stream: Stream,
    *,
    concurrency: int,
    duration_s: float | None = None,
    count: int | None = None,
) -> LoadOutcome:
    """Closed loop: ``concurrency`` workers send the stream's requests back to back.

    Runs for ``duration_s`` (no request starts after the deadline; those in flight finish and
    count) or for ``count`` requests in total. Give exactly one of the two.
    """
    if (duration_s is None) == (count is None):
        raise ValueError("give exactly one of duration_s and count")
    outcome = LoadOutcome(concurrency=concurrency)
    clock = time.perf_counter
    remaining = count
    outcome.started_at = clock()
    deadline = outcome.started_at + duration_s if duration_s is not None else float("inf")

    async def worker() -> None:
        nonlocal remaining
        while True:
            if remaining is not None:
                if remaining <= 0:
                    return
                remaining -= 1
            elif clock() >= deadline:
                return
            index, seq, body = stream.next()
            spans = stream.templates[index].spans
            outcome.requests += 1
            began = clock()
            failure: BaseException | None = None
            try:
                await send(body)
            except Exception as exc:
                failure = exc
            done = clock()
            outcome.ended_at = max(outcome.ended_at, done)
            if isinstance(failure, RefusedError):
                outcome.refused_requests += 1
                if outcome.first_refusal_at is None:
                    outcome.first_refusal_at = done
                    outcome.spans_acked_before_first_refusal = outcome.acked_spans
                await asyncio.sleep(REFUSAL_BACKOFF_S)
            elif failure is not None:
                outcome.errors[classify_error(failure)] += 1
                await asyncio.sleep(ERROR_BACKOFF_S)
            else:
                outcome.latencies_s.append(done - began)
                outcome.acked_requests += 1
                outcome.acked_spans += spans
                outcome.acked.append((index, seq))

    cpu_start = time.process_time()
    async with asyncio.TaskGroup() as group:
        for _ in range(concurrency):
            group.create_task(worker())
    outcome.client_cpu_s = time.process_time() - cpu_start
    if outcome.ended_at == 0.0:
        outcome.ended_at = clock()
    return outcome
