"""Sustained ingest throughput: mcpd against Arize Phoenix, side by side, in one run.

``python -m bench ingest [--seconds N]`` or ``python -m bench.ingest [options]`` (``--help``).

What is measured, for every case (system x backend x route x payload):

1. **Spans.** GenAI-shaped traces of about ten spans (agent root, ``chat`` inferences with
   usage incl. cache reads and reasoning, tool calls) with input/output messages sized so each
   span is 1 KB or 10 KB in OTLP protobuf (:mod:`bench.ingest.spans`), 512 spans per request,
   encoded before anything is timed: ``ExportTraceServiceRequest`` bytes for OTLP/HTTP and
   OTLP/gRPC, ``IngestBatch`` JSON for mcpd's native ``POST /v1/api/ingest``. Each request
   sent carries ids no other request has.
2. **Load.** This process is the client (the server runs in its own process group): a
   closed loop of ``--concurrency`` requests in flight (default 8) for ``--seconds`` (default
   10) after ``--warmup`` seconds of unrecorded load (warm-up spans go to another service /
   Phoenix project and are not counted). httpx HTTP/1.1 keep-alive; ``grpc.aio`` with raw
   bytes. A request is *acknowledged* by a 200/OK whose ``partial_success`` (native:
   ``IngestResult``) rejects nothing. **ack spans/s** = spans acknowledged / send window (first
   request sent to last reply).
3. **Durable and queryable.**

   - mcpd answers only once the group commit holding a request is durable, so the claim to
     check is *acknowledged => stored*. After the window, a sample of acknowledged traces is
     read back with ``GET /v1/api/traces/{id}`` (span counts must match), then the daemon is
     killed with SIGKILL (a crash: no shutdown code runs) and the spans in its store are
     counted (SQL on the SQLite file / Postgres database, ``FINAL`` count through chdb).
     ``lost`` = acknowledged - stored must be 0; **durable spans/s** = stored / send window.
   - Phoenix acknowledges OTLP before decoding it and writes spans from an in-memory queue
     (``PHOENIX_MAX_SPANS_QUEUE_SIZE``, 20,000 by default, answers 503 / UNAVAILABLE when
     full; the bench backs off 0.1 s then). Its own SQLite file is polled (read only) for the
     measured project's span count: at the end of the window (**backlog** = acknowledged -
     stored then: what a crash at that moment loses), then every 0.5 s until every
     acknowledged span is stored or ``--drain-timeout`` (default 20 s) passes.
     **durable spans/s** = spans stored / (first send -> last time the count grew). Then
     Phoenix is stopped with SIGTERM (its graceful shutdown drains for 5 s) and its file
     counted again: ``lost`` = acknowledged spans that never reached it.
     Phoenix's warm-up is ``concurrency`` requests of 16 spans, waited for until stored: a
     timed warm-up would queue more spans than it stores in minutes, ahead of the measured ones.

Phoenix receives the same pre-encoded OTLP stream over HTTP and gRPC. It accepts traces only:
no native JSON batch, no OTLP/JSON, no logs or metrics, so it has no ``native`` rows. mcpd runs
on SQLite (the embedded default), PostgreSQL (``MCPD_TEST_POSTGRES_URL`` or
``--postgres-url``: a fresh database per case, dropped after) and ClickHouse in process (chdb).

Output: a table per run and ``bench/results/ingest.json`` (``ingest-partial.json`` when
``--only`` narrows the run) with the machine, the corpus and every figure. ``other cpu%`` is
machine CPU used by neither the client nor the server during the window (the PostgreSQL server
on postgres rows; elsewhere, other work that was competing for the cores).

Profiling: ``--profile-dir DIR --py-spy PATH [--profile-gil]`` records each mcpd case's
measured window with ``py-spy record --format raw``; ``python -m bench.ingest.profile FILE``
summarizes a recording (self, inclusive, and charged to the innermost mcpd frame).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import math
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import httpx

from bench.config import BenchConfig, Benchmark
from bench.harness import (
    RESULTS_DIR,
    DaemonProcess,
    describe_error,
    percentiles,
    postgres_database,
    print_table,
    repo_relative,
    write_result,
)
from bench.ingest import spans as spans_module
from bench.ingest.load import (
    REFUSAL_BACKOFF_S,
    ROUTES,
    LoadOutcome,
    Route,
    Send,
    Stream,
    drive,
    open_sender,
)
from bench.ingest.spans import (
    MEASURED_SERVICE,
    SIZES,
    SPANS_PER_REQUEST,
    WARMUP_SERVICE,
    Corpus,
    Encoding,
    build_corpus,
)
from bench.ingest.targets import (
    BACKENDS,
    DEFAULT_PHOENIX_SPEC,
    DEFAULT_PHOENIX_VENV,
    POSTGRES_URL_ENV,
    PhoenixServer,
    PhoenixUnavailableError,
    count_mcpd_spans,
    kill_group,
    phoenix_python,
    storage_env,
)

NAME = "ingest"
DESCRIPTION = (
    "sustained ingest spans/s (native, OTLP/HTTP, OTLP/gRPC; 1 KB and 10 KB; SQLite, Postgres, "
    "ClickHouse), acknowledged vs durable, mcpd vs Arize Phoenix"
)
SYSTEMS = ("mcpd", "phoenix")
PAYLOADS = tuple(SIZES)
DEFAULT_CONCURRENCY = 8
TARGET_DURABLE_SPANS_S = 20_000
SAMPLE_TRACES = 5
POLL_S = 0.5
PHOENIX_ROUTES: tuple[Route, ...] = ("otlp-http", "otlp-grpc")
_DROPPED = re.compile(r"Span ingestion stopped with \d+ spans still pending[^\n]*")
PHOENIX_NOTE = (
    "Phoenix accepts traces only, as OTLP protobuf (HTTP /v1/traces, gRPC TraceService): no "
    "native JSON batch, no OTLP/JSON, no logs or metrics; hence no native rows for it."
)
DIMENSIONS: dict[str, tuple[str, ...]] = {
    "system": SYSTEMS,
    "backend": BACKENDS,
    "route": ROUTES,
    "payload": PAYLOADS,
}


@dataclasses.dataclass(frozen=True, slots=True)
class Case:
    system: str
    backend: str
    route: Route
    payload: str

    @property
    def label(self) -> str:
        return f"{self.system}/{self.backend}/{self.route}/{self.payload}"

    @property
    def encoding(self) -> Encoding:
        return "native" if self.route == "native" else "otlp"


@dataclasses.dataclass(frozen=True, slots=True)
class IngestConfig:
    seconds: float = 10.0
    count: int | None = None
    warmup_seconds: float = 1.0
    concurrencies: tuple[int, ...] = (DEFAULT_CONCURRENCY,)
    only: tuple[str, ...] = ()
    drain_timeout_s: float = 20.0
    start_timeout_s: float = 120.0
    postgres_url: str | None = None
    phoenix_python: Path | None = None
    phoenix_venv: Path = DEFAULT_PHOENIX_VENV
    phoenix_spec: str = DEFAULT_PHOENIX_SPEC
    install_phoenix: bool = True
    results_dir: Path = RESULTS_DIR
    output: str | None = None
    templates: int = 8
    profile_dir: Path | None = None
    py_spy: Path | None = None
    profile_gil: bool = False
    # mcpd's `serve.processes` (None: the product default, one per core).
    processes: int | None = None
    # Every trace a turn of a session (the session read model kept in the spans' transaction).
    sessions: bool = True

    def __post_init__(self) -> None:
        if self.seconds <= 0 or self.warmup_seconds < 0 or self.drain_timeout_s < 0:
            raise ValueError("seconds must be positive, warmup and drain timeout not negative")
        if not self.concurrencies or min(self.concurrencies) < 1:
            raise ValueError("concurrency must be at least 1")
        if self.count is not None and self.count < 1:
            raise ValueError("count must be at least 1")
        known = {value for values in DIMENSIONS.values() for value in values}
        unknown = [value for value in self.only if value not in known]
        if unknown:
            raise ValueError(f"unknown --only value(s) {unknown}; known: {sorted(known)}")

    @property
    def result_name(self) -> str:
        return self.output or (NAME if not self.only else f"{NAME}-partial")


def all_cases() -> list[Case]:
    """Every case, in run order: mcpd (backend, route, payload), then Phoenix."""
    cases = [
        Case("mcpd", backend, route, payload)
        for backend in BACKENDS
        for route in ROUTES
        for payload in PAYLOADS
    ]
    cases += [
        Case("phoenix", "sqlite", route, payload)
        for route in PHOENIX_ROUTES
        for payload in PAYLOADS
    ]
    return cases


def select_cases(only: Sequence[str]) -> list[Case]:
    """The cases ``only`` keeps: values of one dimension are alternatives (OR), dimensions
    combine (AND); a dimension no value names is unrestricted."""
    wanted = {
        dimension: {value for value in only if value in values}
        for dimension, values in DIMENSIONS.items()
    }
    return [
        case
        for case in all_cases()
        if all(
            not chosen or getattr(case, dimension) in chosen for dimension, chosen in wanted.items()
        )
    ]


# ---------------------------------------------------------------------------------------------
# Results


@dataclasses.dataclass(slots=True)
class CaseResult:
    """Every figure of one case. Rates are spans per second."""

    system: str
    backend: str
    route: str
    payload: str
    concurrency: int
    send_window_s: float = 0.0
    requests: int = 0
    acked_requests: int = 0
    acked_spans: int = 0
    refused_requests: int = 0
    error_requests: int = 0
    error_kinds: dict[str, int] = dataclasses.field(default_factory=dict)
    ack_spans_s: float = 0.0
    ack_spans_s_before_first_refusal: float | None = None
    stored_spans: int = 0
    stored_at_window_end: int | None = None
    backlog_at_window_end: int | None = None
    time_to_durable_s: float | None = None
    durable_spans_s: float = 0.0
    all_acked_stored: bool = False
    lost_spans: int | None = None
    lost_how: str = ""
    sample_traces_checked: int = 0
    sample_traces_ok: int = 0
    p50_ms: float | None = None
    p95_ms: float | None = None
    p99_ms: float | None = None
    max_ms: float | None = None
    request_bytes_per_span: float = 0.0
    mb_s: float = 0.0
    client_cpu_pct: float | None = None
    other_cpu_pct: float | None = None
    """CPU used on the machine by neither this client nor the server's process group during the
    window: the PostgreSQL server on postgres rows, otherwise other work sharing the cores
    (which makes the figures lower than on a quiet machine)."""
    load_avg_1m: float | None = None
    server_cpu_pct: float | None = None
    server_startup_s: float | None = None
    notes: list[str] = dataclasses.field(default_factory=list)

    def apply_load(self, outcome: LoadOutcome, bytes_per_span: float) -> None:
        window = outcome.elapsed_s
        self.send_window_s = window
        self.requests = outcome.requests
        self.acked_requests = outcome.acked_requests
        self.acked_spans = outcome.acked_spans
        self.refused_requests = outcome.refused_requests
        self.error_requests = outcome.errors.total()
        self.error_kinds = dict(sorted(outcome.errors.items()))
        self.ack_spans_s = outcome.acked_spans / window if window > 0 else 0.0
        if outcome.first_refusal_at is not None:
            until = outcome.first_refusal_at - outcome.started_at
            before = outcome.spans_acked_before_first_refusal or 0
            self.ack_spans_s_before_first_refusal = before / until if until > 0 else None
        if outcome.latencies_s:
            ms = [value * 1000.0 for value in outcome.latencies_s]
            self.p50_ms, self.p95_ms, self.p99_ms = percentiles(ms, (50, 95, 99))
            self.max_ms = max(ms)
        self.request_bytes_per_span = bytes_per_span
        self.mb_s = self.ack_spans_s * bytes_per_span / 1e6
        self.client_cpu_pct = 100.0 * outcome.client_cpu_s / window if window > 0 else None

    def row(self) -> dict[str, object]:
        return {
            "system": self.system,
            "backend": self.backend,
            "route": self.route,
            "payload": self.payload,
            "conc": self.concurrency,
            "ack spans/s": round(self.ack_spans_s),
            "durable spans/s": round(self.durable_spans_s),
            "p50 ms": self.p50_ms,
            "p95 ms": self.p95_ms,
            "backlog at end": self.backlog_at_window_end,
            "lost": self.lost_spans,
            "refused": self.refused_requests,
            "errors": self.error_requests,
            "MB/s": self.mb_s,
            "client cpu%": self.client_cpu_pct,
            "server cpu%": self.server_cpu_pct,
            "other cpu%": self.other_cpu_pct,
        }


_CLK_TCK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _machine_busy_seconds() -> float | None:
    """CPU seconds the whole machine has spent busy (``/proc/stat``), None off Linux."""
    try:
        with open("/proc/stat", encoding="ascii") as handle:
            fields = handle.readline().split()
    except OSError:
        return None
    if not fields or fields[0] != "cpu":
        return None
    # user nice system idle iowait irq softirq steal ...: all but idle and iowait are busy.
    ticks = [int(value) for value in fields[1:9]]
    return (sum(ticks) - ticks[3] - ticks[4]) / _CLK_TCK


def _other_cpu_pct(
    result: CaseResult, busy_before: float | None, busy_after: float | None
) -> float | None:
    window = result.send_window_s
    if busy_before is None or busy_after is None or window <= 0:
        return None
    if result.client_cpu_pct is None or result.server_cpu_pct is None:
        return None
    machine = 100.0 * (busy_after - busy_before) / window
    return max(machine - result.client_cpu_pct - result.server_cpu_pct, 0.0)


def _cpu_pct(before: float | None, after: float | None, window: float) -> float | None:
    if before is None or after is None or window <= 0:
        return None
    return 100.0 * (after - before) / window


# ---------------------------------------------------------------------------------------------
# mcpd


async def _warm_up(send: Send, stream: Stream, concurrency: int, seconds: float) -> LoadOutcome:
    return await drive(send, stream, concurrency=concurrency, duration_s=seconds)


async def _measure(
    send: Send, stream: Stream, concurrency: int, config: IngestConfig
) -> LoadOutcome:
    if config.count is not None:
        return await drive(send, stream, concurrency=concurrency, count=config.count)
    return await drive(send, stream, concurrency=concurrency, duration_s=config.seconds)


async def _sample_traces(
    http_url: str, corpus: Corpus, case: Case, outcome: LoadOutcome
) -> tuple[int, int, list[str]]:
    """Read back a few acknowledged traces through the query API; (checked, ok, problems)."""
    if not outcome.acked:
        return 0, 0, []
    templates = corpus.measured[case.encoding]
    step = max(1, len(outcome.acked) // SAMPLE_TRACES)
    picks = outcome.acked[::step][:SAMPLE_TRACES]
    problems: list[str] = []
    ok = 0
    async with httpx.AsyncClient(base_url=http_url, timeout=60.0, trust_env=False) as client:
        for index, seq in picks:
            template = templates[index]
            trace_id = template.trace_id(0, seq)
            response = await client.get(f"/v1/api/traces/{trace_id}")
            if response.status_code != 200:
                problems.append(f"GET trace {trace_id}: HTTP {response.status_code}")
                continue
            span_count = response.json().get("trace", {}).get("span_count")
            if span_count != template.spans_per_trace[0]:
                problems.append(
                    f"trace {trace_id}: span_count {span_count}, sent {template.spans_per_trace[0]}"
                )
                continue
            ok += 1
    return len(picks), ok, problems


def _start_profiler(
    config: IngestConfig, case: Case, pid: int, seconds: float
) -> subprocess.Popen[bytes] | None:
    """``py-spy record`` of the daemon and its server processes over the
    measured window, when asked for."""
    if config.profile_dir is None or config.py_spy is None:
        return None
    config.profile_dir.mkdir(parents=True, exist_ok=True)
    stem = f"{case.backend}-{case.route}-{case.payload}"
    return subprocess.Popen(
        [
            str(config.py_spy),
            "record",
            "--pid",
            str(pid),
            "--duration",
            str(max(1, math.ceil(seconds))),
            "--rate",
            "200",
            "--format",
            "raw",
            "--output",
            str(config.profile_dir / f"{stem}.txt"),
            "--nonblocking",
            "--subprocesses",
            *(["--gil"] if config.profile_gil else []),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )


async def run_mcpd_case(
    case: Case, corpus: Corpus, concurrency: int, config: IngestConfig
) -> CaseResult:
    result = CaseResult(case.system, case.backend, case.route, case.payload, concurrency)
    scratch = Path(tempfile.mkdtemp(prefix="bench-ingest-"))
    clickhouse_dir = scratch / "clickhouse"
    daemon: DaemonProcess | None = None
    try:
        with _maybe_postgres(case, config) as postgres_url:
            env = storage_env(
                case.backend, postgres_url=postgres_url, clickhouse_dir=clickhouse_dir
            )
            daemon = DaemonProcess(
                extra_env=env,
                keep_files=True,
                start_timeout_s=config.start_timeout_s,
                processes=config.processes,
            )
            await asyncio.to_thread(daemon.start)
            result.server_startup_s = daemon.startup_s
            addr = daemon.otlp_grpc_addr
            async with open_sender(
                case.route,
                http_url=daemon.http_url,
                grpc_addr=addr,
                concurrency=concurrency,
                spans_per_request=SPANS_PER_REQUEST,
            ) as send:
                if config.warmup_seconds > 0:
                    warm = await _warm_up(
                        send,
                        Stream(corpus.warmup[case.encoding]),
                        concurrency,
                        config.warmup_seconds,
                    )
                    if warm.errors:
                        result.notes.append(f"warm-up errors: {dict(warm.errors)}")
                assert daemon.pid is not None
                profiler = _start_profiler(config, case, daemon.pid, config.seconds)
                busy_before = _machine_busy_seconds()
                cpu_before = daemon.cpu_seconds()
                outcome = await _measure(
                    send, Stream(corpus.measured[case.encoding]), concurrency, config
                )
                cpu_after = daemon.cpu_seconds()
                busy_after = _machine_busy_seconds()
                if profiler is not None:
                    await asyncio.to_thread(profiler.wait)
            result.apply_load(outcome, corpus.bytes_per_span(case.encoding))
            result.server_cpu_pct = _cpu_pct(cpu_before, cpu_after, outcome.elapsed_s)
            result.other_cpu_pct = _other_cpu_pct(result, busy_before, busy_after)
            checked, ok, problems = await _sample_traces(daemon.http_url, corpus, case, outcome)
            result.sample_traces_checked, result.sample_traces_ok = checked, ok
            result.notes.extend(problems)
            # A crash right after the last acknowledgement: what is stored now was durable.
            kill_group(daemon.pid)
            await asyncio.to_thread(daemon.stop)
            stored = await asyncio.to_thread(
                count_mcpd_spans,
                case.backend,
                MEASURED_SERVICE,
                data_dir=daemon.data_dir,
                postgres_url=postgres_url,
                clickhouse_dir=clickhouse_dir,
            )
    finally:
        if daemon is not None:
            await asyncio.to_thread(daemon.stop)
            if daemon.workdir is not None:
                shutil.rmtree(daemon.workdir, ignore_errors=True)
        shutil.rmtree(scratch, ignore_errors=True)
    result.stored_spans = stored
    result.stored_at_window_end = stored
    result.backlog_at_window_end = max(result.acked_spans - stored, 0)
    result.lost_spans = max(result.acked_spans - stored, 0)
    result.lost_how = "SIGKILL right after the last acknowledgement"
    result.all_acked_stored = stored >= result.acked_spans
    result.time_to_durable_s = result.send_window_s
    window = result.send_window_s
    result.durable_spans_s = min(stored, result.acked_spans) / window if window > 0 else 0.0
    if stored > result.acked_spans:
        result.notes.append(f"{stored - result.acked_spans} spans stored but not acknowledged")
    return result


def _maybe_postgres(case: Case, config: IngestConfig) -> AbstractContextManager[str | None]:
    """A fresh database for a postgres case (its URL), nothing (None) for the others."""
    if case.backend != "postgres":
        return contextlib.nullcontext(None)
    if not config.postgres_url:
        raise RuntimeError(f"no PostgreSQL URL: set {POSTGRES_URL_ENV} or --postgres-url")
    return postgres_database(config.postgres_url)


# ---------------------------------------------------------------------------------------------
# Phoenix


async def _wait_stored(
    server: PhoenixServer, project: str, expected: int, timeout_s: float
) -> tuple[int, float | None, list[tuple[float, int]]]:
    """Poll until ``expected`` spans of ``project`` are stored or ``timeout_s`` passes.

    Returns the last count, the ``perf_counter`` time the count last grew (None: never), and
    the samples ``(time, count)``.
    """
    deadline = time.perf_counter() + timeout_s
    last = await asyncio.to_thread(server.count, project)
    grew_at: float | None = time.perf_counter() if last else None
    samples = [(time.perf_counter(), last)]
    while last < expected and time.perf_counter() < deadline:
        await asyncio.sleep(POLL_S)
        now_count = await asyncio.to_thread(server.count, project)
        now = time.perf_counter()
        samples.append((now, now_count))
        if now_count > last:
            grew_at = now
        last = now_count
    return last, grew_at, samples


async def run_phoenix_case(
    case: Case, corpus: Corpus, concurrency: int, config: IngestConfig, python: Path
) -> CaseResult:
    result = CaseResult(case.system, case.backend, case.route, case.payload, concurrency)
    server = PhoenixServer(python, start_timeout_s=config.start_timeout_s)
    try:
        await asyncio.to_thread(server.start)
        result.server_startup_s = server.startup_s
        async with open_sender(
            case.route,
            http_url=server.http_url,
            grpc_addr=server.grpc_addr,
            concurrency=concurrency,
            spans_per_request=SPANS_PER_REQUEST,
        ) as send:
            probe = await drive(
                send, Stream(corpus.probe["otlp"]), concurrency=concurrency, count=concurrency
            )
            warm_stored, _, _ = await _wait_stored(
                server, WARMUP_SERVICE, probe.acked_spans, config.drain_timeout_s
            )
            if probe.errors or warm_stored < probe.acked_spans:
                result.notes.append(
                    f"warm-up: {probe.acked_spans} acknowledged, {warm_stored} stored, "
                    f"errors {dict(probe.errors)}"
                )
            busy_before = _machine_busy_seconds()
            cpu_before = server.cpu_seconds()
            outcome = await _measure(send, Stream(corpus.measured["otlp"]), concurrency, config)
            cpu_after = server.cpu_seconds()
            busy_after = _machine_busy_seconds()
        result.apply_load(outcome, corpus.bytes_per_span("otlp"))
        result.server_cpu_pct = _cpu_pct(cpu_before, cpu_after, outcome.elapsed_s)
        result.other_cpu_pct = _other_cpu_pct(result, busy_before, busy_after)
        at_end = await asyncio.to_thread(server.count, MEASURED_SERVICE)
        result.stored_at_window_end = at_end
        result.backlog_at_window_end = max(outcome.acked_spans - at_end, 0)
        stored, grew_at, samples = await _wait_stored(
            server, MEASURED_SERVICE, outcome.acked_spans, config.drain_timeout_s
        )
        result.stored_spans = stored
        result.all_acked_stored = stored >= outcome.acked_spans
        if grew_at is not None and stored:
            result.time_to_durable_s = grew_at - outcome.started_at
            result.durable_spans_s = min(stored, outcome.acked_spans) / result.time_to_durable_s
        if not result.all_acked_stored:
            drain = _drain_rate(samples)
            pending = outcome.acked_spans - stored
            eta = f", about {pending / drain:.0f} s more at that rate" if drain else ""
            result.notes.append(
                f"{pending} acknowledged spans still queued after waiting "
                f"{config.drain_timeout_s:g} s (storing {drain:.0f} spans/s{eta})"
            )
        await asyncio.to_thread(server.stop)
        after_stop = await asyncio.to_thread(server.count, MEASURED_SERVICE)
        result.lost_spans = max(outcome.acked_spans - after_stop, 0)
        result.lost_how = "SIGTERM (graceful stop) after the drain wait"
        # uvicorn re-raises the SIGTERM it handled, so -15 is a clean exit.
        if server.returncode not in (0, None, -signal.SIGTERM):
            result.notes.append(f"phoenix exited with {server.returncode}")
        dropped = _DROPPED.search(server.log_tail(20_000))
        if dropped:
            result.notes.append(f"phoenix log at shutdown: {dropped.group(0)}")
        if result.error_requests:
            result.notes.append(f"errors: {result.error_kinds}")
    finally:
        await asyncio.to_thread(server.stop)
        server.remove_files()
    return result


def _drain_rate(samples: Sequence[tuple[float, int]]) -> float:
    if len(samples) < 2 or samples[-1][0] <= samples[0][0]:
        return 0.0
    return (samples[-1][1] - samples[0][1]) / (samples[-1][0] - samples[0][0])


# ---------------------------------------------------------------------------------------------
# The run


def _print_rows(title: str, results: Sequence[CaseResult]) -> None:
    print_table(title, [result.row() for result in results], float_digits=1)


def _verdicts(results: Sequence[CaseResult]) -> dict[str, Any]:
    """The issue's targets, judged on the embedded default (SQLite) at the first concurrency."""
    verdicts: dict[str, Any] = {}
    for result in results:
        if result.system != "mcpd":
            continue
        key = f"{result.backend}/{result.route}/{result.payload}/c{result.concurrency}"
        verdicts[key] = {
            "durable_spans_s": round(result.durable_spans_s),
            "meets_20k": result.durable_spans_s >= TARGET_DURABLE_SPANS_S,
            "ack_implies_durable": result.lost_spans == 0 and result.all_acked_stored,
            "sample_traces_ok": f"{result.sample_traces_ok}/{result.sample_traces_checked}",
        }
    return verdicts


