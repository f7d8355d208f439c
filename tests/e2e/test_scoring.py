"""Scoring passes end to end: a real `mcpd serve` on each backend scores runs stored through
ingest, over REST (`POST /v1/api/scorers/run`) and gRPC (`EvaluationService.RunScorers`) alike.

Three stored runs: `good` (answers a refund in 1.2 s with a priced model call and two tool calls
that succeed), `bad` (answers a JSON object in 5 s with three tool calls, one failing) and
`quiet` (no answer, no tool call, 0.5 s). Every deterministic scorer passes, fails and declines
on them as configured; a scorer missing its configuration declines on every run; the scores of
a pass are stored through ingest with the runs' correlation (the trace list's score summary
shows them), a second identical pass stores nothing twice, and `dry_run` stores nothing.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import grpc
import httpx
import pytest

from mcpd.evaluation.v1 import evaluation_service_pb2, evaluation_service_pb2_grpc
from mcpd.testing.daemon import DaemonProcess
from tests.e2e.conftest import BACKENDS, storage_env
from tests.e2e.ingest_payloads import new_span_id, new_trace_id, rfc3339
from tests.e2e.scoring_client import RefusedError, Score, scoring_client

pytestmark = pytest.mark.e2e

SECOND = 1_000_000_000
# When every run starts: an hour ago, so a window can start before or after it.
T0 = time.time_ns() - 3600 * SECOND


def _span(trace_id: str, name: str, kind: str, end_s: float, **fields: Any) -> dict[str, Any]:
    return {
        "trace_id": trace_id,
        "span_id": new_span_id(),
        "name": name,
        "kind": kind,
        "status": "ok",
        "start_time": rfc3339(T0),
        "end_time": rfc3339(T0 + int(end_s * SECOND)),
        "correlation": {"project": "", "service_name": "scored-bot", "session_id": "s-1"},
        **fields,
    }


def _run(output: Any, end_s: float, tools: list[tuple[str, str]], *, model: bool) -> list[Any]:
    trace_id = new_trace_id()
    root = _span(trace_id, "answer_ticket", "agent_run", end_s)
    if output is not None:
        root["output"] = output
    spans = [root]
    for name, status in tools:
        spans.append(
            _span(trace_id, name, "tool_call", end_s / 2, parent_span_id=root["span_id"])
            | {"status": status}
        )
    if model:
        usage = {"input_tokens": 1000, "output_tokens": 200}
        spans.append(
            _span(trace_id, "chat", "model_inference", end_s / 2, parent_span_id=root["span_id"])
            | {"model": "gpt-4o", "provider": "openai", "usage": usage}
        )
    return spans


@pytest.fixture(scope="module", params=BACKENDS)
def daemon(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[DaemonProcess]:
    directory = tmp_path_factory.mktemp(f"scoring-{request.param}")
    with DaemonProcess(extra_env=storage_env(request.param, directory, request)) as running:
        yield running


@pytest.fixture(scope="module")
def runs(daemon: DaemonProcess) -> dict[str, str]:
    """The three stored runs by name: trace ids."""
    made = {
        "good": _run(
            "The refund was issued.",
            1.2,
            [("lookup_order", "ok"), ("issue_refund", "ok")],
            model=True,
        ),
        "bad": _run(
            {"answer": 42, "ok": True},
            5.0,
            [("lookup_order", "ok"), ("issue_refund", "error"), ("lookup_order", "ok")],
            model=False,
        ),
        "quiet": _run(None, 0.5, [], model=False),
    }
    spans = [span for run in made.values() for span in run]
    answer = httpx.post(f"{daemon.http_url}/v1/api/ingest", json={"spans": spans}, timeout=30)
    assert answer.status_code == 200, answer.text
    assert answer.json()["accepted"] == len(spans)
    return {name: run[0]["trace_id"] for name, run in made.items()}


@pytest.fixture(params=["rest", "grpc"])
def score(request: pytest.FixtureRequest, daemon: DaemonProcess) -> Iterator[Score]:
    with scoring_client(request.param, daemon) as made:
        yield made


def _verdicts(result: dict[str, Any], runs: dict[str, str]) -> dict[tuple[str, str], Any]:
    """(run name, scorer) -> (value, label) for a score, or the reason for a skip."""
    names = {trace_id: name for name, trace_id in runs.items()}
    found: dict[tuple[str, str], Any] = {}
    for score in result["scores"]:
        found[(names[score["trace_id"]], score["scorer_id"])] = (
            round(score["value"], 4),
            score["label"],
        )
    for skipped in result["skipped"]:
        found[(names[skipped["trace_id"]], skipped["scorer_id"])] = skipped["reason"]
    return found


def test_the_scorers_are_listed(daemon: DaemonProcess) -> None:
    answer = httpx.get(f"{daemon.http_url}/v1/api/scorers", timeout=30)
    assert answer.status_code == 200, answer.text
    listed = {entry["id"]: entry["needs_config"] for entry in answer.json()["scorers"]}
    assert listed == {
        "contains": True,
        "cost_budget": True,
        "exact_match": True,
        "latency_budget": True,
        "llm_judge": True,
        "span_present": True,
        "tool_efficiency": True,
        "tool_succeeded": False,
    }
    with grpc.insecure_channel(daemon.grpc_addr) as channel:
        stub = evaluation_service_pb2_grpc.EvaluationServiceStub(channel)
        over_grpc = stub.ListScorers(evaluation_service_pb2.ListScorersRequest(), timeout=30)
    assert [entry.id for entry in over_grpc.scorers] == sorted(listed)
    assert all(entry.description for entry in over_grpc.scorers)


def test_every_scorer_passes_fails_and_declines(score: Score, runs: dict[str, str]) -> None:
    every = sorted(runs.values())
    config = {
        "expected": "the refund was issued.",
        "needle": "REFUND",
        "max_ms": 2000,
        "max_tool_calls": 2,
        "span_kind": "model_inference",
        "case_sensitive": False,
    }
    result = score(
        {
            "trace_ids": every,
            "scorers": [
                "exact_match",
                "contains",
                "latency_budget",
                "tool_efficiency",
                "span_present",
                "tool_succeeded",
            ],
            "config": config,
            "dry_run": True,
        }
    )
    assert (result["traces_scored"], result["scores_written"]) == (3, 0)
    found = _verdicts(result, runs)
    expected_values = {
        ("good", "exact_match"): (1.0, "match"),
        ("bad", "exact_match"): (0.0, "mismatch"),
        ("good", "contains"): (1.0, "pass"),
        ("bad", "contains"): (0.0, "fail"),
        ("good", "latency_budget"): (1.0, "pass"),
        ("bad", "latency_budget"): (0.0, "fail"),
        ("quiet", "latency_budget"): (1.0, "pass"),
        ("good", "tool_efficiency"): (1.0, "within"),
        ("bad", "tool_efficiency"): (0.6667, "over"),
        ("quiet", "tool_efficiency"): (1.0, "within"),
        ("good", "span_present"): (1.0, "present"),
        ("bad", "span_present"): (0.0, "absent"),
        ("quiet", "span_present"): (0.0, "absent"),
        ("good", "tool_succeeded"): (1.0, "pass"),
        ("bad", "tool_succeeded"): (0.0, "fail"),
    }
    for key, value in expected_values.items():
        assert found.pop(key) == value, key
    # The quiet run has no answer to compare, and no tool call to judge.
    assert "output" in found.pop(("quiet", "exact_match"))
    assert "output" in found.pop(("quiet", "contains"))
    assert "tool call" in found.pop(("quiet", "tool_succeeded"))
    assert found == {}
    for each in result["scores"]:
        assert (each["min"], each["max"], each["source"]) == (0.0, 1.0, "offline")
        assert each["scorer_version"] == "1"
        assert each["reason"]


def test_case_json_and_named_targets(score: Score, runs: dict[str, str]) -> None:
    strict = score(
        {
            "trace_ids": [runs["good"], runs["bad"]],
            "scorers": ["contains", "exact_match"],
            "config": {
                "needle": "REFUND",
                "expected": '{"ok": true, "answer": 42}',
                "case_sensitive": True,
            },
            "dry_run": True,
        }
    )
    assert _verdicts(strict, runs) == {
        ("good", "contains"): (0.0, "fail"),  # "refund" is there, "REFUND" is not
        ("bad", "contains"): (0.0, "fail"),
        ("good", "exact_match"): (0.0, "mismatch"),
        ("bad", "exact_match"): (1.0, "match"),  # the same JSON, its keys in another order
    }
    named = score(
        {
            "trace_ids": [runs["good"]],
            "scorers": ["tool_succeeded", "span_present"],
            "config": {"tool_name": "issue_refund", "span_name": "lookup_order"},
            "dry_run": True,
        }
    )
    assert _verdicts(named, runs) == {
        ("good", "tool_succeeded"): (1.0, "pass"),
        ("good", "span_present"): (1.0, "present"),
    }
    on_bad = score(
        {
            "trace_ids": [runs["bad"], runs["quiet"]],
            "scorers": ["tool_succeeded"],
            "config": {"tool_name": "issue_refund"},
            "dry_run": True,
        }
    )
    assert _verdicts(on_bad, runs) == {
        ("bad", "tool_succeeded"): (0.0, "fail"),
        ("quiet", "tool_succeeded"): (0.0, "fail"),  # the tool had to run: it did not
    }


def test_a_scorer_without_its_configuration_declines_on_every_run(
    score: Score, runs: dict[str, str]
) -> None:
    result = score({"trace_ids": sorted(runs.values()), "scorers": ["contains"], "dry_run": True})
    assert (result["traces_scored"], result.get("scores", [])) == (3, [])
    assert sorted(skip["trace_id"] for skip in result["skipped"]) == sorted(runs.values())
    assert all("needle" in skip["reason"] for skip in result["skipped"])
    missing = score({"trace_ids": ["0" * 31 + "1"], "dry_run": True})
    assert missing["traces_scored"] == 0
    assert [(s["scorer_id"], "no trace" in s["reason"]) for s in missing["skipped"]] == [
        ("tool_succeeded", True)
    ]


def test_bad_requests_name_their_field(score: Score) -> None:
    with pytest.raises(RefusedError) as unknown:
        score({"scorers": ["answer_relevance"]})
    assert (unknown.value.status, unknown.value.field) == (400, "scorers")
    with pytest.raises(RefusedError) as zero:
        score({"limit": 0})
    assert (zero.value.status, zero.value.field) == (400, "limit")


def test_a_pass_stores_its_scores_once_through_ingest(
    daemon: DaemonProcess, runs: dict[str, str]
) -> None:
    body = {
        "trace_ids": [runs["good"], runs["bad"]],
        "scorers": ["latency_budget", "tool_succeeded"],
        "config": {"max_ms": 2000},
        "source": "experiment",
    }
    with httpx.Client(base_url=f"{daemon.http_url}/v1/api", timeout=30) as http:
        first = http.post("/scorers/run", json=body).json()
        assert (first["traces_scored"], first["scores_written"]) == (2, 4)
        again = http.post("/scorers/run", json=body).json()
        assert again["scores_written"] == 4
        assert [s["score_id"] for s in again["scores"]] == [s["score_id"] for s in first["scores"]]
        stored = http.get("/scores", params={"trace_id": runs["bad"]}).json()["scores"]
        trace = http.get(f"/traces/{runs['bad']}").json()["trace"]
    assert sorted((s["scorer_id"], s["value"], s["source"]) for s in stored) == [
        ("latency_budget", 0.0, "experiment"),
        ("tool_succeeded", 0.0, "experiment"),
    ]
    assert {s["correlation"]["service_name"] for s in stored} == {"scored-bot"}
    assert {s["correlation"]["session_id"] for s in stored} == {"s-1"}
    assert trace["score_summary"] == {"latency_budget": 0.0, "tool_succeeded": 0.0}


def test_without_trace_ids_the_newest_runs_are_scored(
    daemon: DaemonProcess, runs: dict[str, str]
) -> None:
    with httpx.Client(base_url=f"{daemon.http_url}/v1/api", timeout=30) as http:
        newest = http.post(
            "/scorers/run", json={"limit": 2, "from": rfc3339(T0), "dry_run": True}
        ).json()
        later = http.post(
            "/scorers/run", json={"from": rfc3339(T0 + 1800 * SECOND), "dry_run": True}
        ).json()
    assert newest["traces_scored"] == 2
    assert later["traces_scored"] == 0
