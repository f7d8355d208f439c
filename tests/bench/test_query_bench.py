"""``bench/query``: the trace corpus (deterministic, complete rows, realistic variety, one big
trace), its batches, the figures, the CLI, and the bench end to end at a tiny scale (store
level in process; through a real ``mcpd serve`` under the ``e2e`` marker)."""

from __future__ import annotations

import hashlib
import json
import re
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from bench.__main__ import BENCHMARKS
from bench.__main__ import build_parser as bench_parser
from bench.config import BenchConfig
from bench.query.generator import (
    DAY_NS,
    FILTER_MODEL,
    FILTER_SERVICE,
    MODELS,
    Dataset,
    DatasetConfig,
    json_size,
)
from bench.query.monitors import MONITOR_QUERIES
from bench.query.run import (
    LIST_QUERIES,
    QUERIES,
    QueryConfig,
    Target,
    Timing,
    answer_of,
    build_parser,
    config_from_args,
    from_bench_config,
    load,
    measure,
    run,
    store_calls,
)
from tests.libs.signals.samples import span as sample_span

ANCHOR = 1_767_225_600 * 1_000_000_000  # 2026-01-01T00:00:00Z
SMALL = DatasetConfig(traces=2_000, spans_per_trace=10, big_trace_spans=300, anchor_ns=ANCHOR)


@pytest.fixture(scope="module")
def dataset() -> Dataset:
    return Dataset(SMALL)


@pytest.fixture(scope="module")
def traces(dataset: Dataset) -> list[list[dict[str, Any]]]:
    return [[dict(row) for row in spans] for spans in dataset.traces()]