async def run_async(config: IngestConfig) -> dict[str, Any]:
    cases = select_cases(config.only)
    if not cases:
        raise ValueError(f"--only {' '.join(config.only)} selects no case")
    skipped: dict[str, str] = {}
    python: Path | None = None
    phoenix_version: str | None = None
    if any(case.system == "phoenix" for case in cases):
        try:
            python, phoenix_version = await asyncio.to_thread(
                phoenix_python,
                config.phoenix_python,
                venv=config.phoenix_venv,
                spec=config.phoenix_spec,
                install=config.install_phoenix,
            )
        except PhoenixUnavailableError as exc:
            for case in cases:
                if case.system == "phoenix":
                    skipped[case.label] = str(exc)
    if any(case.backend == "postgres" for case in cases) and not config.postgres_url:
        for case in cases:
            if case.backend == "postgres":
                skipped[case.label] = f"no PostgreSQL URL ({POSTGRES_URL_ENV} or --postgres-url)"
    cases = [case for case in cases if case.label not in skipped]

    corpora: dict[str, Corpus] = {}
    for payload in sorted({case.payload for case in cases}, key=PAYLOADS.index):
        began = time.perf_counter()
        corpora[payload] = await asyncio.to_thread(
            build_corpus, payload, templates=config.templates, sessions=config.sessions
        )
        print(
            f"corpus {payload}: {corpora[payload].describe()} "
            f"(encoded in {time.perf_counter() - began:.1f} s)",
            flush=True,
        )

    results: list[CaseResult] = []
    failures: dict[str, str] = {}
    for concurrency in config.concurrencies:
        for case in cases:
            print(f"--- {case.label} concurrency {concurrency}", flush=True)
            load_1m = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
            try:
                if case.system == "mcpd":
                    result = await run_mcpd_case(case, corpora[case.payload], concurrency, config)
                else:
                    assert python is not None
                    result = await run_phoenix_case(
                        case, corpora[case.payload], concurrency, config, python
                    )
            except Exception as exc:
                traceback.print_exc()
                failures[f"{case.label}/c{concurrency}"] = describe_error(exc)
                continue
            result.load_avg_1m = load_1m
            results.append(result)
            row = result.row()
            print(
                "    "
                + ", ".join(
                    f"{key} {value}"
                    for key, value in row.items()
                    if key not in ("system", "backend", "route", "payload")
                ),
                flush=True,
            )
            for note in result.notes:
                print(f"    note: {note}", flush=True)

    print()
    _print_rows(
        f"Ingest, {config.seconds:g} s per case, {SPANS_PER_REQUEST} spans per request "
        "(rates in spans/s; backlog and lost in spans)",
        results,
    )
    for label, reason in {**skipped, **failures}.items():
        print(f"not measured: {label}: {reason}")
    print(PHOENIX_NOTE)
    document: dict[str, Any] = {
        "config": {
            "seconds": config.seconds,
            "count": config.count,
            "warmup_seconds": config.warmup_seconds,
            "concurrencies": list(config.concurrencies),
            "only": list(config.only),
            "drain_timeout_s": config.drain_timeout_s,
            "spans_per_request": SPANS_PER_REQUEST,
            "templates": config.templates,
            "refusal_backoff_s": REFUSAL_BACKOFF_S,
            "processes": config.processes
            if config.processes is not None
            else "default (one per core, at most 4)",
            "sessions": config.sessions,
            "client": "this process (one asyncio loop); servers in their own process groups",
        },
        "corpus": {name: corpus.describe() for name, corpus in corpora.items()},
        "phoenix": {
            "version": phoenix_version,
            "python": repo_relative(python) if python else None,
            "note": PHOENIX_NOTE,
        },
        "definitions": {
            "ack_spans_s": "spans acknowledged (2xx/OK, nothing rejected) / send window",
            "durable_spans_s": (
                "mcpd: spans found in the store after SIGKILL at the end of the window / send "
                "window; phoenix: spans in its SQLite file / time from the first send until "
                "the count last grew"
            ),
            "backlog_at_window_end": "acknowledged spans not yet stored when the window ended",
            "lost_spans": "acknowledged spans never stored (see lost_how)",
            "other_cpu_pct": (
                "machine CPU used by neither the client nor the server's process group during the "
                "window: the PostgreSQL server on postgres rows, else other work on the machine"
            ),
        },
        "results": [dataclasses.asdict(result) for result in results],
        "verdicts": _verdicts(results),
        "target_durable_spans_s": TARGET_DURABLE_SPANS_S,
        "not_measured": {**skipped, **failures},
        "generator": spans_module.__name__,
    }
    path = write_result(config.result_name, document, config.results_dir)
    print(f"wrote {path}")
    return document


