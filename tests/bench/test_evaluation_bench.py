"""The evaluation bench's corpus: four spans a run under one root with an answer, one failing
tool call in every fifth run, every span valid for native ingest; and its registration."""

from __future__ import annotations

from bench import evaluation
from bench.registry import BENCHMARKS
from mcpd import codec
from mcpd.model.v1 import telemetry_pb2
from services.evaluation.scorers import SCORERS


def test_the_corpus_is_what_the_scorers_are_asked_about() -> None:
    runs = evaluation.corpus(10, start_ns=1_700_000_000 * 10**9)
    assert [len(run) for run in runs] == [4] * 10
    assert len({run[0]["trace_id"] for run in runs}) == 10
    for n, run in enumerate(runs):
        root, *children = run
        assert (root["kind"], root["output"]) == ("agent_run", "The refund was issued")
        assert {child["parent_span_id"] for child in children} == {root["span_id"]}
        assert [child["kind"] for child in children] == [
            "model_inference",
            "tool_call",
            "tool_call",
        ]
        assert children[2]["status"] == ("error" if n % 5 == 0 else "ok")
        for span in run:
            codec.decode(span, telemetry_pb2.Span)  # every span decodes as ingest decodes it


def test_the_bench_is_registered() -> None:
    assert BENCHMARKS[evaluation.NAME].description == evaluation.DESCRIPTION
    assert list(SCORERS) == evaluation.SCORERS  # every deterministic scorer
