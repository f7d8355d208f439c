"""Orchestrator throughput and claim latency, mcpd and DBOS side by side.

``python -m bench orchestrator`` or ``python -m bench.orchestrator [--runs N] [--workers N]
[--only sqlite postgres dbos]``. For each backend a real ``mcpd serve`` (its default processes)
on free ports, and ``--workers`` worker processes (the SDK's ``Worker``, 4 steps at a time
each, handlers that answer at once) serving a workflow of three sequential tasks. The client
starts ``--runs`` runs from 8 threads as fast as the daemon takes them, then waits for the last
to end.

- steps/s: 3 x runs / (first start to last end, read from the runs' event logs);
- claim latency: per attempt, from the moment it became runnable (the run's start for the
  first step, the previous step's `step_finished` for the others) to its `step_leased`, both
  stamped by the daemon in the transactions that wrote them; p50, p99. Under the flood above it
  is mostly time queued behind busy workers; `idle_claim_*` is the same over 50 runs started
  one at a time, with every worker free;
- CPU per step: the CPU the daemon's processes, the workers and the PostgreSQL server (its
  processes on this machine) spent from the first start to the end of the last run, over the
  steps run (`/proc`), which says where a step's cost lies and what the machine's cores allow;
  for DBOS, its process over its runs and the PostgreSQL server over the whole of its row;
- an empty claim: the daemon's and the caller's CPU per `Claim` that finds nothing
  (`wait_ms` 0, from 4 threads), the least a request of the step protocol costs the daemon
  (`bench orchestrator_floor` has the same call against a bare gRPC server).

DBOS (``pip install dbos`` into ``.bench/dbos-venv`` on first use) runs the same three-step
workflow in its own process against the same kind of database (a SQLite file; the same
PostgreSQL server), with 8 threads starting workflows: its steps/s is 3 x runs / its wall time.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from bench.config import BenchConfig, Benchmark
from bench.harness import REPO_ROOT, postgres_database, print_table, write_result
from bench.orchestrator.floor import empty_claims
from mcpd.model.v1 import enums_pb2
from mcpd.orchestrator.v1 import orchestrator_service_pb2 as rpc
from mcpd.sdk import Client
from mcpd.testing.daemon import DaemonProcess, processes_cpu_seconds

NAME = "orchestrator"
DESCRIPTION = "steps/s of a 3-step workflow with worker processes, claim latency; mcpd and DBOS"
DEFAULT_RUNS = 600
DEFAULT_WORKERS = 8
STARTERS = 8
IDLE_RUNS = 50
EMPTY_CLAIMS = 2000
WORKER_CONCURRENCY = 4
DBOS_VENV = REPO_ROOT / ".bench" / "dbos-venv"
DBOS_SPEC = "dbos"
THREE = {"steps": [{"id": name, "kind": "task"} for name in ("one", "two", "three")]}
_NS = 1e9


def _dbos_python(install: bool = True) -> tuple[Path, str] | None:
    python = DBOS_VENV / "bin" / "python"
    if not python.exists() and install:
        print(f"installing {DBOS_SPEC} into {DBOS_VENV} (first use) ...", flush=True)
        subprocess.run([sys.executable, "-m", "venv", str(DBOS_VENV)], check=True)
        subprocess.run([str(python), "-m", "pip", "install", "--quiet", DBOS_SPEC], check=True)
    if not python.exists():
        return None
    version = subprocess.run(
        [str(python), "-c", "import importlib.metadata as m; print(m.version('dbos'))"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    return python, version


def _mcpd_row(backend: str, env: dict[str, str], runs: int, workers: int) -> dict[str, Any]:
    with DaemonProcess(extra_env=env, processes=None, start_timeout_s=120) as daemon:
        target = daemon.grpc_addr
        with Client(target) as client:
            client.define("three", THREE)
        procs = [
            subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "bench.orchestrator.worker",
                    target,
                    f"w{n}",
                    str(WORKER_CONCURRENCY),
                ],
                cwd=REPO_ROOT,
            )
            for n in range(workers)
        ]
        try:
            with Client(target) as client:
                client.wait(client.start("three").run_id, timeout_s=60)  # warm-up
                before = _cpu_by_part(daemon, procs, backend)
                with ThreadPoolExecutor(STARTERS) as pool:
                    run_ids = list(pool.map(lambda _: client.start("three").run_id, range(runs)))
                _until_none_running(client)
                spent = _cpu_by_part(daemon, procs, backend)
                row = _measure(backend, client, run_ids, workers)
                row["cpu_ms_per_step"] = _per_step_ms(before, spent, 3 * runs)
                # Claim latency with idle workers: one run at a time, nothing queued.
                alone = [
                    client.wait(client.start("three").run_id, poll_s=0.01).run_id
                    for _ in range(IDLE_RUNS)
                ]
                idle = _measure(backend, client, alone, workers)
                row["idle_claim_p50_ms"] = idle["claim_p50_ms"]
                row["idle_claim_p99_ms"] = idle["claim_p99_ms"]
        finally:
            for proc in procs:
                proc.terminate()
            for proc in procs:
                proc.wait(timeout=30)
        # With the workers gone, nothing claims but these.
        with Client(target) as client:
            row["empty_claim_cpu_ms"] = _empty_claim_cpu_ms(daemon, client)
        return row


def _cpu_by_part(
    daemon: DaemonProcess, workers: Sequence[subprocess.Popen[bytes]], backend: str
) -> dict[str, float | None]:
    """CPU seconds so far of the daemon, the workers and (on PostgreSQL) the database server."""
    return {
        "daemon": daemon.cpu_seconds(),
        "workers": processes_cpu_seconds([proc.pid for proc in workers]),
        "postgres": _postgres_cpu_seconds(backend),
    }


def _postgres_cpu_seconds(backend: str) -> float | None:
    """The CPU seconds so far of the PostgreSQL server's processes on this machine."""
    return processes_cpu_seconds(named="postgres") if backend == "postgres" else None


