"""CPU per span of each stage of OTLP ingest, in one process, without servers.

``python -m bench ingest_stages`` (part of ``make bench``) or ``python -m bench.ingest.stages
[--payload 1kb 10kb] [--requests N] [--per-transaction K]``

The end-to-end bench (:mod:`bench.ingest.run`) gives rates that move from run to run on a
shared machine, and folds every cost into one figure. This one feeds the bench's OTLP
requests (the same corpus, ids renumbered per request) through the real ingest code on an
embedded SQLite trace store opened as ``mcpd serve`` opens it, and charges the process CPU time
(``time.process_time``) of each stage to it:

- **decode**: ``ExportTraceServiceRequest.FromString`` of the request bytes;
- **map**: OTLP to span rows (``services.ingest.otlp.map_traces``);
- **prepare**: validation, redaction, pricing and sampling (``IngestPipeline.prepare``);
- **bind**: what the SQL store computes before its transaction (``bind_batches``: the rows'
  parameters and JSON texts, each span's rendered head and search text, new traces' projections);
- **write**: the transaction (``TraceStore.write_batches`` less its binding, measured apart on
  the same batches): the upserts, the search index, the sessions of the written traces (their
  follower, ``TraceSessions``, prepares before the transaction and writes in it, as in ``mcpd
  serve``), the commit and the checkpoints it triggers.

``per_transaction`` requests go into one transaction, as the group commit does under load. The
HTTP or gRPC front is not in these figures. Each payload is measured twice by default
(``--sessions both``): with every span carrying its trace's session id, so each trace becomes a
turn of a session, and with no session ids, which leaves the session read model out; the
difference is what keeping sessions from traces costs. The last line is what a target rate
leaves per span on this machine: its usable cores divided by the rate (every stage, and the
front, must fit in it together).

Output: a table per payload and way, and ``bench/results/ingest_stages.json``.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import secrets
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, ParamSpec, TypeVar

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from bench.config import BenchConfig, Benchmark
from bench.harness import RESULTS_DIR, print_table, write_result
from bench.ingest.spans import MEASURED_SERVICE, SIZES, Corpus, build_corpus
from bench.ingest.targets import count_mcpd_spans
from mcpd.aspects import AspectCatalogues, AspectConfig
from mcpd.auth import ALL_SCOPES
from mcpd.auth.principal import ANONYMOUS, Principal, PrincipalKind
from mcpd.pricing import load_price_book
from mcpd.runtime.clock import SystemClock
from mcpd.runtime.config import IngestSettings
from mcpd.signals.batch import SignalBatch
from mcpd.storage.factory import open_stores
from mcpd.storage.sql import signals
from mcpd.storage.sql.dialect import SqlDialect
from services.ingest import (
    Admission,
    BatchWriter,
    IngestPipeline,
    LabelCardinality,
    ProjectPolicies,
    RecordLimits,
    TailSampler,
    TraceSessions,
)
from services.ingest.otlp import map_traces

NAME = "ingest_stages"
STAGES = ("decode", "map", "prepare", "bind", "write")
PROJECT = "default"
TARGET_SPANS_PER_S = 20_000
DEFAULT_REQUESTS = 48
DEFAULT_PER_TRANSACTION = 4
# --sessions: whether the corpus's spans carry session ids.
SESSIONS = {"both": (True, False), "on": (True,), "off": (False,)}
DESCRIPTION = (
    "CPU per span of each stage of OTLP ingest (decode, map, prepare, bind, write) on the "
    "embedded SQLite store, one process, no servers"
)

_T = TypeVar("_T")
_P = ParamSpec("_P")


@dataclasses.dataclass(frozen=True, slots=True)
class StageFigures:
    """CPU microseconds per span of each stage, for `spans` spans of one payload."""

    payload: str
    sessions: bool
    spans: int
    stored: int
    per_span_us: dict[str, float]

    @property
    def total_us(self) -> float:
        return sum(self.per_span_us.values())

    def rows(self) -> list[dict[str, object]]:
        total = self.total_us
        return [
            {"stage": stage, "us/span": us, "share %": 100.0 * us / total}
            for stage, us in self.per_span_us.items()
        ] + [{"stage": "total", "us/span": total, "share %": 100.0}]

    def to_dict(self) -> dict[str, Any]:
        return {
            "payload": self.payload,
            "sessions": self.sessions,
            "spans": self.spans,
            "stored": self.stored,
            "per_span_us": self.per_span_us,
            "total_us": self.total_us,
            "spans_per_cpu_s": 1e6 / self.total_us,
        }


class _Clock:
    """Process CPU seconds charged to named stages."""

    def __init__(self) -> None:
        self.spent = dict.fromkeys(STAGES, 0.0)

    def timed(self, stage: str, work: Callable[_P, _T], *args: _P.args, **kwargs: _P.kwargs) -> _T:
        start = time.process_time()
        result = work(*args, **kwargs)
        self.spent[stage] += time.process_time() - start
        return result


def measure(
    corpus: Corpus, *, sessions: bool, requests: int, per_transaction: int, data_dir: Path
) -> StageFigures:
    """Run `requests` OTLP requests of `corpus` (built with `sessions` or without) through every
    stage, on a new trace store in `data_dir`; see the module docstring."""
    templates = corpus.measured["otlp"]
    clock = SystemClock()
    stores = open_stores("sqlite", data_dir=data_dir, postgres_url=None, clickhouse_url=None)
    TraceSessions(stores.trace, stores.sessions)
    try:
        policies = ProjectPolicies(
            stores.control,
            key=secrets.token_bytes(32),
            book=load_price_book(),
            monotonic=clock.monotonic,
        )
        pipeline = IngestPipeline(
            policies=policies,
            writer=BatchWriter(stores.trace, monotonic=clock.monotonic),
            clock=clock,
            tail=TailSampler(stores.trace, policies, clock),
            label_values_seen=LabelCardinality(stores.trace, monotonic=clock.monotonic).values_seen,
            aspects=AspectCatalogues(stores.control, AspectConfig(), clock, ttl_s=5.0).get,
            sketch_key=secrets.token_bytes(32),
            limits=RecordLimits.from_settings(IngestSettings()),
            # Requests are prepared here one by one, never admitted.
            admission=Admission(1),
        )
        principal = Principal(
            kind=PrincipalKind.ANONYMOUS,
            audit_id=ANONYMOUS,
            scopes=ALL_SCOPES,
            projects=frozenset({PROJECT}),
        )
        spent = _Clock()
        spans = 0
        group: list[SignalBatch] = []
        for number in range(requests):
            body = templates[number % len(templates)].stamp(number + 1)
            request = spent.timed("decode", ExportTraceServiceRequest.FromString, body)
            incoming = spent.timed("map", map_traces, request)
            prepared = spent.timed("prepare", pipeline.prepare, incoming, principal)
            if prepared.errors:
                raise AssertionError(f"the corpus was refused: {prepared.errors[0].message}")
            spans += len(prepared.batch.spans)
            group.append(prepared.batch)
            if len(group) == per_transaction or number == requests - 1:
                _write(spent, stores.trace.write_batches, group)
                group = []
    finally:
        stores.close()
    stored = count_mcpd_spans(
        "sqlite", MEASURED_SERVICE, data_dir=data_dir, postgres_url=None, clickhouse_dir=data_dir
    )
    if stored != spans:
        raise AssertionError(f"{spans} spans were written but the store holds {stored}")
    return StageFigures(
        payload=corpus.payload,
        sessions=sessions,
        spans=spans,
        stored=stored,
        per_span_us={stage: 1e6 * seconds / spans for stage, seconds in spent.spent.items()},
    )


def _write(
    spent: _Clock,
    write_batches: Callable[[Sequence[SignalBatch]], list[bool]],
    group: list[SignalBatch],
) -> None:
    # The store binds inside write_batches; binding is pure, so it is timed apart on the same
    # batches and the write is charged the rest.
    start = time.process_time()
    signals.bind_batches(SqlDialect.SQLITE, group)
    bound = time.process_time()
    written = write_batches(group)
    done = time.process_time()
    spent.spent["bind"] += bound - start
    spent.spent["write"] += (done - bound) - (bound - start)
    if not all(written):
        raise AssertionError("a batch of fresh ids was reported as a replay")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m bench.ingest.stages", description=DESCRIPTION)
    parser.add_argument("--payload", nargs="+", choices=sorted(SIZES), default=["1kb", "10kb"])
    parser.add_argument(
        "--requests", type=int, default=DEFAULT_REQUESTS, help="requests of 512 spans each"
    )
    parser.add_argument("--per-transaction", type=int, default=DEFAULT_PER_TRANSACTION)
    parser.add_argument(
        "--sessions",
        choices=sorted(SESSIONS),
        default="both",
        help="spans with session ids, without, or each way in turn",
    )
    parser.add_argument("--results-dir", type=Path, default=RESULTS_DIR)
    parser.add_argument("--output", default=NAME)
    return parser


def run(
    payloads: Sequence[str] = ("1kb", "10kb"),
    *,
    sessions: Sequence[bool] = (True, False),
    requests: int = DEFAULT_REQUESTS,
    per_transaction: int = DEFAULT_PER_TRANSACTION,
    results_dir: Path = RESULTS_DIR,
    output: str = NAME,
) -> dict[str, Any]:
    """Measure every payload, print a table each and write the result; return its document."""
    cores = len(os.sched_getaffinity(0))
    budget = cores * 1e6 / TARGET_SPANS_PER_S
    figures: list[StageFigures] = []
    for payload in payloads:
        for with_sessions in sessions:
            with tempfile.TemporaryDirectory(prefix="mcpd-stages-") as data_dir:
                found = measure(
                    build_corpus(payload, sessions=with_sessions),
                    sessions=with_sessions,
                    requests=requests,
                    per_transaction=per_transaction,
                    data_dir=Path(data_dir),
                )
            figures.append(found)
            kept = "sessions kept" if with_sessions else "no session ids"
            title = f"Ingest stages, {payload}, {kept}, {found.spans} spans (CPU per span)"
            print_table(title, found.rows())
    print(
        f"{TARGET_SPANS_PER_S:,} spans/s on {cores} cores leaves {budget:.0f} us of CPU per span "
        "for every stage and the front together."
    )
    document: dict[str, Any] = {
        "config": {"requests": requests, "per_transaction": per_transaction},
        "target": {"spans_per_s": TARGET_SPANS_PER_S, "cores": cores, "budget_us": budget},
        "results": [found.to_dict() for found in figures],
    }
    path = write_result(output, document, results_dir)
    print(f"wrote {path}")
    return document


def _run_from_bench(config: BenchConfig) -> Mapping[str, Any]:
    return run(results_dir=config.results_dir)


BENCHMARK = Benchmark(name=NAME, description=DESCRIPTION, run=_run_from_bench)


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    run(
        args.payload,
        sessions=SESSIONS[args.sessions],
        requests=args.requests,
        per_transaction=args.per_transaction,
        results_dir=args.results_dir,
        output=args.output,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
