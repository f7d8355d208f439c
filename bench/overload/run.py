"""Ingest beyond what the store absorbs: refused with 429, memory bounded, nothing acknowledged
lost.

``python -m bench overload`` (``--seconds`` is the flood's duration) or ``python -m
bench.overload [--duration S] [--rate SPANS_S] [--factor F] [--payload 1kb|10kb] [--env
NAME=VALUE ...]``.

1. A real ``mcpd serve`` (SQLite, the product's default ingest workers) on free ports.
2. **Sustainable rate.** Unless ``--rate`` gives it, a closed loop of
   :data:`CALIBRATION_CONCURRENCY` OTLP/HTTP requests in flight for ``--calibrate`` seconds
   (warm-up service, not counted later) measures the spans/s the daemon acknowledges.
3. **Flood.** OTLP/HTTP requests of the ingest bench's GenAI spans (:mod:`bench.ingest.spans`,
   512 spans a request, ids fresh per request) are *offered* open loop at ``--factor`` (3)
   times that rate for ``--duration`` seconds: a request starts on schedule whatever became of
   the earlier ones, as independent exporters would send them, and a refusal does not slow the
   offer. The client holds at most ``--max-in-flight`` requests; one due while that many are
   outstanding is counted as *not sent*.
4. **Memory.** ``VmRSS`` of the daemon and each of its processes, every 0.2 s
   (:mod:`bench.overload.memory`): the peak of their sum and each one's peak.
5. **Nothing acknowledged lost.** After the last reply the daemon's group is SIGKILLed (a
   crash: no shutdown code runs) and its SQLite file is read: every span of every acknowledged
   request (200, nothing rejected) must be stored. ``lost`` counts acknowledged spans missing;
   ``stored unacknowledged`` counts spans stored from requests that were not acknowledged
   (refused requests must store nothing; a request that timed out may have been stored).

Output: a table and ``bench/results/overload.json`` (with the per-second timeline of accepted
and refused spans and of the group's memory).
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import shutil
import sqlite3
import sys
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from bench.config import BenchConfig, Benchmark
from bench.harness import RESULTS_DIR, DaemonProcess, print_table, write_result
from bench.ingest.load import (
    RefusedError,
    Send,
    Stream,
    classify_error,
    drive,
    http_client,
    otlp_http_sender,
)
from bench.ingest.spans import MEASURED_SERVICE, SIZES, SPANS_PER_REQUEST, Corpus, build_corpus
from bench.ingest.targets import kill_group
from bench.overload.memory import MemoryPeaks, sample_until

NAME = "overload"
DESCRIPTION = (
    "OTLP/HTTP offered at 3x the sustainable rate: accepted and refused spans/s, 429s, peak "
    "memory of every daemon process, acknowledged spans lost (must be 0)"
)
CALIBRATION_CONCURRENCY = 8
MIB = 1024 * 1024


@dataclasses.dataclass(frozen=True, slots=True)
class OverloadConfig:
    duration_s: float = 60.0
    calibrate_s: float = 10.0
    rate_spans_s: float | None = None
    factor: float = 3.0
    payload: str = "1kb"
    max_in_flight: int = 256
    templates: int = 8
    spans_per_request: int = SPANS_PER_REQUEST
    processes: int | None = None
    env: tuple[tuple[str, str], ...] = ()
    start_timeout_s: float = 120.0
    results_dir: Path = RESULTS_DIR

    def __post_init__(self) -> None:
        if self.duration_s <= 0 or self.calibrate_s <= 0 or self.factor <= 0:
            raise ValueError("duration, calibration and factor must be positive")
        if self.rate_spans_s is not None and self.rate_spans_s <= 0:
            raise ValueError("rate must be positive")
        if self.payload not in SIZES:
            raise ValueError(f"payload must be one of {sorted(SIZES)}")
        if self.max_in_flight < 1 or self.templates < 1 or self.spans_per_request < 1:
            raise ValueError("max_in_flight, templates and spans_per_request must be positive")


@dataclasses.dataclass(slots=True)
class Offered:
    """What the open loop sent, and what became of it, by second of the window."""

    scheduled: int = 0
    not_sent: int = 0
    sent: int = 0
    accepted: int = 0
    refused: int = 0
    refused_with_retry_after: int = 0
    retry_after_values: Counter[str] = dataclasses.field(default_factory=Counter)
    errors: Counter[str] = dataclasses.field(default_factory=Counter)
    started_at: float = 0.0
    ended_at: float = 0.0
    acked: list[tuple[int, int]] = dataclasses.field(default_factory=list)
    """``(template index, seq)`` of every accepted request."""
    unacked: list[tuple[int, int]] = dataclasses.field(default_factory=list)
    """``(template index, seq)`` of every request refused or failed."""
    per_second: dict[int, Counter[str]] = dataclasses.field(default_factory=dict)

    @property
    def window_s(self) -> float:
        return max(self.ended_at - self.started_at, 0.0)

    def note(self, at: float, outcome: str) -> None:
        second = int(at - self.started_at)
        self.per_second.setdefault(second, Counter())[outcome] += 1


async def offer(
    send: Send,
    stream: Stream,
    *,
    requests_per_s: float,
    duration_s: float,
    max_in_flight: int,
) -> Offered:
    """Open loop: request ``n`` starts at ``n / requests_per_s`` seconds, whatever became of
    the earlier ones, until ``duration_s``; then every outstanding reply is awaited."""
    offered = Offered()
    clock = time.perf_counter
    in_flight: set[asyncio.Task[None]] = set()

    async def one(index: int, seq: int, body: bytes) -> None:
        try:
            await send(body)
        except RefusedError as refused:
            offered.refused += 1
            offered.unacked.append((index, seq))
            if refused.retry_after is not None:
                offered.refused_with_retry_after += 1
                offered.retry_after_values[refused.retry_after] += 1
            offered.note(clock(), "refused")
        except Exception as error:  # a timeout, a rejection: not acknowledged
            offered.errors[classify_error(error)] += 1
            offered.unacked.append((index, seq))
            offered.note(clock(), "error")
        else:
            offered.accepted += 1
            offered.acked.append((index, seq))
            offered.note(clock(), "accepted")
        offered.ended_at = max(offered.ended_at, clock())

    offered.started_at = clock()
    while (due := offered.started_at + offered.scheduled / requests_per_s) < (
        offered.started_at + duration_s
    ):
        await asyncio.sleep(max(due - clock(), 0.0))
        offered.scheduled += 1
        if len(in_flight) >= max_in_flight:
            offered.not_sent += 1
            offered.note(clock(), "not_sent")
            continue
        index, seq, body = stream.next()
        offered.sent += 1
        task = asyncio.create_task(one(index, seq, body))
        in_flight.add(task)
        task.add_done_callback(in_flight.discard)
    if in_flight:
        await asyncio.gather(*in_flight)
    offered.ended_at = max(offered.ended_at, clock())
    return offered


def stored_spans_by_trace(data_dir: Path, service: str) -> dict[str, int]:
    """Spans of ``service`` per trace id in a stopped daemon's SQLite trace store (read only)."""
    uri = f"{(data_dir / 'trace.db').as_uri()}?mode=ro"
    connection = sqlite3.connect(uri, uri=True, timeout=30)
    try:
        rows = connection.execute(
            "SELECT trace_id, count(*) FROM spans WHERE service_name = ? GROUP BY trace_id",
            (service,),
        ).fetchall()
    finally:
        connection.close()
    return {str(trace_id): int(count) for trace_id, count in rows}


