"""Read latency at 1M spans: trace list, trace detail and analytics, per trace-store backend.

``python -m bench query [--count N] [--events SPANS]`` or
``python -m bench.query [--backends sqlite,postgres,clickhouse] [--traces N]
[--spans-per-trace N] [--requests N] [--keep-data DIR] ...`` (``--help``).

For each backend:

1. **Load.** :mod:`bench.query.generator` plans ``--traces`` traces (default 100,000) of about
   ``--spans-per-trace`` spans (default 10: 1M spans) over 30 days, plus one trace of 2,000
   spans, and the rows are written straight through ``TraceStore.write_batches`` (whole traces,
   about ``--batch-spans`` spans per call, default 2,000) into a fresh database opened with
   ``open_stores`` exactly as ``mcpd serve`` opens it: SQLite files under a data directory, a
   new PostgreSQL database (dropped afterwards) or ClickHouse in process (chdb). The load time
   and rate are reported but are not the measured figure. ``--keep-data DIR`` keeps the loaded
   data (``DIR/<backend>/``, a named PostgreSQL database) and reuses it when the corpus
   options match.
2. **Store level.** The store is opened again and each question the query service asks is
   timed calling the store directly (no protobuf, no gRPC, no HTTP), ``--requests`` times
   (default 200) after ``--warmup`` unrecorded calls (default 20), one at a time. A question
   that would take longer than ``--budget`` seconds (default 60) is timed fewer times (at
   least once; the count is reported with every figure).
3. **Through the daemon.** A real ``mcpd serve`` (:class:`DaemonProcess`) on that data
   (retention off: the corpus reaches back 30 days, the default window), and
   the same questions as REST calls with httpx (HTTP/1.1 keep-alive, one at a time): what a UI
   sees. The difference to step 2 is the cost of the gateway, gRPC and the protobuf/JSON
   conversion. A request is timed until its answer is received whole; the answer is then
   decoded and checked off the clock (decoding the 3.5 MB detail is the client's time, not the
   server's).

The questions (limit 50 for every list; the default order is newest first):

- ``list_default``: ``GET /v1/api/traces``;
- ``list_env_error``: ``environment=production&status=error`` (about 2 % of traces);
- ``list_model_service``: ``model=claude-haiku-4-5&service_name=support-api`` (a model used by
  some span of the trace, about 10 % of traces);
- ``list_by_cost``: ``order_by=-cost``;
- ``list_page2``: the second page of ``list_default``, with the cursor of the first;
- ``detail_2000``: ``GET /v1/api/traces/{id}`` of the 2,000-span trace (spans only; at store
  level ``TraceStore.trace_detail_json``, the JSON the query service answers);
- ``summary_30d``: ``GET /v1/api/analytics/summary`` over the 30 days;
- ``summary_30d_by_model``: the same with ``group_by=model``;
- ``monitor_error_rate``, ``monitor_latency_p95``, ``monitor_cost``, ``monitor_trace_count``
  (through the daemon only): one evaluation of a monitor of that watch over the 30 days, as the
  evaluation role makes it (:mod:`bench.query.monitors`).

Every answer is checked (status, rows returned, the detail's span count, the summary's trace
count) so a fast wrong answer does not pass for a figure. Latencies are exact percentiles of
every sample (:mod:`bench.harness`). The repeated calls hit a warm cache: this is the latency of
a dashboard on a warm server, not of a cold disk.

Output: a table per backend and ``bench/results/query.json`` with the machine, the corpus, the
load figures and every percentile. Targets (the issue), judged on SQLite through HTTP: trace
list p95 <= 100 ms (every list question), trace detail p95 <= 100 ms.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import gc
import json
import math
import os
import shutil
import sys
import tempfile
import time
import traceback
import uuid
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import httpx
import orjson
import sqlalchemy as sa
from sqlalchemy.engine import make_url

from bench.config import BenchConfig, Benchmark
from bench.harness import (
    RESULTS_DIR,
    DaemonProcess,
    describe_error,
    percentiles,
    print_table,
    write_result,
)
from bench.ingest.targets import storage_env
from bench.query.generator import (
    FILTER_MODEL,
    FILTER_SERVICE,
    Dataset,
    DatasetConfig,
    rfc3339,
)
from bench.query.monitors import MONITOR_QUERIES, monitor_calls
from mcpd.runtime.errors import FailedPrecondition
from mcpd.signals.queries import TraceQuery, Window
from mcpd.storage import Stores, open_stores

NAME = "query"
DESCRIPTION = (
    "trace list / detail / analytics p50-p99 at 1M spans (SQLite, Postgres, ClickHouse), "
    "through mcpd serve and at store level"
)
BACKENDS = ("sqlite", "postgres", "clickhouse")
POSTGRES_URL_ENVS = ("BENCH_POSTGRES_URL", "MCPD_TEST_POSTGRES_URL")
DEFAULT_POSTGRES_URL = "postgresql+psycopg://postgres@127.0.0.1:5432/test"
TARGET_LIST_P95_MS = 100.0
TARGET_DETAIL_P95_MS = 100.0
PAGE = 50
MANIFEST = "manifest.json"
LIST_QUERIES = (
    "list_default",
    "list_env_error",
    "list_model_service",
    "list_by_cost",
    "list_page2",
)
QUERIES = (*LIST_QUERIES, "detail_2000", "summary_30d", "summary_30d_by_model")


def postgres_url_from_env() -> str:
    for name in POSTGRES_URL_ENVS:
        value = os.environ.get(name)
        if value:
            return value
    return DEFAULT_POSTGRES_URL


@dataclasses.dataclass(frozen=True, slots=True)
class QueryConfig:
    backends: tuple[str, ...] = BACKENDS
    traces: int = 100_000
    spans_per_trace: int = 10
    big_trace_spans: int = 2000
    days: int = 30
    seed: int = 0
    requests: int = 200
    warmup: int = 20
    budget_s: float = 60.0
    batch_spans: int = 2000
    keep_data: Path | None = None
    postgres_url: str | None = None
    store_level: bool = True
    http: bool = True
    start_timeout_s: float = 600.0
    results_dir: Path = RESULTS_DIR
    output: str | None = None
    anchor_ns: int | None = None

    def __post_init__(self) -> None:
        unknown = [name for name in self.backends if name not in BACKENDS]
        if unknown or not self.backends:
            raise ValueError(f"backends must be among {', '.join(BACKENDS)}: {unknown}")
        if self.requests < 1 or self.warmup < 0 or self.batch_spans < 1 or self.budget_s <= 0:
            raise ValueError(
                "requests, budget and batch_spans must be positive, warmup not negative"
            )

    def dataset_config(self) -> DatasetConfig:
        return DatasetConfig(
            traces=self.traces,
            spans_per_trace=self.spans_per_trace,
            days=self.days,
            seed=self.seed,
            big_trace_spans=self.big_trace_spans,
            anchor_ns=self.anchor_ns,
        )

    @property
    def result_name(self) -> str:
        return self.output or NAME


# ---------------------------------------------------------------------------------------------
# Figures


@dataclasses.dataclass(slots=True)
class Timing:
    """Latencies of one question at one level (``store`` or ``http``), in milliseconds."""

    count: int = 0
    errors: int = 0
    error_kinds: dict[str, int] = dataclasses.field(default_factory=dict)
    p50_ms: float | None = None
    p95_ms: float | None = None
    p99_ms: float | None = None
    mean_ms: float | None = None
    min_ms: float | None = None
    max_ms: float | None = None
    rows: int | None = None
    check: str | None = None
    """None when the answer looked right, else what was wrong with it."""

    @classmethod
    def of(
        cls, samples_s: Sequence[float], kinds: Counter[str], rows: int | None, check: str | None
    ) -> Timing:
        timing = cls(
            count=len(samples_s),
            errors=kinds.total(),
            error_kinds=dict(sorted(kinds.items())),
            rows=rows,
            check=check,
        )
        if samples_s:
            ms = [value * 1000.0 for value in samples_s]
            timing.p50_ms, timing.p95_ms, timing.p99_ms = percentiles(ms, (50, 95, 99))
            timing.mean_ms = math.fsum(ms) / len(ms)
            timing.min_ms, timing.max_ms = min(ms), max(ms)
        return timing


@dataclasses.dataclass(slots=True)
class LoadFigures:
    reused: bool = False
    spans: int = 0
    traces: int = 0
    batches: int = 0
    seconds: float = 0.0
    write_seconds: float = 0.0
    spans_per_s: float = 0.0
    write_spans_per_s: float = 0.0
    database_bytes: int | None = None


@dataclasses.dataclass(slots=True)
class BackendResult:
    backend: str
    load: LoadFigures = dataclasses.field(default_factory=LoadFigures)
    store: dict[str, Timing] = dataclasses.field(default_factory=dict)
    http: dict[str, Timing] = dataclasses.field(default_factory=dict)
    daemon_startup_s: float | None = None
    wall_s: float = 0.0
    corpus: dict[str, Any] = dataclasses.field(default_factory=dict)
    load_avg_1m: dict[str, float | None] = dataclasses.field(default_factory=dict)
    """The machine's 1-minute load average after each phase (load, store, http): above the
    core count, other work was competing with the measurement."""
    notes: list[str] = dataclasses.field(default_factory=list)

    def rows(self) -> list[dict[str, object]]:
        rows: list[dict[str, object]] = []
        for name in (*QUERIES, *MONITOR_QUERIES):
            store = self.store.get(name)
            http = self.http.get(name)
            if store is None and http is None:
                continue
            overhead = None
            if store and http and store.p50_ms is not None and http.p50_ms is not None:
                overhead = http.p50_ms - store.p50_ms
            rows.append(
                {
                    "query": name,
                    "rows": (http.rows if http and http.rows is not None else None)
                    or (store.rows if store else None),
                    "store p50": store.p50_ms if store else None,
                    "store p95": store.p95_ms if store else None,
                    "store p99": store.p99_ms if store else None,
                    "http p50": http.p50_ms if http else None,
                    "http p95": http.p95_ms if http else None,
                    "http p99": http.p99_ms if http else None,
                    "http-store p50": overhead,
                    "errors": (store.errors if store else 0) + (http.errors if http else 0),
                    "check": _checks(store, http),
                }
            )
        return rows


def _checks(*timings: Timing | None) -> str:
    problems = [timing.check for timing in timings if timing is not None and timing.check]
    return "; ".join(problems) if problems else "ok"


# ---------------------------------------------------------------------------------------------
# Data: load, or reuse what --keep-data kept


@dataclasses.dataclass(slots=True)
class Target:
    """Where one backend's data lives, and what the daemon needs to find it."""

    backend: str
    root: Path
    postgres_url: str | None = None
    database: str | None = None

    @property
    def data_dir(self) -> Path:
        return self.root / "data"

    @property
    def clickhouse_dir(self) -> Path:
        return self.root / "clickhouse"

    @property
    def clickhouse_url(self) -> str | None:
        return f"chdb://{self.clickhouse_dir}" if self.backend == "clickhouse" else None

    def open(self, *, migrate: bool = True) -> Stores:
        return open_stores(
            self.backend,
            data_dir=self.data_dir,
            postgres_url=self.postgres_url,
            clickhouse_url=self.clickhouse_url,
            migrate=migrate,
        )

    def daemon_env(self) -> dict[str, str]:
        env = storage_env(
            self.backend, postgres_url=self.postgres_url, clickhouse_dir=self.clickhouse_dir
        )
        env["MCPD_DATA_DIR"] = str(self.data_dir)
        # The corpus ends where it was generated and reaches 30 days back: the default
        # retention (30 days) would start deleting its oldest traces, from the kept data too.
        env["MCPD_RETENTION_DEFAULT_DAYS"] = "0"
        return env

    def database_bytes(self) -> int | None:
        if self.backend == "postgres":
            if self.postgres_url is None:
                return None
            engine = sa.create_engine(self.postgres_url)
            try:
                with engine.connect() as connection:
                    value = connection.execute(
                        sa.text("SELECT pg_database_size(current_database())")
                    ).scalar_one()
            finally:
                engine.dispose()
            return int(value)
        where = self.data_dir / "trace.db" if self.backend == "sqlite" else self.clickhouse_dir
        return _disk_bytes(where)


