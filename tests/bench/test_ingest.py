"""``bench/ingest`` without servers: the span generator, the id stamping, the case matrix, the
figures of one case and the profile summary. Nothing is timed."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2
from opentelemetry.proto.trace.v1 import trace_pb2

from bench.__main__ import build_parser as bench_parser
from bench.config import BenchConfig
from bench.ingest import profile, stages
from bench.ingest.load import LoadOutcome, Stream
from bench.ingest.run import (
    CaseResult,
    IngestConfig,
    all_cases,
    build_parser,
    from_bench_config,
    select_cases,
)
from bench.ingest.spans import MEASURED_SERVICE, WARMUP_SERVICE, Corpus, build_corpus
from bench.registry import BENCHMARKS


@pytest.fixture(scope="module")
def corpus() -> Corpus:
    return build_corpus("1kb", templates=2, warmup_templates=1, spans_per_request=64, seed=3)


def _otlp_spans(body: bytes) -> list[trace_pb2.Span]:
    request = trace_service_pb2.ExportTraceServiceRequest.FromString(body)
    return [
        span
        for resource in request.resource_spans
        for scope in resource.scope_spans
        for span in scope.spans
    ]


def test_spans_are_genai_shaped_and_sized(corpus: Corpus) -> None:
    spans = _otlp_spans(corpus.measured["otlp"][0].body)
    assert len(spans) == 64
    operations = Counter(
        next(a.value.string_value for a in span.attributes if a.key == "gen_ai.operation.name")
        for span in spans
    )
    assert set(operations) == {"invoke_agent", "chat", "execute_tool"}
    chat = next(
        span for span in spans if any(a.value.string_value == "chat" for a in span.attributes)
    )
    keys = {a.key for a in chat.attributes}
    assert {
        "gen_ai.usage.input_tokens",
        "gen_ai.usage.output_tokens",
        "gen_ai.usage.cache_read.input_tokens",
        "gen_ai.usage.reasoning.output_tokens",
        "gen_ai.input.messages",
        "gen_ai.output.messages",
    } <= keys
    sizes = corpus.otlp_span_bytes
    assert 1000 <= sum(sizes) / len(sizes) <= 1100
    assert max(sizes) < 1200


def test_native_twin_carries_the_same_spans(corpus: Corpus) -> None:
    document = json.loads(corpus.measured["native"][0].body)
    otlp = _otlp_spans(corpus.measured["otlp"][0].body)
    assert [span["span_id"] for span in document["spans"]] == [s.span_id.hex() for s in otlp]
    kinds = Counter(span["kind"] for span in document["spans"])
    assert set(kinds) == {"agent_run", "model_inference", "tool_call"}
    model = next(span for span in document["spans"] if span["kind"] == "model_inference")
    assert model["usage"]["input_details"]["cache_read"] >= 0
    assert "reasoning" in model["usage"]["output_details"]
    assert model["correlation"]["service_name"] == MEASURED_SERVICE


def test_stamping_renumbers_every_id_and_keeps_parents(corpus: Corpus) -> None:
    template = corpus.measured["otlp"][0]
    original = _otlp_spans(template.body)
    stamped = _otlp_spans(template.stamp(7))
    assert len(stamped) == len(original)
    old_ids = {s.span_id for s in original}
    new_ids = {s.span_id for s in stamped}
    assert not old_ids & new_ids
    for span in stamped:
        parent = span.parent_span_id
        assert not parent or parent in new_ids
    assert template.trace_id(0, 7) == stamped[0].trace_id.hex()
    # The rest of the body is untouched.
    assert stamped[0].attributes == original[0].attributes


def test_stamping_native_json(corpus: Corpus) -> None:
    template = corpus.measured["native"][1]
    original = json.loads(template.body)["spans"]
    stamped = json.loads(template.stamp(123_456))["spans"]
    ids = {span["span_id"] for span in stamped}
    assert not ids & {span["span_id"] for span in original}
    assert all(span.get("parent_span_id", next(iter(ids))) in ids for span in stamped)
    assert template.trace_id(0, 123_456) == stamped[0]["trace_id"]
    assert [span["input"] for span in stamped] == [span["input"] for span in original]


def test_streams_never_repeat_an_id(corpus: Corpus) -> None:
    stream = Stream(corpus.measured["otlp"])
    seen: set[bytes] = set()
    for _ in range(6):
        _, _, body = stream.next()
        for span in _otlp_spans(body):
            key = span.trace_id + span.span_id
            assert key not in seen
            seen.add(key)


def test_warmup_and_probe_requests_use_another_service(corpus: Corpus) -> None:
    for templates in (corpus.warmup["native"], corpus.probe["native"]):
        spans = json.loads(templates[0].body)["spans"]
        assert {span["correlation"]["service_name"] for span in spans} == {WARMUP_SERVICE}
    assert corpus.probe["otlp"][0].spans == 16


def test_case_matrix_and_filters() -> None:
    cases = all_cases()
    assert len([case for case in cases if case.system == "mcpd"]) == 18
    assert {case.route for case in cases if case.system == "phoenix"} == {"otlp-http", "otlp-grpc"}
    picked = select_cases(["sqlite", "otlp-http", "1kb"])
    assert {(case.system, case.backend) for case in picked} == {
        ("mcpd", "sqlite"),
        ("phoenix", "sqlite"),
    }
    assert all(case.route == "otlp-http" and case.payload == "1kb" for case in picked)
    assert select_cases(["postgres", "clickhouse", "native", "10kb"]) == [
        case
        for case in cases
        if case.backend in ("postgres", "clickhouse")
        and case.route == "native"
        and case.payload == "10kb"
    ]
    with pytest.raises(ValueError, match="unknown --only"):
        IngestConfig(only=("mysql",))
    assert IngestConfig(only=("phoenix",)).result_name == "ingest-partial"
    assert IngestConfig().result_name == "ingest"


def test_result_figures_from_a_load_outcome() -> None:
    outcome = LoadOutcome(
        concurrency=4,
        requests=12,
        acked_requests=10,
        acked_spans=5120,
        refused_requests=2,
        latencies_s=[0.1] * 9 + [0.3],
        started_at=100.0,
        ended_at=102.0,
        client_cpu_s=0.5,
        first_refusal_at=101.0,
        spans_acked_before_first_refusal=2048,
    )
    result = CaseResult("phoenix", "sqlite", "otlp-http", "1kb", 4)
    result.apply_load(outcome, bytes_per_span=1000.0)
    assert result.ack_spans_s == 2560.0
    assert result.ack_spans_s_before_first_refusal == 2048.0
    assert result.p50_ms == pytest.approx(100.0)
    assert result.mb_s == pytest.approx(2.56)
    assert result.client_cpu_pct == 25.0
    row = result.row()
    assert row["ack spans/s"] == 2560
    assert row["refused"] == 2


def test_registered_and_configured_from_the_common_cli() -> None:
    assert "ingest" in BENCHMARKS
    args = bench_parser().parse_args(["ingest", "--seconds", "3"])
    assert args.names == ["ingest"]
    assert from_bench_config(BenchConfig(seconds=3)).concurrencies == (8,)
    assert from_bench_config(BenchConfig(concurrencies=(4,))).concurrencies == (4,)
    own = build_parser().parse_args(["--only", "mcpd", "sqlite", "--concurrency", "4", "8"])
    assert own.only == ["mcpd", "sqlite"]
    assert own.concurrency == [4, 8]


def test_profile_summary_charges_library_time_to_mcpd_frames() -> None:
    lines = [
        "main (cli/main.py:1);write (mcpd/storage/sql/stores.py:9);execute (sqlalchemy/x.py:3) 6",
        "main (cli/main.py:1);dumps (json/__init__.py:5) 3",
        "run (threading.py:1) 1",
        "garbage line",
    ]
    summary = profile.summarize(lines)
    assert summary.samples == 10
    assert summary.self_time["sqlalchemy/x.py:execute"] == 6
    assert summary.repo_self["mcpd/storage/sql/stores.py:write"] == 6
    assert summary.repo_self["cli/main.py:main"] == 3
    assert summary.repo_self["threading.py:run"] == 1
    assert summary.inclusive["cli/main.py:main"] == 9
    assert summary.top("repo_self", 1) == [("mcpd/storage/sql/stores.py:write", 60.0)]
    assert "60.0%" in profile.render(summary, top=3)


def test_a_corpus_without_sessions_differs_only_in_its_session_ids() -> None:
    kept, left_out = (
        build_corpus(
            "1kb", templates=1, warmup_templates=1, spans_per_request=32, seed=5, sessions=s
        )
        for s in (True, False)
    )
    with_ids, without = (_otlp_spans(c.measured["otlp"][0].body) for c in (kept, left_out))
    conversation = "gen_ai.conversation.id"
    assert all(any(a.key == conversation for a in span.attributes) for span in with_ids)
    assert not any(a.key == conversation for span in without for a in span.attributes)
    assert [s.span_id for s in with_ids] == [s.span_id for s in without]
    native = json.loads(left_out.measured["native"][0].body)
    assert all("session_id" not in span["correlation"] for span in native["spans"])
    native_kept = json.loads(kept.measured["native"][0].body)
    assert all(span["correlation"]["session_id"] for span in native_kept["spans"])


def test_stage_bench_charges_every_stage_and_stores_every_span(tmp_path: Path) -> None:
    corpus = build_corpus("1kb", templates=2, warmup_templates=1, spans_per_request=32, seed=5)
    found = stages.measure(corpus, sessions=True, requests=3, per_transaction=2, data_dir=tmp_path)
    assert (found.spans, found.stored) == (96, 96)
    assert list(found.per_span_us) == list(stages.STAGES)
    assert all(us > 0 for us in found.per_span_us.values())
    rows = found.rows()
    assert [row["stage"] for row in rows] == [*stages.STAGES, "total"]
    assert rows[-1]["us/span"] == pytest.approx(sum(found.per_span_us.values()))
    assert found.to_dict()["spans_per_cpu_s"] == pytest.approx(1e6 / found.total_us)


def test_stage_bench_is_registered_and_writes_its_result(tmp_path: Path) -> None:
    assert BENCHMARKS[stages.NAME].description == stages.DESCRIPTION
    document = stages.run(["1kb"], requests=1, per_transaction=1, results_dir=tmp_path)
    written = json.loads((tmp_path / f"{stages.NAME}.json").read_text())
    assert written["results"] == document["results"]
    assert [(r["payload"], r["sessions"]) for r in written["results"]] == [
        ("1kb", True),
        ("1kb", False),
    ]
    assert [r["stored"] for r in written["results"]] == [512, 512]
    assert written["target"]["budget_us"] == pytest.approx(
        written["target"]["cores"] * 1e6 / stages.TARGET_SPANS_PER_S
    )
