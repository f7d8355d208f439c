"""The least a request of the step protocol costs on this machine: a bare gRPC server.

``python -m bench orchestrator_floor`` (part of ``make bench``) or ``python -m
bench.orchestrator.floor [--calls N]``

A step costs at least two requests of a worker (its claim and its complete). This serves the
generated ``OrchestratorService`` from a ``grpc.aio`` server in a process of its own that
answers ``Claim`` with an empty ``ClaimResponse`` and does nothing else: no interceptors, no
credentials, no storage, no spans. Four threads of the SDK's ``Client`` (what the workers
use) call it. The server's and the caller's CPU per call (``/proc`` and
``time.process_time``) are the floor under ``bench orchestrator``'s empty claim against a real
daemon and its CPU per step: what the machine's cores allow any server in this stack that takes
two requests per step, before it does any work.

Output: a table and ``bench/results/orchestrator_floor.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import grpc

from bench.config import BenchConfig, Benchmark
from bench.harness import REPO_ROOT, print_table, write_result
from mcpd.model.v1 import runs_pb2
from mcpd.orchestrator.v1 import orchestrator_service_pb2_grpc as service
from mcpd.sdk import Client
from mcpd.testing.daemon import free_port, processes_cpu_seconds

NAME = "orchestrator_floor"
DESCRIPTION = "CPU per Claim of a bare gRPC server and of its SDK caller: a request's floor"
DEFAULT_CALLS = 4000
THREADS = 4
WARM_UP_CALLS = 200
READY = "ready"


class _Empty(service.OrchestratorServiceServicer):
    async def Claim(  # noqa: N802  # the generated method's name
        self, request: runs_pb2.ClaimRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> runs_pb2.ClaimResponse:
        return runs_pb2.ClaimResponse()


async def _serve(port: int) -> None:
    server = grpc.aio.server()
    service.add_OrchestratorServiceServicer_to_server(_Empty(), server)
    server.add_insecure_port(f"127.0.0.1:{port}")
    await server.start()
    print(READY, flush=True)
    await server.wait_for_termination()


@dataclass(frozen=True, slots=True)
class ClaimCost:
    """What `empty_claims` measured: its calls, their wall time, and the CPU per call of the
    server (None where `/proc` is unavailable) and of the calling process."""

    calls: int
    seconds: float
    server_ms: float | None
    caller_ms: float


def empty_claims(client: Client, server_cpu: Callable[[], float | None], calls: int) -> ClaimCost:
    """`calls` Claims that find nothing, from `THREADS` threads of `client`, charged to the
    server (`server_cpu`: its CPU seconds so far) and to this process."""
    request = runs_pb2.ClaimRequest(project=client.project, worker_id="bench", max=1, wait_ms=0)
    per_thread = calls // THREADS

    def claim_nothing(_: int) -> None:
        for _ in range(per_thread):
            assert not client.call("Claim", request).leases

    served, began, called = server_cpu(), time.perf_counter(), time.process_time()
    with ThreadPoolExecutor(THREADS) as pool:
        list(pool.map(claim_nothing, range(THREADS)))
    seconds, caller, after = time.perf_counter() - began, time.process_time() - called, server_cpu()
    total = per_thread * THREADS
    server_ms = None if served is None or after is None else (after - served) / total * 1000
    return ClaimCost(total, seconds, server_ms, caller / total * 1000)


def run(config: BenchConfig, *, calls: int = DEFAULT_CALLS) -> dict[str, Any]:
    """Serve, call `calls` times from `THREADS` threads, and charge the CPU per call."""
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "bench.orchestrator.floor", "--serve", str(port)],
        cwd=REPO_ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert server.stdout is not None
        if server.stdout.readline().strip() != READY:
            raise RuntimeError("the bare server did not start")
        with Client(f"127.0.0.1:{port}") as client:
            server_cpu = partial(processes_cpu_seconds, [server.pid])
            empty_claims(client, server_cpu, WARM_UP_CALLS)
            cost = empty_claims(client, server_cpu, calls)
    finally:
        server.terminate()
        server.wait(timeout=30)
    row = {
        "calls": cost.calls,
        "calls_per_s": cost.calls / cost.seconds,
        "server_cpu_ms_per_call": cost.server_ms,
        "caller_cpu_ms_per_call": cost.caller_ms,
    }
    print_table(f"{NAME}: a bare grpc.aio server's Claim, {THREADS} SDK threads", [row])
    document = {
        "description": DESCRIPTION,
        "config": {"calls": cost.calls, "threads": THREADS, "grpcio": grpc.__version__},
        "results": [row],
    }
    path = write_result(NAME, document, config.results_dir)
    print(f"wrote {path}", flush=True)
    return document


BENCHMARK = Benchmark(NAME, DESCRIPTION, run)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.orchestrator.floor", description=DESCRIPTION
    )
    parser.add_argument("--calls", type=int, default=DEFAULT_CALLS)
    parser.add_argument("--serve", type=int, metavar="PORT", help=argparse.SUPPRESS)
    parser.add_argument("--results-dir", type=Path, default=BenchConfig().results_dir)
    args = parser.parse_args(argv)
    if args.serve is not None:
        asyncio.run(_serve(args.serve))
        return 0
    run(BenchConfig(results_dir=args.results_dir), calls=args.calls)
    return 0


if __name__ == "__main__":
    sys.exit(main())