def _disk_bytes(path: Path) -> int | None:
    if path.is_file():
        total = path.stat().st_size
        for suffix in ("-wal", "-shm"):
            extra = path.with_name(path.name + suffix)
            if extra.exists():
                total += extra.stat().st_size
        return total
    if path.is_dir():
        return sum(item.stat().st_size for item in path.rglob("*") if item.is_file())
    return None


def _corpus_key(config: DatasetConfig) -> dict[str, Any]:
    """What must match for kept data to be reused (the anchor comes from the kept data)."""
    described = config.describe()
    described.pop("anchor_ns")
    return described


def _admin(url: str) -> sa.Engine:
    return sa.create_engine(url, isolation_level="AUTOCOMMIT")


def _create_database(admin_url: str, name: str) -> str:
    admin = _admin(admin_url)
    try:
        with admin.connect() as connection:
            connection.execute(sa.text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
            connection.execute(sa.text(f'CREATE DATABASE "{name}"'))
    finally:
        admin.dispose()
    return make_url(admin_url).set(database=name).render_as_string(hide_password=False)


def _drop_database(admin_url: str, name: str) -> None:
    admin = _admin(admin_url)
    try:
        with admin.connect() as connection:
            connection.execute(sa.text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    finally:
        admin.dispose()


def _database_exists(admin_url: str, name: str) -> bool:
    admin = _admin(admin_url)
    try:
        with admin.connect() as connection:
            found = connection.execute(
                sa.text("SELECT 1 FROM pg_database WHERE datname = :name"), {"name": name}
            ).first()
    finally:
        admin.dispose()
    return found is not None


def check_postgres(admin_url: str) -> str | None:
    """None when the server answers, else why not."""
    try:
        engine = _admin(admin_url)
        try:
            with engine.connect() as connection:
                connection.execute(sa.text("SELECT 1"))
        finally:
            engine.dispose()
    except Exception as exc:
        return describe_error(exc)
    return None


@contextlib.contextmanager
def prepared(
    backend: str, config: QueryConfig, result: BackendResult
) -> Iterator[tuple[Target, Dataset]]:
    """The backend's data, loaded (or reused from ``--keep-data``), and its corpus; whatever
    is not kept is removed afterwards (the PostgreSQL database dropped)."""
    wanted = config.dataset_config()
    keep = config.keep_data is not None
    root = (
        config.keep_data / backend
        if config.keep_data is not None
        else Path(tempfile.mkdtemp(prefix=f"bench-query-{backend}-"))
    )
    manifest_path = root / MANIFEST
    manifest: dict[str, Any] | None = None
    if keep and manifest_path.exists():
        manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
        if manifest.get("corpus") != _corpus_key(wanted):
            print(f"  {backend}: kept data is another corpus, loading again", flush=True)
            manifest = None
    admin_url = config.postgres_url
    database: str | None = None
    target = Target(backend, root)
    try:
        if backend == "postgres":
            if not admin_url:
                raise RuntimeError("no PostgreSQL URL")
            if manifest is not None:
                database = str(manifest["database"])
                if not _database_exists(admin_url, database):
                    print(f"  postgres: kept database {database} is gone, loading again")
                    manifest = None
            if manifest is None:
                database = (
                    f"mcpd_bench_query_{config.seed}_{config.traces}_{config.spans_per_trace}"
                    if keep
                    else f"mcpd_bench_query_{uuid.uuid4().hex[:12]}"
                )
                target.postgres_url = _create_database(admin_url, database)
            else:
                assert database is not None
                target.postgres_url = (
                    make_url(admin_url).set(database=database).render_as_string(False)
                )
            target.database = database
        if manifest is not None and not _schema_current(target):
            manifest = None
            if backend == "postgres":
                assert admin_url is not None
                assert database is not None
                target.postgres_url = _create_database(admin_url, database)
        if manifest is not None:
            dataset = Dataset(dataclasses.replace(wanted, anchor_ns=int(manifest["anchor_ns"])))
            result.load = LoadFigures(**{**manifest["load"], "reused": True})
            print(
                f"  {backend}: reusing {result.load.spans:,} spans kept in {root} "
                f"(loaded in {result.load.seconds:.0f} s)",
                flush=True,
            )
        else:
            if keep:
                manifest_path.unlink(missing_ok=True)
                for stale in (target.data_dir, target.clickhouse_dir):
                    shutil.rmtree(stale, ignore_errors=True)
            root.mkdir(parents=True, exist_ok=True)
            dataset = Dataset(wanted)
            result.load = load(target, dataset, config.batch_spans)
            result.load.database_bytes = target.database_bytes()
            if keep:
                document = {
                    "corpus": _corpus_key(wanted),
                    "anchor_ns": dataset.end_ns,
                    "database": database,
                    "load": dataclasses.asdict(result.load),
                }
                manifest_path.write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
        yield target, dataset
    finally:
        if not keep:
            if backend == "postgres" and admin_url and database:
                with contextlib.suppress(Exception):
                    _drop_database(admin_url, database)
            shutil.rmtree(root, ignore_errors=True)


def _schema_current(target: Target) -> bool:
    """Whether kept data opens (and migrates) under this checkout's schema; a migration edited
    since the data was loaded (refused as FailedPrecondition) means it must be loaded again."""
    try:
        with target.open():
            return True
    except FailedPrecondition as exc:
        print(f"  {target.backend}: kept data is from an older schema ({exc}), loading again")
        return False


def load(target: Target, dataset: Dataset, batch_spans: int) -> LoadFigures:
    """Write the corpus through ``TraceStore.write_batches``, one batch per call."""
    figures = LoadFigures(traces=len(dataset.plans))
    total = dataset.span_count
    print(
        f"  {target.backend}: loading {total:,} spans in {figures.traces:,} traces "
        f"({batch_spans} spans per write) ...",
        flush=True,
    )
    began = time.perf_counter()
    next_report = 0.1
    with target.open() as stores:
        for batch in dataset.batches(batch_spans):
            written_at = time.perf_counter()
            stores.trace.write_batches([batch])
            figures.write_seconds += time.perf_counter() - written_at
            figures.spans += len(batch.spans)
            figures.batches += 1
            if figures.spans >= next_report * total:
                elapsed = time.perf_counter() - began
                print(
                    f"    {figures.spans:>10,} spans  {elapsed:6.0f} s  "
                    f"{figures.spans / elapsed:8,.0f} spans/s",
                    flush=True,
                )
                next_report += 0.1
    figures.seconds = time.perf_counter() - began
    figures.spans_per_s = figures.spans / figures.seconds if figures.seconds else 0.0
    if figures.write_seconds:
        figures.write_spans_per_s = figures.spans / figures.write_seconds
    print(
        f"  {target.backend}: loaded {figures.spans:,} spans in {figures.seconds:.0f} s "
        f"({figures.spans_per_s:,.0f} spans/s; the store's writes alone "
        f"{figures.write_spans_per_s:,.0f} spans/s)",
        flush=True,
    )
    return figures


# ---------------------------------------------------------------------------------------------
# Measuring


Answer = tuple[int, str | None]
"""Rows in an answer, and None or what is wrong with it."""
Check = Callable[[], Answer]
Call = Callable[[], Answer | Check]
"""One question: returns its Answer, or a Check that works it out after the clock has stopped
(decoding a 3.5 MB body is the client's time, not the server's)."""


def answer_of(result: Answer | Check) -> Answer:
    """The Answer of what a Call returned."""
    return result() if callable(result) else result


def measure(call: Call, *, requests: int, warmup: int, budget_s: float = math.inf) -> Timing:
    """``warmup`` unrecorded calls, then ``requests`` timed calls, one after the other.

    A slow question stops early: the warm-up after a quarter of ``budget_s`` (at least one
    call), the timed calls once ``budget_s`` has passed (at least one call); ``count`` says how
    many were timed. When every warm-up call fails the question is not timed (its error is
    recorded once)."""
    kinds: Counter[str] = Counter()
    rows: int | None = None
    check: str | None = None
    warm_ok = 0
    clock = time.perf_counter
    began = clock()
    for _ in range(max(warmup, 1)):
        try:
            rows, check = answer_of(call())
            warm_ok += 1
        except Exception as exc:
            kinds[describe_error(exc)] += 1
        if clock() - began > budget_s / 4:
            break
    if not warm_ok:
        return Timing.of([], kinds, None, "not timed: " + next(iter(kinds)))
    kinds.clear()
    samples: list[float] = []
    deadline = clock() + budget_s
    for _ in range(requests):
        if samples and clock() > deadline:
            break
        began = clock()
        try:
            result = call()
            elapsed = clock() - began
            rows, problem = answer_of(result)
        except Exception as exc:
            kinds[describe_error(exc)] += 1
            continue
        samples.append(elapsed)
        check = check or problem
    return Timing.of(samples, kinds, rows, check)


def _expect_list(rows: int) -> str | None:
    return None if rows > 0 else "empty page"


def store_calls(stores: Stores, dataset: Dataset) -> dict[str, Call]:
    """The query service's store calls for each question (services/query/analytics.py: a
    summary asks the whole window, then the groups)."""
    store = stores.trace
    project = dataset.config.project
    window = Window(dataset.start_ns, dataset.end_ns)
    big = dataset.config.big_trace_spans

    def listing(query: TraceQuery) -> Call:
        def call() -> Answer:
            page = store.list_traces(project, query)
            return len(page.rows), _expect_list(len(page.rows))

        return call

    def page2() -> Answer | Check:
        first = store.list_traces(project, TraceQuery(limit=PAGE))
        if not first.rows or not first.has_more:
            raise RuntimeError("the first page has no next page")
        last = first.rows[-1]
        query = TraceQuery(limit=PAGE, after=(last["start_time"], last["trace_id"]))
        calls["list_page2"] = listing(query)
        return calls["list_page2"]()

    def detail() -> Answer | Check:
        body = store.trace_detail_json(
            project, dataset.big_trace_id, logs=False, scores=False, feedback=False
        )
        if body is None:
            return 0, "trace not found"
        return lambda: _spans_answer(body, big)

    def summary(group_by: str | None) -> Call:
        def call() -> Answer:
            whole = store.group_figures(project, window, None)
            count = whole[0].count if whole else 0
            problem = None if count == len(dataset.plans) else f"trace_count {count}"
            if group_by is None:
                return count, problem
            groups = store.group_figures(project, window, group_by)
            return len(groups), problem or (None if groups else "no groups")

        return call

    calls: dict[str, Call] = {
        "list_default": listing(TraceQuery(limit=PAGE)),
        "list_env_error": listing(
            TraceQuery(limit=PAGE, environment="production", statuses=("error",))
        ),
        "list_model_service": listing(
            TraceQuery(limit=PAGE, model=FILTER_MODEL, service_name=FILTER_SERVICE)
        ),
        "list_by_cost": listing(TraceQuery(limit=PAGE, order_column="total_cost")),
        "list_page2": page2,
        "detail_2000": detail,
        "summary_30d": summary(None),
        "summary_30d_by_model": summary("model"),
    }
    return calls


def http_calls(client: httpx.Client, dataset: Dataset) -> dict[str, Call]:
    """The REST calls a UI makes for each question."""
    window = {"from": rfc3339(dataset.start_ns), "to": rfc3339(dataset.end_ns)}
    big = dataset.config.big_trace_spans

    def get(path: str, params: Mapping[str, str]) -> bytes:
        """The body of a 200 answer, received whole (its checks decode it with orjson)."""
        response = client.get(path, params=params)
        if response.status_code != 200:
            raise RuntimeError(f"HTTP {response.status_code}: {response.text[:200]}")
        return response.content

    def listing(params: Mapping[str, str]) -> Call:
        def call() -> Check:
            body = get("/v1/api/traces", params)

            def check() -> Answer:
                rows = len(orjson.loads(body).get("traces", []))
                return rows, _expect_list(rows)

            return check

        return call

    def page2() -> Answer | Check:
        first = orjson.loads(get("/v1/api/traces", {"limit": str(PAGE)}))
        cursor = first.get("page", {}).get("next_cursor")
        if not cursor:
            raise RuntimeError("the first page has no next_cursor")
        calls["list_page2"] = listing({"limit": str(PAGE), "cursor": cursor})
        return calls["list_page2"]()

    def detail() -> Check:
        body = get(f"/v1/api/traces/{dataset.big_trace_id}", {})
        return lambda: _spans_answer(body, big)

    def summary(params: Mapping[str, str]) -> Call:
        def call() -> Check:
            body = get("/v1/api/analytics/summary", params)

            def check() -> Answer:
                document = orjson.loads(body)
                count = int(document.get("trace_count", 0))
                problem = None if count == len(dataset.plans) else f"trace_count {count}"
                if "group_by" not in params:
                    return count, problem
                groups = document.get("groups", [])
                return len(groups), problem or (None if groups else "no groups")

            return check

        return call

    calls: dict[str, Call] = {
        "list_default": listing({"limit": str(PAGE)}),
        "list_env_error": listing(
            {"limit": str(PAGE), "environment": "production", "status": "error"}
        ),
        "list_model_service": listing(
            {"limit": str(PAGE), "model": FILTER_MODEL, "service_name": FILTER_SERVICE}
        ),
        "list_by_cost": listing({"limit": str(PAGE), "order_by": "-cost"}),
        "list_page2": page2,
        "detail_2000": detail,
        "summary_30d": summary(window),
        "summary_30d_by_model": summary({**window, "group_by": "model"}),
    }
    return calls


def _dispatch(calls: Mapping[str, Call], name: str) -> Call:
    """Looks the call up each time: list_page2 replaces itself with the page-2 call once its
    first (warm-up) call has fetched page 1 for the cursor."""

    def call() -> Answer | Check:
        return calls[name]()

    return call


def _spans_answer(body: bytes, expected: int) -> Answer:
    """The span count of a TraceDetail body, checked against the trace's."""
    count = len(orjson.loads(body).get("spans", []))
    return count, None if count == expected else f"{count} spans, expected {expected}"


def _run_calls(
    calls: Mapping[str, Call],
    config: QueryConfig,
    level: str,
    backend: str,
    names: Sequence[str] = QUERIES,
) -> dict[str, Timing]:
    timings: dict[str, Timing] = {}
    # The corpus plan and what the run built before holds millions of objects: frozen, so the
    # collections the answers' decoding sets off do not walk them and charge the walk to mcpd.
    gc.freeze()
    for name in names:
        timing = measure(
            _dispatch(calls, name),
            requests=config.requests,
            warmup=config.warmup,
            budget_s=config.budget_s,
        )
        timings[name] = timing
        shown = (
            f"p50 {timing.p50_ms:.1f} p95 {timing.p95_ms:.1f} p99 {timing.p99_ms:.1f} ms, "
            f"rows {timing.rows}"
            if timing.p50_ms is not None
            else "not timed"
        )
        extra = f", errors {timing.error_kinds}" if timing.errors else ""
        extra += f", check: {timing.check}" if timing.check else ""
        print(f"    {backend} {level:<5} {name:<22} {shown}{extra}", flush=True)
    gc.unfreeze()
    return timings


def measure_store(target: Target, dataset: Dataset, config: QueryConfig) -> dict[str, Timing]:
    with target.open() as stores:
        return _run_calls(store_calls(stores, dataset), config, "store", target.backend)


def measure_http(
    target: Target, dataset: Dataset, config: QueryConfig, result: BackendResult
) -> dict[str, Timing]:
    daemon = DaemonProcess(
        extra_env=target.daemon_env(), start_timeout_s=config.start_timeout_s, processes=None
    )
    with daemon:
        result.daemon_startup_s = daemon.startup_s
        print(f"    mcpd serve up in {daemon.startup_s or 0:.1f} s", flush=True)
        with httpx.Client(base_url=daemon.http_url, timeout=300.0, trust_env=False) as client:
            timings = _run_calls(http_calls(client, dataset), config, "http", target.backend)
        with monitor_calls(daemon.grpc_addr, target.data_dir, dataset) as monitors:
            timings |= _run_calls(monitors, config, "http", target.backend, MONITOR_QUERIES)
        return timings


def run_backend(backend: str, config: QueryConfig) -> BackendResult:
    result = BackendResult(backend)
    began = time.perf_counter()
    with prepared(backend, config, result) as (target, dataset):
        result.corpus = dataset.describe()
        result.load_avg_1m["load"] = _load_avg()
        if config.store_level:
            result.store = measure_store(target, dataset, config)
            result.load_avg_1m["store"] = _load_avg()
        if config.http:
            result.http = measure_http(target, dataset, config, result)
            result.load_avg_1m["http"] = _load_avg()
    result.wall_s = time.perf_counter() - began
    return result


# ---------------------------------------------------------------------------------------------
# The run


def verdicts(results: Sequence[BackendResult]) -> dict[str, Any]:
    """The issue's targets on every backend measured through HTTP (binding on SQLite)."""
    out: dict[str, Any] = {}
    for result in results:
        if not result.http:
            continue
        lists = [result.http[name].p95_ms for name in LIST_QUERIES if name in result.http]
        detail = result.http.get("detail_2000")
        worst = None if not lists or None in lists else max(x for x in lists if x is not None)
        out[result.backend] = {
            "list_p95_ms": {
                name: result.http[name].p95_ms for name in LIST_QUERIES if name in result.http
            },
            "list_p95_ms_worst": worst,
            "list_p95_meets_100ms": worst is not None and worst <= TARGET_LIST_P95_MS,
            "detail_p95_ms": detail.p95_ms if detail else None,
            "detail_p95_meets_100ms": bool(
                detail and detail.p95_ms is not None and detail.p95_ms <= TARGET_DETAIL_P95_MS
            ),
            "binding": result.backend == "sqlite",
        }
    return out


def run(config: QueryConfig) -> dict[str, Any]:
    results: list[BackendResult] = []
    not_measured: dict[str, str] = {}
    for backend in config.backends:
        if backend == "postgres":
            if not config.postgres_url:
                not_measured[backend] = "no PostgreSQL URL"
                continue
            problem = check_postgres(config.postgres_url)
            if problem:
                not_measured[backend] = f"PostgreSQL unreachable: {problem}"
                continue
        print(f"--- {backend}", flush=True)
        try:
            results.append(run_backend(backend, config))
        except Exception as exc:
            traceback.print_exc()
            not_measured[backend] = describe_error(exc)
    print()
    for result in results:
        load_figures = result.load
        how = "reused" if load_figures.reused else "loaded"
        print_table(
            f"{result.backend}: {load_figures.spans:,} spans, {load_figures.traces:,} traces "
            f"({how}; load {load_figures.seconds:.0f} s, {load_figures.spans_per_s:,.0f} "
            f"spans/s); {config.requests} requests per query, ms",
            result.rows(),
            float_digits=1,
        )
        busy = {phase: value for phase, value in result.load_avg_1m.items() if value is not None}
        cores = os.cpu_count() or 1
        if any(value > cores for value in busy.values()):
            shown = ", ".join(f"{phase} {value:.1f}" for phase, value in busy.items())
            print(f"note: load average above the {cores} cores ({shown}): figures are pessimistic")
    for backend, reason in not_measured.items():
        print(f"not measured: {backend}: {reason}")
    judged = verdicts(results)
    for backend, verdict in judged.items():
        print(
            f"{backend}: list p95 worst {_ms(verdict['list_p95_ms_worst'])} "
            f"(target {TARGET_LIST_P95_MS:g}), detail p95 {_ms(verdict['detail_p95_ms'])} "
            f"(target {TARGET_DETAIL_P95_MS:g})"
            + ("" if verdict["binding"] else " [not the embedded default]")
        )
    corpus = results[0].corpus if results else config.dataset_config().describe()
    document: dict[str, Any] = {
        "config": {
            "backends": list(config.backends),
            "requests": config.requests,
            "warmup": config.warmup,
            "budget_s": config.budget_s,
            "batch_spans": config.batch_spans,
            "page_size": PAGE,
            "kept_data": config.keep_data is not None,
            "client": "this process, one request at a time (httpx, HTTP/1.1 keep-alive)",
        },
        "corpus": {
            key: value
            for key, value in corpus.items()
            if key not in ("anchor_ns", "window_start", "window_end", "big_trace_id")
        },
        "queries": {
            "list_default": "GET /v1/api/traces?limit=50 (newest first)",
            "list_env_error": "environment=production&status=error&limit=50",
            "list_model_service": (f"model={FILTER_MODEL}&service_name={FILTER_SERVICE}&limit=50"),
            "list_by_cost": "order_by=-cost&limit=50",
            "list_page2": "limit=50&cursor=<next_cursor of list_default>",
            "detail_2000": "GET /v1/api/traces/{id} of the 2,000-span trace",
            "summary_30d": "GET /v1/api/analytics/summary?from=&to= (30 days)",
            "summary_30d_by_model": "the same with group_by=model",
            "store_level": (
                "the TraceStore calls the query service makes (list_traces, trace_records, "
                "group_figures: the whole window, then the groups), in process"
            ),
        },
        "results": {result.backend: dataclasses.asdict(result) for result in results},
        "targets": {
            "list_p95_ms": TARGET_LIST_P95_MS,
            "detail_p95_ms": TARGET_DETAIL_P95_MS,
            "judged_on": "sqlite, through HTTP",
        },
        "verdicts": judged,
        "not_measured": not_measured,
    }
    path = write_result(config.result_name, document, config.results_dir)
    print(f"wrote {path}")
    return document


def _load_avg() -> float | None:
    return os.getloadavg()[0] if hasattr(os, "getloadavg") else None


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f} ms"


def from_bench_config(config: BenchConfig) -> QueryConfig:
    """``python -m bench query``: ``--count`` is requests per question, ``--events`` the
    corpus size in spans (traces of ten spans); every backend, PostgreSQL from the env."""
    defaults = QueryConfig()
    spans = config.events
    return QueryConfig(
        traces=max(2, spans // defaults.spans_per_trace) if spans else defaults.traces,
        requests=config.count or defaults.requests,
        start_timeout_s=max(config.start_timeout_s, defaults.start_timeout_s),
        results_dir=config.results_dir,
        postgres_url=postgres_url_from_env(),
    )


def _run_from_bench(config: BenchConfig) -> Mapping[str, Any]:
    return run(from_bench_config(config))


BENCHMARK = Benchmark(name=NAME, description=DESCRIPTION, run=_run_from_bench)


# ---------------------------------------------------------------------------------------------
# CLI


def _backends(text: str) -> tuple[str, ...]:
    names = tuple(dict.fromkeys(part.strip() for part in text.split(",") if part.strip()))
    unknown = [name for name in names if name not in BACKENDS]
    if unknown or not names:
        raise argparse.ArgumentTypeError(f"choose among {', '.join(BACKENDS)}: {text!r}")
    return names


def build_parser() -> argparse.ArgumentParser:
    defaults = QueryConfig()
    parser = argparse.ArgumentParser(
        prog="python -m bench.query",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--backends",
        type=_backends,
        default=defaults.backends,
        help="comma-separated: sqlite,postgres,clickhouse (default all three)",
    )
    parser.add_argument("--traces", type=int, default=defaults.traces)
    parser.add_argument("--spans-per-trace", type=int, default=defaults.spans_per_trace)
    parser.add_argument("--big-trace-spans", type=int, default=defaults.big_trace_spans)
    parser.add_argument("--days", type=int, default=defaults.days)
    parser.add_argument("--seed", type=int, default=defaults.seed)
    parser.add_argument("--requests", type=int, default=defaults.requests)
    parser.add_argument("--warmup", type=int, default=defaults.warmup)
    parser.add_argument(
        "--budget",
        type=float,
        default=defaults.budget_s,
        metavar="SECONDS",
        help="time limit of one question at one level: a slower question is timed fewer than "
        f"--requests times (default {defaults.budget_s:g})",
    )
    parser.add_argument("--batch-spans", type=int, default=defaults.batch_spans)
    parser.add_argument(
        "--keep-data",
        type=Path,
        default=None,
        metavar="DIR",
        help="keep the loaded data under DIR (and a named PostgreSQL database) and reuse it",
    )
    parser.add_argument(
        "--postgres-url",
        default=postgres_url_from_env(),
        help="admin URL of a PostgreSQL server (default $BENCH_POSTGRES_URL, "
        f"$MCPD_TEST_POSTGRES_URL, else {DEFAULT_POSTGRES_URL})",
    )
    parser.add_argument("--no-store-level", action="store_true", help="skip the in-process timing")
    parser.add_argument("--no-http", action="store_true", help="skip the timing through mcpd")
    parser.add_argument("--start-timeout", type=float, default=defaults.start_timeout_s)
    parser.add_argument("--results-dir", type=Path, default=defaults.results_dir)
    parser.add_argument("--output", default=None, help="result name (default query)")
    return parser


def config_from_args(args: argparse.Namespace) -> QueryConfig:
    return QueryConfig(
        backends=args.backends,
        traces=args.traces,
        spans_per_trace=args.spans_per_trace,
        big_trace_spans=args.big_trace_spans,
        days=args.days,
        seed=args.seed,
        requests=args.requests,
        warmup=args.warmup,
        budget_s=args.budget,
        batch_spans=args.batch_spans,
        keep_data=args.keep_data,
        postgres_url=args.postgres_url,
        store_level=not args.no_store_level,
        http=not args.no_http,
        start_timeout_s=args.start_timeout,
        results_dir=args.results_dir,
        output=args.output,
    )


def main(argv: Sequence[str] | None = None) -> int:
    config = config_from_args(build_parser().parse_args(argv))
    document = run(config)
    return 1 if document["not_measured"] and not document["results"] else 0


if __name__ == "__main__":
    sys.exit(main())