def _digest(rows: list[list[dict[str, Any]]]) -> str:
    text = json.dumps(rows, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def test_same_config_same_rows_other_seed_other_rows(traces: list[list[dict[str, Any]]]) -> None:
    config = DatasetConfig(traces=300, big_trace_spans=50, anchor_ns=ANCHOR)
    first = [[dict(row) for row in spans] for spans in Dataset(config).traces()]
    again = [[dict(row) for row in spans] for spans in Dataset(config).traces()]
    assert _digest(first) == _digest(again)
    other = Dataset(DatasetConfig(traces=300, big_trace_spans=50, anchor_ns=ANCHOR, seed=1))
    assert _digest([[dict(row) for row in spans] for spans in other.traces()]) != _digest(first)


def test_sizes_are_exact(dataset: Dataset, traces: list[list[dict[str, Any]]]) -> None:
    assert len(traces) == SMALL.traces
    total = sum(len(spans) for spans in traces)
    assert total == dataset.span_count == (SMALL.traces - 1) * 10 + 300
    counts = Counter(len(spans) for spans in traces)
    assert counts[300] == 1
    assert min(counts) >= 4
    assert max(length for length in counts if length != 300) <= 16
    big = next(spans for spans in traces if len(spans) == 300)
    assert big[0]["trace_id"] == dataset.big_trace_id


def test_rows_are_complete_and_well_formed(
    dataset: Dataset, traces: list[list[dict[str, Any]]]
) -> None:
    keys = set(sample_span("x"))
    trace_ids: set[str] = set()
    for spans in traces:
        root, *children = spans
        assert root["is_root"]
        assert root["parent_span_id"] is None
        assert root["kind"] in ("agent_run", "workflow_run")
        ids = {span["span_id"] for span in spans}
        assert len(ids) == len(spans)
        trace_id = root["trace_id"]
        assert re.fullmatch("[0-9a-f]{32}", trace_id)
        assert trace_id not in trace_ids
        trace_ids.add(trace_id)
        for span in spans:
            assert set(span) == keys
            assert span["trace_id"] == trace_id
            assert span["project"] == "default"
            assert re.fullmatch("[0-9a-f]{16}", span["span_id"])
            assert dataset.start_ns <= span["start_time"] < span["end_time"]
            assert span["duration_ns"] == span["end_time"] - span["start_time"]
            assert span["received_at"] > span["end_time"]
        for child in children:
            assert not child["is_root"]
            assert child["parent_span_id"] in ids
            assert root["start_time"] < child["start_time"]
            assert child["end_time"] < root["end_time"]
        assert children[-1]["kind"] == "model_inference"
    starts = [spans[0]["start_time"] for spans in traces]
    assert starts == sorted(starts)
    assert min(starts) >= dataset.start_ns
    assert max(starts) < dataset.end_ns
    assert dataset.end_ns - dataset.start_ns == 30 * DAY_NS


def test_realistic_variety(traces: list[list[dict[str, Any]]]) -> None:
    spans = [span for trace in traces for span in trace]
    kinds = Counter(span["kind"] for span in spans)
    assert {"agent_run", "model_inference", "tool_call", "retrieval", "mcp_tool_call"} <= set(kinds)
    assert kinds["model_inference"] / len(spans) > 0.3
    models = [span for span in spans if span["kind"] == "model_inference"]
    for span in models[:500]:
        provider, _, _ = MODELS[span["model"]]
        assert span["provider"] == provider
        assert span["total_tokens"] == span["input_tokens"] + span["output_tokens"]
        assert span["total_cost"] == pytest.approx(span["input_cost"] + span["output_cost"])
        assert span["cost_currency"] == "USD"
        assert span["total_cost"] > 0
    assert {span["model"] for span in models} == set(MODELS)
    roots = [trace[0] for trace in traces]
    errors = sum(root["status"] == "error" for root in roots)
    assert 0.015 < errors / len(roots) < 0.05
    for trace in traces:
        failed = [span for span in trace[1:] if span["status"] == "error"]
        assert (trace[0]["status"] == "error") == bool(failed)
        assert all(span["error"] and span["error"]["message"] for span in failed)
    assert len({root["service_name"] for root in roots}) == 5
    environments = Counter(root["environment"] for root in roots)
    assert set(environments) == {"production", "staging", "development"}
    assert 0.6 < environments["production"] / len(roots) < 0.8
    users = {root["user_id"] for root in roots} - {None}
    assert users
    assert all(re.fullmatch("hmac-sha256:[0-9a-f]{64}", user) for user in users)
    sessions = Counter(root["session_id"] for root in roots if root["session_id"])
    assert max(sessions.values()) > 1
    assert len(sessions) > 50
    assert any(root["tags"] for root in roots)
    assert any(not root["tags"] for root in roots)
    # The filtered list's pair matches a useful slice, neither empty nor everything.
    matching = sum(
        trace[0]["service_name"] == FILTER_SERVICE
        and any(span["model"] == FILTER_MODEL for span in trace)
        for trace in traces
    )
    assert 0.03 < matching / len(traces) < 0.3


def test_inputs_and_outputs_are_200_to_800_bytes(traces: list[list[dict[str, Any]]]) -> None:
    sizes = [
        json_size(span[field])
        for trace in traces[:400]
        for span in trace
        for field in ("input", "output")
        if span[field] is not None
    ]
    assert min(sizes) >= 200
    assert max(sizes) <= 800
    assert 350 < sum(sizes) / len(sizes) < 550


def test_batches_hold_whole_traces(dataset: Dataset) -> None:
    batches = list(dataset.batches(500))
    assert sum(len(batch.spans) for batch in batches) == dataset.span_count
    seen: set[str] = set()
    for batch in batches:
        assert batch.key_project == "default"
        assert batch.ingest_key is None
        assert batch.received_at == max(span["received_at"] for span in batch.spans)
        ids = {span["trace_id"] for span in batch.spans}
        assert not ids & seen
        seen |= ids
        assert len(batch.spans) <= 500 or len(ids) == 1


def test_config_validation() -> None:
    with pytest.raises(ValueError, match="traces"):
        DatasetConfig(traces=1)
    with pytest.raises(ValueError, match="spans_per_trace"):
        DatasetConfig(spans_per_trace=1)
    with pytest.raises(ValueError, match="backends"):
        QueryConfig(backends=("mysql",))
    assert DatasetConfig().resolved().anchor_ns is not None


def test_timing_figures() -> None:
    samples = [n / 1000 for n in range(1, 101)]
    timing = Timing.of(samples, Counter({"boom": 2}), 50, None)
    assert timing.count == 100
    assert timing.errors == 2
    assert timing.p50_ms == pytest.approx(50.5)
    assert timing.p95_ms == pytest.approx(95.05)
    assert timing.max_ms == pytest.approx(100.0)

    def failing() -> tuple[int, str | None]:
        raise NotImplementedError("list_traces")

    untimed = measure(failing, requests=5, warmup=2)
    assert untimed.count == 0
    assert untimed.p95_ms is None
    assert untimed.check == "not timed: NotImplementedError: list_traces"
    calls = iter(range(100))
    timed = measure(lambda: (next(calls), None), requests=5, warmup=2)
    assert timed.count == 5
    assert timed.rows == 6
    assert timed.check is None

    def slow() -> tuple[int, str | None]:
        time.sleep(0.02)
        return 1, None

    budgeted = measure(slow, requests=1000, warmup=1000, budget_s=0.1)
    assert 1 <= budgeted.count <= 10

    def checked_later() -> Callable[[], tuple[int, str | None]]:
        def check() -> tuple[int, str | None]:
            time.sleep(0.2)  # decoding a big answer: the client's time, off the clock
            return 7, "seven"

        return check

    deferred = measure(checked_later, requests=2, warmup=1)
    assert (deferred.count, deferred.rows, deferred.check) == (2, 7, "seven")
    assert deferred.max_ms is not None
    assert deferred.max_ms < 100


def test_registered_and_configured_from_the_common_cli() -> None:
    assert "query" in BENCHMARKS
    assert bench_parser().parse_args(["query", "--count", "30"]).names == ["query"]
    config = from_bench_config(BenchConfig(count=30, events=50_000))
    assert config.requests == 30
    assert config.traces == 5_000
    assert config.backends == ("sqlite", "postgres", "clickhouse")
    own = config_from_args(
        build_parser().parse_args(
            ["--backends", "sqlite,clickhouse", "--traces", "500", "--keep-data", "/tmp/x"]
        )
    )
    assert own.backends == ("sqlite", "clickhouse")
    assert own.traces == 500
    assert own.keep_data == Path("/tmp/x")
    with pytest.raises(SystemExit):
        build_parser().parse_args(["--backends", "sqlite,oracle"])


def _tiny(tmp_path: Path, **overrides: Any) -> QueryConfig:
    settings: dict[str, Any] = {
        "backends": ("sqlite",),
        "traces": 60,
        "spans_per_trace": 6,
        "big_trace_spans": 40,
        "requests": 3,
        "warmup": 1,
        "batch_spans": 100,
        "results_dir": tmp_path / "results",
        "start_timeout_s": 300.0,
    }
    settings.update(overrides)
    return QueryConfig(**settings)


def test_store_calls_answer_every_question(tmp_path: Path) -> None:
    config = _tiny(tmp_path)
    data = Dataset(config.dataset_config())
    target = Target("sqlite", tmp_path / "sqlite")
    figures = load(target, data, config.batch_spans)
    assert figures.spans == data.span_count
    assert figures.traces == 60
    assert figures.batches > 1
    with target.open() as stores:
        calls = store_calls(stores, data)
        answers = {name: answer_of(calls[name]()) for name in QUERIES}
    assert answers["detail_2000"] == (40, None)
    assert answers["summary_30d"] == (60, None)
    assert answers["list_default"] == (50, None)
    assert answers["list_page2"] == (10, None)
    for name in LIST_QUERIES:
        assert answers[name][1] is None, name


def test_store_level_end_to_end_with_kept_data(tmp_path: Path) -> None:
    config = _tiny(tmp_path, http=False, keep_data=tmp_path / "kept")
    document = run(config)
    assert document["not_measured"] == {}
    sqlite = document["results"]["sqlite"]
    assert not sqlite["load"]["reused"]
    assert sqlite["load"]["spans"] == 59 * 6 + 40
    for name in QUERIES:
        assert sqlite["store"][name]["count"] == 3, name
        assert sqlite["store"][name]["check"] is None, name
    saved = json.loads((tmp_path / "results" / "query.json").read_text())
    assert saved["benchmark"] == "query"
    assert "cpu_model" in saved["machine"]
    again = run(config)
    assert again["results"]["sqlite"]["load"]["reused"]


@pytest.mark.e2e
@pytest.mark.timeout(900)
def test_through_the_daemon(tmp_path: Path) -> None:
    document = run(_tiny(tmp_path))
    sqlite = document["results"]["sqlite"]
    assert sqlite["daemon_startup_s"] is not None
    for name in (*QUERIES, *MONITOR_QUERIES):
        http = sqlite["http"][name]
        assert http["count"] == 3, (name, http)
        assert http["errors"] == 0, (name, http)
        assert http["check"] is None, (name, http)
    # A monitor reads every run of the corpus's 30 days.
    assert sqlite["http"]["monitor_trace_count"]["rows"] == 60
    assert "sqlite" in document["verdicts"]
