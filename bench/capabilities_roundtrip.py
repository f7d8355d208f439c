"""REST -> gRPC round trip: ``GET /v1/api/capabilities`` through the gateway, side by side with
the direct gRPC call ``mcpd.query.v1.QueryService/GetCapabilities`` it is transcoded into.

Against a real ``mcpd serve`` (fresh data directory, free loopback ports), at each concurrency
(default 1 and 16), for each transport: a warm-up, then a closed-loop run of ``--seconds``
(or ``--count`` requests) recording every request's latency.

- REST: one shared ``httpx.AsyncClient`` per concurrency, HTTP/1.1 keep-alive, a connection
  pool as large as the concurrency; a response counts when it is a 200 (the body is read
  in full, not parsed).
- REST split (concurrency > 1): the same, but each worker has its own client of one
  connection. httpx's shared async pool spends client CPU that grows with concurrency
  (encode/httpx#3215), so this row separates the client's cost from the gateway's.
- gRPC: one ``grpc.aio`` channel per concurrency (one HTTP/2 connection, calls multiplexed)
  and the generated ``QueryServiceStub``; the response is deserialized by the stub.

The difference between a REST row and the gRPC row of one concurrency is what the gateway
costs: JSON transcoding, its own gRPC client hop, and HTTP/1.1 handling. The client runs in this one
Python process, so the ``client cpu%`` column shows when the client, not the daemon, is the
limit.

Run: ``python -m bench capabilities_roundtrip [--seconds N]``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Any

import grpc
import httpx
from google.protobuf import json_format

from bench.config import BenchConfig, Benchmark
from bench.harness import (
    DaemonProcess,
    LatencyResult,
    describe_error,
    print_table,
    run_load,
    write_result,
)
from mcpd.query.v1 import query_service_pb2, query_service_pb2_grpc

NAME = "capabilities_roundtrip"
DESCRIPTION = "GET /v1/api/capabilities via the REST gateway vs. direct gRPC GetCapabilities"
PATH = "/v1/api/capabilities"
REQUEST_TIMEOUT_S = 10.0
TRANSPORTS = ("rest", "rest-split", "grpc")
# grpc honours http_proxy/https_proxy from the environment; loopback must never go through one.
CHANNEL_OPTIONS = (("grpc.enable_http_proxy", 0),)


class UnexpectedStatusError(Exception):
    """The gateway answered with something other than 200."""

    def __init__(self, status: int) -> None:
        super().__init__(f"HTTP {status}")
        self.status = status


def classify_error(exc: BaseException) -> str:
    """Errors by kind: gRPC status codes, HTTP statuses, else type and first line."""
    if isinstance(exc, grpc.aio.AioRpcError):
        return f"grpc {exc.code().name}"
    if isinstance(exc, UnexpectedStatusError):
        return str(exc)
    return describe_error(exc)


async def _measure(
    label: str,
    call: Callable[[], Awaitable[object]],
    concurrency: int,
    config: BenchConfig,
    daemon: DaemonProcess,
) -> LatencyResult:
    if config.warmup_seconds > 0:
        await run_load(
            call,
            concurrency=concurrency,
            duration_s=config.warmup_seconds,
            classify_error=classify_error,
        )
    server_cpu_before = daemon.cpu_seconds()
    if config.count is not None:
        samples = await run_load(
            call, concurrency=concurrency, count=config.count, classify_error=classify_error
        )
    else:
        samples = await run_load(
            call, concurrency=concurrency, duration_s=config.seconds, classify_error=classify_error
        )
    server_cpu_after = daemon.cpu_seconds()
    server_cpu = (
        server_cpu_after - server_cpu_before
        if server_cpu_before is not None and server_cpu_after is not None
        else None
    )
    return LatencyResult.from_samples(
        label,
        concurrency,
        samples.latencies_s,
        errors=samples.errors,
        duration_s=samples.elapsed_s,
        error_kinds=dict(sorted(samples.error_kinds.items())),
        client_cpu_s=samples.client_cpu_s,
        server_cpu_s=server_cpu,
    )


def _http_client(base_url: str, concurrency: int) -> httpx.AsyncClient:
    return httpx.AsyncClient(
        base_url=base_url,
        http1=True,
        http2=False,
        limits=httpx.Limits(
            max_connections=concurrency,
            max_keepalive_connections=concurrency,
            keepalive_expiry=60.0,
        ),
        timeout=httpx.Timeout(REQUEST_TIMEOUT_S),
        trust_env=False,
    )


async def measure_rest(
    daemon: DaemonProcess, concurrency: int, config: BenchConfig
) -> LatencyResult:
    """``GET /v1/api/capabilities`` through the gateway at ``concurrency``, every worker sharing
    one client whose pool holds ``concurrency`` keep-alive connections."""
    async with _http_client(daemon.http_url, concurrency) as client:

        async def call() -> None:
            response = await client.get(PATH)
            if response.status_code != 200:
                raise UnexpectedStatusError(response.status_code)

        return await _measure("rest", call, concurrency, config, daemon)


async def measure_rest_split(
    daemon: DaemonProcess, concurrency: int, config: BenchConfig
) -> LatencyResult:
    """As :func:`measure_rest` but with ``concurrency`` clients of one connection each.

    Same number of keep-alive connections; no shared pool. httpx's shared async pool costs
    client CPU that grows with concurrency (encode/httpx#3215); this row shows how much of the
    ``rest`` row is the client rather than the gateway.
    """
    async with contextlib.AsyncExitStack() as stack:
        idle: deque[httpx.AsyncClient] = deque()
        for _ in range(concurrency):
            idle.append(await stack.enter_async_context(_http_client(daemon.http_url, 1)))

        async def call() -> None:
            # Closed loop: at most `concurrency` calls in flight, so a client is always idle.
            client = idle.popleft()
            try:
                response = await client.get(PATH)
            finally:
                idle.append(client)
            if response.status_code != 200:
                raise UnexpectedStatusError(response.status_code)

        return await _measure("rest-split", call, concurrency, config, daemon)


async def measure_grpc(
    daemon: DaemonProcess, concurrency: int, config: BenchConfig
) -> LatencyResult:
    """``QueryService/GetCapabilities`` on the daemon's gRPC port at ``concurrency``."""
    async with grpc.aio.insecure_channel(daemon.grpc_addr, options=CHANNEL_OPTIONS) as channel:
        stub = query_service_pb2_grpc.QueryServiceStub(channel)
        request = query_service_pb2.GetCapabilitiesRequest()

        async def call() -> None:
            await stub.GetCapabilities(request, timeout=REQUEST_TIMEOUT_S)

        return await _measure("grpc", call, concurrency, config, daemon)


async def preflight(daemon: DaemonProcess) -> tuple[dict[str, Any], dict[str, str]]:
    """One call per transport before measuring: the responses, and why a transport is skipped."""
    samples: dict[str, Any] = {}
    skipped: dict[str, str] = {}
    async with _http_client(daemon.http_url, 1) as client:
        try:
            response = await client.get(PATH)
        except httpx.HTTPError as exc:
            skipped["rest"] = f"GET {PATH} failed: {describe_error(exc)}"
        else:
            if response.status_code != 200:
                skipped["rest"] = f"GET {PATH} -> {response.status_code}: {response.text[:500]}"
            else:
                try:
                    samples["rest"] = response.json()
                except json.JSONDecodeError:
                    skipped["rest"] = f"GET {PATH} -> 200 but not JSON: {response.text[:500]}"
    async with grpc.aio.insecure_channel(daemon.grpc_addr, options=CHANNEL_OPTIONS) as channel:
        stub = query_service_pb2_grpc.QueryServiceStub(channel)
        try:
            reply = await stub.GetCapabilities(
                query_service_pb2.GetCapabilitiesRequest(), timeout=REQUEST_TIMEOUT_S
            )
        except grpc.aio.AioRpcError as exc:
            skipped["grpc"] = f"GetCapabilities failed: {exc.code().name}: {exc.details()}"
        else:
            samples["grpc"] = json_format.MessageToDict(reply, preserving_proto_field_name=True)
    return samples, skipped


def _diff(a: float | None, b: float | None) -> float | None:
    return a - b if a is not None and b is not None else None


def overhead_rows(results: list[LatencyResult]) -> list[dict[str, object]]:
    """Per concurrency and REST variant: REST minus gRPC latency (ms) and the REST/gRPC
    throughput ratio."""
    by_key = {(result.label, result.concurrency): result for result in results}
    rows: list[dict[str, object]] = []
    for concurrency in sorted({result.concurrency for result in results}):
        grpc_ = by_key.get(("grpc", concurrency))
        if grpc_ is None:
            continue
        for label in TRANSPORTS:
            rest = by_key.get((label, concurrency))
            if label == "grpc" or rest is None:
                continue
            rows.append(
                {
                    "concurrency": concurrency,
                    "rest": label,
                    "p50 +ms": _diff(rest.p50_ms, grpc_.p50_ms),
                    "p90 +ms": _diff(rest.p90_ms, grpc_.p90_ms),
                    "p99 +ms": _diff(rest.p99_ms, grpc_.p99_ms),
                    "mean +ms": _diff(rest.mean_ms, grpc_.mean_ms),
                    "rest/grpc rps": rest.rps / grpc_.rps if grpc_.rps > 0 else None,
                }
            )
    return rows


async def run_async(config: BenchConfig) -> dict[str, Any]:
    results: list[LatencyResult] = []
    daemon = DaemonProcess(start_timeout_s=config.start_timeout_s, processes=None)
    async with daemon:
        print(
            f"mcpd serve up in {daemon.startup_s or 0.0:.2f} s "
            f"(http {daemon.http_addr}, grpc {daemon.grpc_addr})",
            flush=True,
        )
        samples, skipped = await preflight(daemon)
        for transport, reason in skipped.items():
            print(f"skipping {transport}: {reason}", flush=True)
        if {"rest", "grpc"} <= set(skipped):
            raise RuntimeError(f"nothing to measure: {skipped}")
        measures = {"rest": measure_rest, "rest-split": measure_rest_split, "grpc": measure_grpc}
        for concurrency in config.concurrencies:
            for transport in TRANSPORTS:
                if transport.split("-")[0] in skipped:
                    continue
                if transport == "rest-split" and concurrency == 1:
                    continue  # one client of one connection: the same as "rest"
                result = await measures[transport](daemon, concurrency, config)
                print(
                    f"  {transport} c={concurrency}: {result.count} ok, {result.errors} errors, "
                    f"{result.rps:.0f} req/s",
                    flush=True,
                )
                results.append(result)

    if daemon.returncode not in (0, None):
        tail = daemon.stderr_tail[-2000:].strip()
        print(
            f"note: mcpd serve exited with {daemon.returncode} after {daemon.shutdown_signal}"
            + (f"; stderr tail:\n{tail}" if tail else " (stderr empty)"),
            flush=True,
        )

    mode = f"{config.count} requests" if config.count is not None else f"{config.seconds:g} s"
    print()
    print_table(
        f"{NAME}: GET {PATH} (rest) vs QueryService/GetCapabilities (grpc), {mode} per run",
        [result.table_row() for result in results],
    )
    overhead = overhead_rows(results)
    if overhead:
        print_table("gateway overhead (rest minus grpc)", overhead)

    payload: dict[str, Any] = {
        "description": DESCRIPTION,
        "config": {
            "seconds": None if config.count is not None else config.seconds,
            "count": config.count,
            "warmup_seconds": config.warmup_seconds,
            "concurrencies": list(config.concurrencies),
            "request_timeout_s": REQUEST_TIMEOUT_S,
            "rest": f"GET {PATH}, httpx {httpx.__version__}, HTTP/1.1 keep-alive, "
            "one client per concurrency with a pool of `concurrency` connections",
            "rest-split": "as rest, but `concurrency` clients of one connection each "
            "(no shared httpx pool; concurrency > 1 only)",
            "grpc": f"mcpd.query.v1.QueryService/GetCapabilities, grpcio {grpc.__version__}, "
            "one grpc.aio channel per concurrency",
        },
        "daemon": {
            "startup_s": daemon.startup_s,
            "shutdown_s": daemon.shutdown_s,
            "shutdown_signal": daemon.shutdown_signal,
            "returncode": daemon.returncode,
            "health": daemon.health,
        },
        "results": [result.to_dict() for result in results],
        "gateway_overhead": overhead,
        "skipped": skipped,
        "sample_responses": samples,
    }
    path = write_result(NAME, payload, config.results_dir)
    print(f"wrote {path}", flush=True)
    return payload


def run(config: BenchConfig) -> dict[str, Any]:
    """Run the benchmark: start a daemon, measure, print tables, write the JSON."""
    return asyncio.run(run_async(config))


BENCHMARK = Benchmark(name=NAME, description=DESCRIPTION, run=run)
