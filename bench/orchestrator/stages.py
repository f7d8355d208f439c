"""CPU and statements per step of each transition of a run, in one process, without servers.

``python -m bench orchestrator_stages`` (part of ``make bench``) or ``python -m
bench.orchestrator.stages [--runs N] [--only sqlite postgres]``

The end-to-end bench (:mod:`bench.orchestrator.run`) folds every cost of a step (gRPC, the
interceptors, the workers, the contention of processes for the database) into one rate that
moves from run to run on a shared machine. This one drives the orchestrator's own domain
objects (``Runs``, ``Leases``) over a run store opened as ``mcpd serve`` opens it, for the same
three-step workflow, one call at a time, and charges to each transition:

- **start**: ``Runs.start`` (the run, its first transition, its first attempt);
- **claim**: ``Leases.claim`` of up to 4 attempts (the read of what is offerable, then one
  transaction leasing them);
- **complete**: ``Leases.complete`` of each lease (the lease's run looked up, then the
  transition that records the output and walks the cursor on, or ends the run).

For each: the process CPU (``time.process_time``) and the wall time per step (a start counts a
third of a run's three steps), and the SQL statements and transactions per step. On PostgreSQL
the database server's own CPU is not in the process CPU; the wall time includes it and the round
trips. PostgreSQL rows need ``MCPD_TEST_POSTGRES_URL``.

Output: a table and ``bench/results/orchestrator_stages.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import sys
import tempfile
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any

from sqlalchemy import event
from sqlalchemy.engine import Engine

from bench.config import BenchConfig, Benchmark
from bench.harness import RESULTS_DIR, postgres_database, print_table, write_result
from bench.orchestrator.run import THREE
from mcpd.model.v1 import runs_pb2
from mcpd.orchestrator.v1 import orchestrator_service_pb2 as rpc
from mcpd.pricing import load_price_book
from mcpd.runtime.clock import SystemClock
from mcpd.storage.factory import open_stores
from mcpd.storage.run_records import NewDefinition
from mcpd.storage.sql.stores import SqlRunStore
from mcpd.workflows import check_definition
from services.orchestrator import Leases, Mover, Prices, Runs, Wakeups

NAME = "orchestrator_stages"
DESCRIPTION = "CPU, wall time and SQL statements per step of each run transition, in process"
DEFAULT_RUNS = 300
CLAIM_MAX = 4
PROJECT = "bench"
LEASE_TTL_MS = 30_000
STEPS_PER_RUN = 3


class _CountingCursor:
    """A DBAPI cursor that tells its counter of each statement it runs."""

    def __init__(self, cursor: Any, counter: _Counter) -> None:
        self._cursor = cursor
        self._counter = counter

    def execute(self, *args: Any, **kwargs: Any) -> Any:
        self._counter.statement()
        return self._cursor.execute(*args, **kwargs)

    def executemany(self, *args: Any, **kwargs: Any) -> Any:
        self._counter.statement()
        return self._cursor.executemany(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._cursor, name)


class _Stage:
    """What one transition kind cost, summed over the run."""

    def __init__(self) -> None:
        self.cpu_s = 0.0
        self.wall_s = 0.0
        self.statements = 0
        self.transactions = 0


class _Counter:
    """Statements and transactions an engine runs, charged to the stage being measured.

    Statements are counted at the driver (every `execute` or `executemany` of a DBAPI cursor):
    the run store runs its hot statements on the cursor itself, past SQLAlchemy's events."""

    def __init__(self, engine: Engine) -> None:
        self.stage: _Stage | None = None
        event.listen(engine, "checkout", self._count_cursors)
        event.listen(engine, "commit", self._commit)

    def _count_cursors(self, dbapi_connection: Any, *_: Any) -> None:
        if getattr(dbapi_connection, "_bench_counted", False):
            return
        cursor = dbapi_connection.cursor
        dbapi_connection.cursor = lambda *args, **kwargs: _CountingCursor(
            cursor(*args, **kwargs), self
        )
        dbapi_connection._bench_counted = True

    def statement(self) -> None:
        if self.stage is not None:
            self.stage.statements += 1

    def _commit(self, *args: Any) -> None:
        if self.stage is not None:
            self.stage.transactions += 1

    @contextmanager
    def charge(self, stage: _Stage) -> Iterator[None]:
        self.stage = stage
        cpu, wall = time.process_time(), time.perf_counter()
        try:
            yield
        finally:
            stage.cpu_s += time.process_time() - cpu
            stage.wall_s += time.perf_counter() - wall
            self.stage = None