def expected_by_trace(corpus: Corpus, requests: Sequence[tuple[int, int]]) -> dict[str, int]:
    """Spans per trace id of the measured requests ``(template index, seq)``."""
    templates = corpus.measured["otlp"]
    expected: dict[str, int] = {}
    for index, seq in requests:
        template = templates[index]
        for number, spans in enumerate(template.spans_per_trace):
            expected[template.trace_id(number, seq)] = spans
    return expected


@dataclasses.dataclass(frozen=True, slots=True)
class _CpuSeconds:
    """CPU seconds of this process (the client) and of the daemon's process group."""

    client: float
    daemon: float | None

    def since(self, client: float, daemon: float | None) -> _CpuSeconds:
        """What was used from this reading to the given one."""
        used = daemon - self.daemon if daemon is not None and self.daemon is not None else None
        return _CpuSeconds(client - self.client, used)


@dataclasses.dataclass(frozen=True, slots=True)
class Durability:
    acknowledged_spans: int
    stored_acknowledged_spans: int
    lost_spans: int
    stored_unacknowledged_spans: int


def check_durability(corpus: Corpus, offered: Offered, stored: Mapping[str, int]) -> Durability:
    """Every acknowledged span against the store; what else the store holds."""
    acked = expected_by_trace(corpus, offered.acked)
    held = {trace: min(stored.get(trace, 0), spans) for trace, spans in acked.items()}
    unacked = expected_by_trace(corpus, offered.unacked)
    return Durability(
        acknowledged_spans=sum(acked.values()),
        stored_acknowledged_spans=sum(held.values()),
        lost_spans=sum(acked.values()) - sum(held.values()),
        stored_unacknowledged_spans=sum(stored.get(trace, 0) for trace in unacked),
    )