def _cpu_columns(row: dict[str, Any]) -> dict[str, Any]:
    step, claim = row["cpu_ms_per_step"], row.get("empty_claim_cpu_ms", {})
    return {
        "system": row["system"],
        "backend": row["backend"],
        "mcpd daemon": step.get("daemon"),
        "mcpd workers": step.get("workers"),
        "dbos process": step.get("dbos"),
        "postgres": step["postgres"],
        "empty claim: daemon": claim.get("daemon"),
        "empty claim: caller": claim.get("caller"),
    }


def _per_step_ms(
    before: dict[str, float | None], after: dict[str, float | None], steps: int
) -> dict[str, float | None]:
    """Milliseconds of CPU per step of each part between two readings (None: not measured)."""
    spent: dict[str, float | None] = {}
    for part, then in before.items():
        now = after[part]
        spent[part] = None if then is None or now is None else (now - then) / steps * 1000
    return spent


def _empty_claim_cpu_ms(daemon: DaemonProcess, client: Client) -> dict[str, float | None]:
    """The daemon's and this process's CPU per Claim that finds nothing to lease."""
    cost = empty_claims(client, daemon.cpu_seconds, EMPTY_CLAIMS)
    return {"daemon": cost.server_ms, "caller": cost.caller_ms}


def _until_none_running(client: Client, timeout_s: float = 600.0) -> None:
    """Wait until no run of the workflow is running (one listing call every half second: a
    read per run would load the daemon the figures are about)."""
    request = rpc.ListRunsRequest(
        project=client.project,
        definition_id="three",
        status=[enums_pb2.RUN_STATUS_RUNNING],
        limit=1,
    )
    deadline = time.monotonic() + timeout_s
    while client.call("ListRuns", request).runs:
        if time.monotonic() > deadline:
            raise TimeoutError("runs were still running after the timeout")
        time.sleep(0.5)


def _measure(backend: str, client: Client, run_ids: Sequence[str], workers: int) -> dict[str, Any]:
    first_start, last_end = float("inf"), 0.0
    latencies: list[float] = []
    statuses: dict[str, int] = {}
    for run_id in run_ids:
        runnable: dict[str, float] = {}
        previous_finish: float | None = None
        for event in client.events(run_id).events:
            at = event.at.ToNanoseconds() / _NS
            kind = enums_pb2.RunEventKind.Name(event.kind)
            payload = event.payload.struct_value.fields
            if kind == "RUN_EVENT_KIND_RUN_STARTED":
                first_start = min(first_start, at)
                previous_finish = at
            elif kind == "RUN_EVENT_KIND_RUN_CURSOR" and previous_finish is not None:
                if "step_key" in payload:
                    runnable[payload["step_key"].string_value] = previous_finish
            elif kind == "RUN_EVENT_KIND_STEP_LEASED":
                key = payload["step_key"].string_value
                if key in runnable:
                    latencies.append((at - runnable.pop(key)) * 1000)
            elif kind == "RUN_EVENT_KIND_STEP_FINISHED":
                previous_finish = at
            elif kind == "RUN_EVENT_KIND_RUN_ENDED":
                last_end = max(last_end, at)
                status = payload["status"].string_value
                statuses[status] = statuses.get(status, 0) + 1
    seconds = last_end - first_start
    cuts = statistics.quantiles(latencies, n=100)
    return {
        "system": "mcpd",
        "backend": backend,
        "runs": len(run_ids),
        "workers": workers,
        "seconds": seconds,
        "steps_per_s": 3 * len(run_ids) / seconds,
        "runs_per_s": len(run_ids) / seconds,
        "claim_p50_ms": statistics.median(latencies),
        "claim_p99_ms": cuts[98],
        "statuses": statuses,
    }


