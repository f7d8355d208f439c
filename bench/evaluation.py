"""A deterministic scoring pass over stored runs, every deterministic scorer at once.

``python -m bench evaluation [--count N]`` (N runs, 10,000 by default; part of ``make bench``).
Against a real ``mcpd serve`` on embedded SQLite (its default processes): N runs of four spans
each (an agent root with an answer, a model call, two tool calls, one of them failing in one run
of five) are ingested through ``POST /v1/api/ingest``, then scored through ``POST
/v1/api/scorers/run`` in passes of at most 1,000 named runs, first with ``dry_run`` (reading and
scoring only), then storing the scores through ingest. Each row: runs per second, scores per
second and the passes' wall time, with the daemon's CPU over the row.

Output: a table and ``bench/results/evaluation.json``. One monitor evaluation over 1M spans is
measured by ``bench query`` (:mod:`bench.query.monitors`), which loads that corpus.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import httpx

from bench.config import BenchConfig, Benchmark
from bench.harness import RESULTS_DIR, print_table, write_result
from mcpd.runtime.ids import new_span_id, new_trace_id
from mcpd.testing.daemon import DaemonProcess

NAME = "evaluation"
DESCRIPTION = "a deterministic scoring pass (all seven scorers) over stored runs, SQLite"
DEFAULT_RUNS = 10_000
PASS = 1_000
INGEST_BATCH = 500
SCORERS = [
    "contains",
    "cost_budget",
    "exact_match",
    "latency_budget",
    "span_present",
    "tool_efficiency",
    "tool_succeeded",
]
CONFIG = {
    "expected": "the refund was issued",
    "needle": "refund",
    "max_ms": 1500,
    "max_cost": 0.01,
    "max_tool_calls": 2,
    "span_kind": "model_inference",
}
_S = 1_000_000_000


def corpus(runs: int, *, start_ns: int) -> list[list[dict[str, Any]]]:
    """`runs` runs of four spans each, their spans in ingest's native JSON; one run in five has
    a failing tool call."""
    made = []
    for n in range(runs):
        trace_id, root_id = new_trace_id(), new_span_id()
        begin = start_ns + n * 1_000_000
        child = {"parent_span_id": root_id}
        refund = {"status": "error"} if n % 5 == 0 else {}
        made.append(
            [
                _span(trace_id, begin, "answer_ticket", "agent_run", 1000 + n % 1000)
                | {"span_id": root_id, "output": "The refund was issued"},
                _span(trace_id, begin, "chat", "model_inference", 400, **child)
                | {"model": "gpt-4o", "usage": {"input_tokens": 800, "output_tokens": 120}},
                _span(trace_id, begin, "lookup_order", "tool_call", 100, **child),
                _span(trace_id, begin, "issue_refund", "tool_call", 200, **child) | refund,
            ]
        )
    return made


def _span(
    trace_id: str, begin: int, name: str, kind: str, end_ms: int, **fields: Any
) -> dict[str, Any]:
    return {
        "trace_id": trace_id,
        "span_id": new_span_id(),
        "name": name,
        "kind": kind,
        "status": "ok",
        "start_time": _rfc3339(begin),
        "end_time": _rfc3339(begin + end_ms * 1_000_000),
        "correlation": {"project": "", "service_name": "bench-scored"},
        **fields,
    }


def _rfc3339(nanos: int) -> str:
    seconds, fraction = divmod(nanos, _S)
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds)) + f".{fraction:09d}Z"


def _ingest(http: httpx.Client, runs: Sequence[Sequence[dict[str, Any]]]) -> None:
    for first in range(0, len(runs), INGEST_BATCH):
        spans = [span for run in runs[first : first + INGEST_BATCH] for span in run]
        answer = http.post("/v1/api/ingest", json={"spans": spans})
        answer.raise_for_status()
        if answer.json()["accepted"] != len(spans):
            raise RuntimeError(f"ingest refused spans: {answer.text[:500]}")


def _score_all(
    http: httpx.Client, daemon: DaemonProcess, trace_ids: Sequence[str], *, dry_run: bool
) -> dict[str, Any]:
    cpu, began = daemon.cpu_seconds() or 0.0, time.perf_counter()
    scored = written = skipped = 0
    for first in range(0, len(trace_ids), PASS):
        body = {
            "trace_ids": list(trace_ids[first : first + PASS]),
            "scorers": SCORERS,
            "config": CONFIG,
            "dry_run": dry_run,
        }
        answer = http.post("/v1/api/scorers/run", json=body)
        answer.raise_for_status()
        result = answer.json()
        scored += result["traces_scored"]
        written += result["scores_written"]
        skipped += len(result.get("skipped", []))
    seconds = time.perf_counter() - began
    scores = scored * len(SCORERS) - skipped
    return {
        "mode": "dry run" if dry_run else "stored",
        "runs": scored,
        "scores": scores,
        "scores_written": written,
        "declined": skipped,
        "seconds": seconds,
        "runs_per_s": scored / seconds,
        "scores_per_s": scores / seconds,
        "daemon_cpu_pct": ((daemon.cpu_seconds() or 0.0) - cpu) / seconds * 100,
    }


def run(runs: int = DEFAULT_RUNS, *, results_dir: Path = RESULTS_DIR) -> dict[str, Any]:
    """Ingest `runs` runs, score them twice (dry run, stored), print and write the result."""
    made = corpus(runs, start_ns=time.time_ns() - 3600 * _S)
    trace_ids = [run[0]["trace_id"] for run in made]
    with (
        DaemonProcess(processes=None, start_timeout_s=120) as daemon,
        httpx.Client(base_url=daemon.http_url, timeout=600) as http,
    ):
        began = time.perf_counter()
        _ingest(http, made)
        ingest_s = time.perf_counter() - began
        rows = [
            _score_all(http, daemon, trace_ids, dry_run=True),
            _score_all(http, daemon, trace_ids, dry_run=False),
        ]
    print_table(f"evaluation: a pass of 7 scorers over {runs:,} stored runs", rows)
    document = {
        "description": DESCRIPTION,
        "config": {"runs": runs, "spans_per_run": 4, "pass_size": PASS, "scorers": SCORERS},
        "ingest_seconds": ingest_s,
        "results": rows,
    }
    path = write_result(NAME, document, results_dir)
    print(f"wrote {path}", flush=True)
    return document


def _run_from_bench(config: BenchConfig) -> Mapping[str, Any]:
    return run(config.count or DEFAULT_RUNS, results_dir=config.results_dir)


BENCHMARK = Benchmark(name=NAME, description=DESCRIPTION, run=_run_from_bench)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.evaluation", description=DESCRIPTION)
    parser.add_argument("--count", type=int, default=DEFAULT_RUNS, help="runs to store and score")
    parser.add_argument("--results-dir", type=Path, default=RESULTS_DIR)
    args = parser.parse_args(argv)
    run(args.count, results_dir=args.results_dir)
    return 0


if __name__ == "__main__":
    sys.exit(main())