async def _calibrate(
    config: OverloadConfig, corpus: Corpus, http_url: str
) -> tuple[float, dict[str, Any]]:
    """The sustainable rate (spans/s): given, or measured closed loop on warm-up spans."""
    if config.rate_spans_s is not None:
        return config.rate_spans_s, {"given": True}
    async with http_client(http_url, CALIBRATION_CONCURRENCY) as client:
        measured = await drive(
            otlp_http_sender(client),
            Stream(corpus.warmup["otlp"]),
            concurrency=CALIBRATION_CONCURRENCY,
            duration_s=config.calibrate_s,
        )
    if not measured.acked_spans or measured.elapsed_s <= 0:
        raise RuntimeError(f"calibration acknowledged nothing: errors {dict(measured.errors)}")
    rate = measured.acked_spans / measured.elapsed_s
    return rate, {
        "given": False,
        "seconds": measured.elapsed_s,
        "concurrency": CALIBRATION_CONCURRENCY,
        "acked_spans": measured.acked_spans,
        "refused_requests": measured.refused_requests,
        "errors": dict(measured.errors),
    }


async def run_async(config: OverloadConfig) -> dict[str, Any]:
    corpus = await asyncio.to_thread(
        build_corpus,
        config.payload,
        templates=config.templates,
        spans_per_request=config.spans_per_request,
    )
    daemon = DaemonProcess(
        extra_env=dict(config.env),
        keep_files=True,
        start_timeout_s=config.start_timeout_s,
        processes=config.processes,
    )
    try:
        await asyncio.to_thread(daemon.start)
        assert daemon.pid is not None
        sampling_done = asyncio.Event()
        sampling = asyncio.create_task(sample_until(daemon.pid, sampling_done))
        rate, calibration = await _calibrate(config, corpus, daemon.http_url)
        spans = corpus.measured["otlp"][0].spans
        requests_per_s = config.factor * rate / spans
        cpu = _CpuSeconds(time.process_time(), daemon.cpu_seconds())
        async with http_client(daemon.http_url, config.max_in_flight) as client:
            offered = await offer(
                otlp_http_sender(client),
                Stream(corpus.measured["otlp"]),
                requests_per_s=requests_per_s,
                duration_s=config.duration_s,
                max_in_flight=config.max_in_flight,
            )
        cpu = cpu.since(time.process_time(), daemon.cpu_seconds())
        sampling_done.set()
        memory = await sampling
        # A crash right after the last reply: what the store holds now was durable.
        kill_group(daemon.pid)
        await asyncio.to_thread(daemon.stop)
        stored = await asyncio.to_thread(stored_spans_by_trace, daemon.data_dir, MEASURED_SERVICE)
    finally:
        await asyncio.to_thread(daemon.stop)
        if daemon.workdir is not None:
            shutil.rmtree(daemon.workdir, ignore_errors=True)
    durability = check_durability(corpus, offered, stored)
    document = _document(config, corpus, rate, calibration, offered, memory, durability, cpu)
    _print(document)
    path = write_result(NAME, document, config.results_dir)
    print(f"wrote {path}")
    return document