def _dbos_row(python: Path, backend: str, url: str, runs: int) -> dict[str, Any]:
    script = Path(__file__).with_name("dbos_runner.py")
    postgres_before = _postgres_cpu_seconds(backend)
    done = subprocess.run(
        [str(python), str(script), url, str(runs), str(STARTERS)],
        capture_output=True,
        text=True,
        check=True,
        cwd=tempfile.gettempdir(),
    )
    figures = json.loads(done.stdout.strip().splitlines()[-1])
    steps = 3 * runs
    # DBOS runs workflows and steps in its one process; its CPU is of the runs alone, the
    # server's includes DBOS's start (its schema), which is small beside the runs.
    cpu_ms_per_step = {
        "dbos": figures["cpu_seconds"] / steps * 1000,
        **_per_step_ms(
            {"postgres": postgres_before}, {"postgres": _postgres_cpu_seconds(backend)}, steps
        ),
    }
    return {
        "system": "dbos",
        "backend": backend,
        "runs": runs,
        "workers": f"{STARTERS} threads in one process",
        "seconds": figures["seconds"],
        "steps_per_s": 3 * runs / figures["seconds"],
        "runs_per_s": runs / figures["seconds"],
        "claim_p50_ms": None,
        "claim_p99_ms": None,
        "idle_claim_p50_ms": None,
        "idle_claim_p99_ms": None,
        "statuses": {"succeeded": runs},
        "cpu_ms_per_step": cpu_ms_per_step,
    }


def run(
    config: BenchConfig,
    *,
    runs: int = DEFAULT_RUNS,
    workers: int = DEFAULT_WORKERS,
    only: Sequence[str] = (),
) -> dict[str, Any]:
    """Every row (see the module docstring); `only` narrows to sqlite, postgres, dbos."""
    postgres = os.environ.get("MCPD_TEST_POSTGRES_URL")
    wanted = set(only) or {"sqlite", "postgres", "dbos"}
    dbos = _dbos_python() if "dbos" in wanted else None
    rows: list[dict[str, Any]] = []
    not_measured: dict[str, str] = {}
    work = Path(tempfile.mkdtemp(prefix="mcpd-bench-orchestrator-"))
    if "sqlite" in wanted:
        rows.append(_mcpd_row("sqlite", {"MCPD_STORAGE_BACKEND": "sqlite"}, runs, workers))
        if dbos is not None:
            rows.append(_dbos_row(dbos[0], "sqlite", f"sqlite:///{work / 'dbos.sqlite'}", runs))
    if "postgres" in wanted:
        if postgres is None:
            not_measured["postgres"] = "MCPD_TEST_POSTGRES_URL is not set"
        else:
            with postgres_database(postgres, "mcpd_bench_orch") as url:
                env = {"MCPD_STORAGE_BACKEND": "postgres", "MCPD_STORAGE_POSTGRES_URL": url}
                rows.append(_mcpd_row("postgres", env, runs, workers))
            if dbos is not None:
                with postgres_database(postgres, "dbos_bench_orch") as dbos_url:
                    rows.append(_dbos_row(dbos[0], "postgres", dbos_url, runs))
    print_table(
        f"orchestrator: {runs} runs of a 3-step workflow",
        rows,
        [
            "system",
            "backend",
            "workers",
            "steps_per_s",
            "runs_per_s",
            "claim_p50_ms",
            "claim_p99_ms",
        ],
    )
    print_table(
        "CPU per step under the flood, and per empty claim (ms)",
        [_cpu_columns(row) for row in rows],
    )
    document = {
        "description": DESCRIPTION,
        "config": {
            "runs": runs,
            "workers": workers,
            "worker_concurrency": WORKER_CONCURRENCY,
            "starters": STARTERS,
            "processes": "default (one per core, at most 4)",
        },
        "dbos": {"version": dbos[1] if dbos else None, "python": str(dbos[0]) if dbos else None},
        "targets": {"sqlite_steps_per_s": 750, "postgres_steps_per_s": 1500, "claim_p50_ms": 10},
        "results": rows,
        "not_measured": not_measured,
    }
    path = write_result(NAME, document, config.results_dir)
    print(f"wrote {path}", flush=True)
    return document


BENCHMARK = Benchmark(NAME, DESCRIPTION, run)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.orchestrator", description=DESCRIPTION)
    parser.add_argument("--runs", type=int, default=DEFAULT_RUNS)
    parser.add_argument("--workers", type=int, default=DEFAULT_WORKERS)
    parser.add_argument("--only", nargs="+", default=[], choices=["sqlite", "postgres", "dbos"])
    parser.add_argument("--results-dir", type=Path, default=BenchConfig().results_dir)
    args = parser.parse_args(argv)
    run(
        BenchConfig(results_dir=args.results_dir),
        runs=args.runs,
        workers=args.workers,
        only=args.only,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