def measure(backend: str, runs: int, *, data_dir: Path, postgres_url: str | None) -> list[Any]:
    """Start `runs` runs, then claim and complete every step; a row per stage."""
    clock = SystemClock()
    stores = open_stores(
        backend,
        data_dir=data_dir,
        postgres_url=postgres_url,
        clickhouse_url=None,
        clock=clock,
        stores={"run", "control"},
    )
    try:
        store, control = stores.run, stores.control
        assert isinstance(store, SqlRunStore), "the stages are measured on the SQL run store"
        checked = check_definition("three", THREE)
        store.put_definitions(PROJECT, [NewDefinition("three", "workflow", checked, None)], now=0)
        mover = Mover(store, clock, Wakeups(), lease_ttl_ms=LEASE_TTL_MS)
        prices = Prices(control, load_price_book(), monotonic=clock.monotonic)
        starts, leases = Runs(store, mover), Leases(mover, prices)
        counter = _Counter(store.engine)
        stages = {name: _Stage() for name in ("start", "claim", "complete")}
        with counter.charge(stages["start"]):
            for _ in range(runs):
                starts.start(runs_pb2.StartRunRequest(project=PROJECT, definition_id="three"))
        steps = asyncio.run(_drain(leases, counter, stages))
        assert steps == STEPS_PER_RUN * runs, f"{steps} steps for {runs} runs"
        return _rows(backend, stages, steps)
    finally:
        stores.close()


async def _drain(leases: Leases, counter: _Counter, stages: Mapping[str, _Stage]) -> int:
    claim = runs_pb2.ClaimRequest(project=PROJECT, worker_id="bench", max=CLAIM_MAX, wait_ms=0)
    steps = 0
    while True:
        with counter.charge(stages["claim"]):
            taken = (await leases.claim(claim, None)).leases
        if not taken:
            return steps
        with counter.charge(stages["complete"]):
            for lease in taken:
                done = rpc.CompleteStepRequest(project=PROJECT, lease_id=lease.lease_id)
                leases.complete(done)
        steps += len(taken)


def _rows(backend: str, stages: Mapping[str, _Stage], steps: int) -> list[Any]:
    rows = []
    for name, stage in [*stages.items(), ("total", _total(stages.values()))]:
        rows.append(
            {
                "backend": backend,
                "stage": name,
                "cpu_us_per_step": stage.cpu_s / steps * 1e6,
                "wall_us_per_step": stage.wall_s / steps * 1e6,
                "statements_per_step": stage.statements / steps,
                "transactions_per_step": stage.transactions / steps,
            }
        )
    return rows


def _total(stages: Iterable[_Stage]) -> _Stage:
    total = _Stage()
    for stage in stages:
        total.cpu_s += stage.cpu_s
        total.wall_s += stage.wall_s
        total.statements += stage.statements
        total.transactions += stage.transactions
    return total


def run(
    runs: int = DEFAULT_RUNS, *, only: Sequence[str] = (), results_dir: Path = RESULTS_DIR
) -> dict[str, Any]:
    """Measure each backend asked for (both by default), print the table, write the result."""
    wanted = set(only) or {"sqlite", "postgres"}
    postgres = os.environ.get("MCPD_TEST_POSTGRES_URL")
    rows: list[Any] = []
    not_measured: dict[str, str] = {}
    for backend in ("sqlite", "postgres"):
        if backend not in wanted:
            continue
        database: AbstractContextManager[str | None] = contextlib.nullcontext(None)
        if backend == "postgres":
            if postgres is None:
                not_measured["postgres"] = "MCPD_TEST_POSTGRES_URL is not set"
                continue
            database = postgres_database(postgres, "mcpd_bench_stages")
        with (
            database as url,
            tempfile.TemporaryDirectory(prefix="mcpd-orchestrator-stages-") as data_dir,
        ):
            rows += measure(backend, runs, data_dir=Path(data_dir), postgres_url=url)
    print_table(f"orchestrator stages: {runs} runs of a 3-step workflow, per step", rows)
    document = {
        "description": DESCRIPTION,
        "config": {"runs": runs, "claim_max": CLAIM_MAX},
        "results": rows,
        "not_measured": not_measured,
    }
    path = write_result(NAME, document, results_dir)
    print(f"wrote {path}", flush=True)
    return document


def _run_from_bench(config: BenchConfig) -> Mapping[str, Any]:
    return run(results_dir=config.results_dir)


BENCHMARK = Benchmark(name=NAME, description=DESCRIPTION, run=_run_from_bench)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.orchestrator.stages")
    parser.add_argument("--runs", type=int, default=DEFAULT_RUNS)
    parser.add_argument("--only", nargs="+", default=[], choices=["sqlite", "postgres"])
    parser.add_argument("--results-dir", type=Path, default=RESULTS_DIR)
    args = parser.parse_args(argv)
    run(args.runs, only=args.only, results_dir=args.results_dir)
    return 0


if __name__ == "__main__":
    sys.exit(main())