def _document(
    config: OverloadConfig,
    corpus: Corpus,
    rate: float,
    calibration: Mapping[str, Any],
    offered: Offered,
    memory: MemoryPeaks,
    durability: Durability,
    cpu: _CpuSeconds,
) -> dict[str, Any]:
    spans = corpus.measured["otlp"][0].spans
    window = offered.window_s or config.duration_s
    per_s = spans / window
    offered_per_s = spans / config.duration_s
    return {
        "config": {
            "duration_s": config.duration_s,
            "factor": config.factor,
            "payload": config.payload,
            "spans_per_request": spans,
            "max_in_flight": config.max_in_flight,
            "processes": config.processes
            if config.processes is not None
            else "default (one per core, at most 4)",
            "env": dict(config.env),
            "route": "OTLP/HTTP protobuf, HTTP/1.1 keep-alive",
        },
        "corpus": corpus.describe(),
        "sustainable_spans_s": rate,
        "calibration": dict(calibration),
        "offered_spans_s": offered.scheduled * offered_per_s,
        "sent_spans_s": offered.sent * offered_per_s,
        "accepted_spans_s": offered.accepted * per_s,
        "refused_spans_s": offered.refused * per_s,
        "window_s": window,
        "client_cpu_pct": 100.0 * cpu.client / window,
        "daemon_cpu_pct": 100.0 * cpu.daemon / window if cpu.daemon is not None else None,
        "requests": {
            "scheduled": offered.scheduled,
            "not_sent_client_at_max_in_flight": offered.not_sent,
            "sent": offered.sent,
            "accepted": offered.accepted,
            "refused_429_503": offered.refused,
            "refused_with_retry_after": offered.refused_with_retry_after,
            "retry_after_values": dict(offered.retry_after_values),
            "errors": dict(offered.errors),
        },
        "memory": {
            "samples": memory.samples,
            "peak_total_mib": memory.peak_total_bytes / MIB,
            "peak_total_at_s": memory.peak_total_at_s,
            "peak_by_process_mib": {
                name: value / MIB for name, value in sorted(memory.peak_by_process.items())
            },
            "timeline_total_mib": [(at, value / MIB) for at, value in memory.timeline],
        },
        "durability": dataclasses.asdict(durability),
        "timeline": {
            str(second): dict(counts) for second, counts in sorted(offered.per_second.items())
        },
        "definitions": {
            "offered_spans_s": "spans the open loop scheduled / duration (its schedule)",
            "window_s": "first request sent to last reply (the duration plus the last replies)",
            "accepted_spans_s": "spans of requests answered 200 with nothing rejected / window",
            "refused_spans_s": "spans of requests answered 429 or 503 / window",
            "lost_spans": "spans of accepted requests not in the store after SIGKILL",
            "peak_total_mib": "largest sum of VmRSS over the daemon's processes at one sample",
            "client_cpu_pct": "CPU of this process (the load client, on the same machine)",
        },
    }