def run(config: IngestConfig) -> dict[str, Any]:
    return asyncio.run(run_async(config))


def from_bench_config(config: BenchConfig) -> IngestConfig:
    """``python -m bench ingest``: the common options; the concurrency is this benchmark's
    default (8) unless ``--concurrency`` was given."""
    concurrencies = (
        (DEFAULT_CONCURRENCY,)
        if config.concurrencies == BenchConfig().concurrencies
        else config.concurrencies
    )
    return IngestConfig(
        seconds=config.seconds,
        count=config.count,
        warmup_seconds=config.warmup_seconds,
        concurrencies=concurrencies,
        start_timeout_s=max(config.start_timeout_s, 120.0),
        results_dir=config.results_dir,
        postgres_url=os.environ.get(POSTGRES_URL_ENV),
    )


def _run_from_bench(config: BenchConfig) -> Mapping[str, Any]:
    return run(from_bench_config(config))


BENCHMARK = Benchmark(name=NAME, description=DESCRIPTION, run=_run_from_bench)


# ---------------------------------------------------------------------------------------------
# CLI


def build_parser() -> argparse.ArgumentParser:
    defaults = IngestConfig()
    parser = argparse.ArgumentParser(
        prog="python -m bench.ingest",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=(
            "--only takes values of any dimension: systems "
            + ", ".join(SYSTEMS)
            + "; backends "
            + ", ".join(BACKENDS)
            + "; routes "
            + ", ".join(ROUTES)
            + "; payloads "
            + ", ".join(PAYLOADS)
            + ". Values of one dimension are alternatives, dimensions combine: "
            "`--only sqlite otlp-http 1kb` is mcpd and Phoenix on SQLite over OTLP/HTTP, 1 KB."
        ),
    )
    parser.add_argument("--seconds", type=float, default=defaults.seconds)
    parser.add_argument("--count", type=int, default=None, help="requests per case instead")
    parser.add_argument("--warmup", type=float, default=defaults.warmup_seconds)
    parser.add_argument("--concurrency", type=int, nargs="+", default=list(defaults.concurrencies))
    parser.add_argument("--only", nargs="+", default=[], metavar="VALUE")
    parser.add_argument("--drain-timeout", type=float, default=defaults.drain_timeout_s)
    parser.add_argument("--start-timeout", type=float, default=defaults.start_timeout_s)
    parser.add_argument(
        "--postgres-url",
        default=os.environ.get(POSTGRES_URL_ENV),
        help=f"admin URL of a PostgreSQL server (default ${POSTGRES_URL_ENV})",
    )
    parser.add_argument(
        "--phoenix-python",
        type=Path,
        default=None,
        help="an interpreter that imports phoenix (default $BENCH_PHOENIX_PYTHON, else the "
        "virtualenv of --phoenix-venv, created on first use)",
    )
    parser.add_argument("--phoenix-venv", type=Path, default=defaults.phoenix_venv)
    parser.add_argument("--phoenix-spec", default=defaults.phoenix_spec)
    parser.add_argument("--no-install", action="store_true", help="never pip install Phoenix")
    parser.add_argument("--templates", type=int, default=defaults.templates)
    parser.add_argument("--results-dir", type=Path, default=defaults.results_dir)
    parser.add_argument("--output", default=None, help="result name (default ingest)")
    parser.add_argument(
        "--profile-dir", type=Path, default=None, help="py-spy raw profiles of mcpd per case"
    )
    parser.add_argument("--py-spy", type=Path, default=None, help="the py-spy executable")
    parser.add_argument(
        "--profile-gil", action="store_true", help="sample only the thread holding the GIL"
    )
    parser.add_argument(
        "--processes",
        type=int,
        default=None,
        help="mcpd's serve.processes (default: the product default, one per core)",
    )
    parser.add_argument(
        "--no-sessions",
        action="store_true",
        help="spans carry no session id, so ingest keeps no sessions from traces",
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    config = IngestConfig(
        seconds=args.seconds,
        count=args.count,
        warmup_seconds=args.warmup,
        concurrencies=tuple(dict.fromkeys(args.concurrency)),
        only=tuple(args.only),
        drain_timeout_s=args.drain_timeout,
        start_timeout_s=args.start_timeout,
        postgres_url=args.postgres_url,
        phoenix_python=args.phoenix_python,
        phoenix_venv=args.phoenix_venv,
        phoenix_spec=args.phoenix_spec,
        install_phoenix=not args.no_install,
        results_dir=args.results_dir,
        output=args.output,
        templates=args.templates,
        profile_dir=args.profile_dir,
        py_spy=args.py_spy,
        profile_gil=args.profile_gil,
        processes=args.processes,
        sessions=not args.no_sessions,
    )
    payload = run(config)
    return 1 if payload["not_measured"] and not payload["results"] else 0


if __name__ == "__main__":
    sys.exit(main())