def _print(document: Mapping[str, Any]) -> None:
    requests, memory = document["requests"], document["memory"]
    durability = document["durability"]
    row: dict[str, object] = {
        "sustainable": round(document["sustainable_spans_s"]),
        "offered": round(document["offered_spans_s"]),
        "accepted": round(document["accepted_spans_s"]),
        "refused": round(document["refused_spans_s"]),
        "429s": requests["refused_429_503"],
        "with Retry-After": requests["refused_with_retry_after"],
        "errors": sum(requests["errors"].values()),
        "not sent": requests["not_sent_client_at_max_in_flight"],
        "peak MiB": memory["peak_total_mib"],
        "lost": durability["lost_spans"],
        "client cpu%": document["client_cpu_pct"],
        "daemon cpu%": document["daemon_cpu_pct"],
    }
    config = document["config"]
    print_table(
        f"Overload: OTLP/HTTP, {config['payload']} spans, {config['factor']:g}x the sustainable "
        f"rate for {document['window_s']:.0f} s (rates in spans/s)",
        [row],
        float_digits=0,
    )
    print_table(
        "Peak resident memory by process (MiB)",
        [memory["peak_by_process_mib"]],
        float_digits=0,
    )


def run(config: OverloadConfig) -> dict[str, Any]:
    return asyncio.run(run_async(config))


def _run_from_bench(config: BenchConfig) -> Mapping[str, Any]:
    """``python -m bench overload``: ``--seconds`` is the flood's duration (60 unless given)."""
    seconds = config.seconds if config.seconds != BenchConfig().seconds else 60.0
    return run(
        OverloadConfig(
            duration_s=seconds,
            start_timeout_s=max(config.start_timeout_s, 120.0),
            results_dir=config.results_dir,
        )
    )


BENCHMARK = Benchmark(name=NAME, description=DESCRIPTION, run=_run_from_bench)


def _env_pair(text: str) -> tuple[str, str]:
    name, equals, value = text.partition("=")
    if not equals or not name.startswith("MCPD_"):
        raise argparse.ArgumentTypeError(f"expected MCPD_NAME=VALUE, got {text!r}")
    return name, value


def build_parser() -> argparse.ArgumentParser:
    defaults = OverloadConfig()
    parser = argparse.ArgumentParser(prog="python -m bench.overload", description=DESCRIPTION)
    parser.add_argument("--duration", type=float, default=defaults.duration_s, help="seconds")
    parser.add_argument(
        "--calibrate", type=float, default=defaults.calibrate_s, help="seconds of calibration"
    )
    parser.add_argument(
        "--rate", type=float, default=None, help="the sustainable spans/s (skips calibration)"
    )
    parser.add_argument("--factor", type=float, default=defaults.factor)
    parser.add_argument("--payload", choices=sorted(SIZES), default=defaults.payload)
    parser.add_argument("--max-in-flight", type=int, default=defaults.max_in_flight)
    parser.add_argument("--templates", type=int, default=defaults.templates)
    parser.add_argument("--spans-per-request", type=int, default=defaults.spans_per_request)
    parser.add_argument("--processes", type=int, default=None)
    parser.add_argument(
        "--env",
        type=_env_pair,
        action="append",
        default=[],
        metavar="MCPD_NAME=VALUE",
        help="a setting of the daemon (repeatable)",
    )
    parser.add_argument("--results-dir", type=Path, default=defaults.results_dir)
    return parser


def config_from_args(args: argparse.Namespace) -> OverloadConfig:
    return OverloadConfig(
        duration_s=args.duration,
        calibrate_s=args.calibrate,
        rate_spans_s=args.rate,
        factor=args.factor,
        payload=args.payload,
        max_in_flight=args.max_in_flight,
        templates=args.templates,
        spans_per_request=args.spans_per_request,
        processes=args.processes,
        env=tuple(args.env),
        results_dir=args.results_dir,
    )


def main(argv: Sequence[str] | None = None) -> int:
    document = run(config_from_args(build_parser().parse_args(argv)))
    return 0 if document["durability"]["lost_spans"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
