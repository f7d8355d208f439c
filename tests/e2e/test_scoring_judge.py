"""The judged scorer end to end: a real `mcpd serve`, its judge a real HTTP server speaking the
chat-completions protocol (`services.evaluation.tests.judge_server`), configured through
`MCPD_EVALUATION_*` with a key file.

Four stored runs: `good` (answers that the refund was issued), `bad` (answers without a refund),
`broken` (an answer the judge replies garbage to) and `quiet` (no answer). A judged pass over REST
and over gRPC stores the judge's scores with their cost and the judge's model, and declines on
the other two saying why; a judged pass naming more runs than fit in the request's deadline is
refused with the cap, and without a limit takes what fits. A daemon without a judge lists
`llm_judge` and declines it, saying so.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from typing import Any

import grpc
import httpx
import pytest

from mcpd.evaluation.v1 import evaluation_service_pb2, evaluation_service_pb2_grpc
from mcpd.testing.daemon import DaemonProcess
from services.evaluation.tests.judge_server import JudgeServer, judge_server
from tests.e2e.conftest import storage_env
from tests.e2e.ingest_payloads import new_span_id, new_trace_id, rfc3339
from tests.e2e.scoring_client import RefusedError, Score, scoring_client

pytestmark = pytest.mark.e2e

SECOND = 1_000_000_000
T0 = time.time_ns() - 3600 * SECOND
KEY = "sk-e2e-judge-key"
MODEL = "gpt-4o-mini"
RUBRIC = "The answer must say whether the customer's refund was issued."
NO_JUDGE = "no judge is configured: set evaluation.judge_url and evaluation.judge_model"
# Calls of up to 2 s, 4 at once: a request with d seconds left fits floor(2 d) judged runs.
TIMEOUT_S = 2
CONCURRENCY = 4
# gpt-4o-mini in the shipped book, at the server's 1000 prompt and 50 completion tokens.
COST = {
    "currency": "USD",
    "input_cost": 0.00015,
    "output_cost": 0.00003,
    "total_cost": 0.00018,
    "price_book": "mcpd-2026-11",
    "is_estimated": True,
}


@pytest.fixture(scope="module")
def judge() -> Iterator[JudgeServer]:
    with judge_server(slow_s=10.0) as running:
        yield running


@pytest.fixture(
    scope="module", params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
)
def daemon(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, judge: JudgeServer
) -> Iterator[DaemonProcess]:
    directory = tmp_path_factory.mktemp(f"judge-{request.param}")
    key_file = directory / "judge.key"
    key_file.write_text(KEY + "\n")
    key_file.chmod(0o600)
    env = {
        **storage_env(request.param, directory, request),
        "MCPD_EVALUATION_JUDGE_URL": judge.url,
        "MCPD_EVALUATION_JUDGE_MODEL": MODEL,
        "MCPD_EVALUATION_JUDGE_KEY_FILE": str(key_file),
        "MCPD_EVALUATION_JUDGE_TIMEOUT_S": str(TIMEOUT_S),
        "MCPD_EVALUATION_JUDGE_CONCURRENCY": str(CONCURRENCY),
    }
    with DaemonProcess(extra_env=env) as running:
        yield running


def _run(question: str, answer: str | None) -> list[dict[str, Any]]:
    trace_id = new_trace_id()
    root: dict[str, Any] = {
        "trace_id": trace_id,
        "span_id": new_span_id(),
        "name": "answer_ticket",
        "kind": "agent_run",
        "status": "ok",
        "start_time": rfc3339(T0),
        "end_time": rfc3339(T0 + SECOND),
        "correlation": {"project": "", "service_name": "judged-bot", "session_id": "s-9"},
        "input": question,
    }
    if answer is not None:
        root["output"] = answer
    return [root]


@pytest.fixture(scope="module")
def runs(daemon: DaemonProcess) -> dict[str, str]:
    """The four stored runs by name: trace ids."""
    made = {
        "good": _run("Where is my refund?", "The refund was issued yesterday."),
        "bad": _run("Where is my refund?", "Your order ships soon."),
        "broken": _run("Where is my refund?", "[garbage]"),
        "quiet": _run("Where is my refund?", None),
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


def _judged(result: dict[str, Any], runs: dict[str, str]) -> dict[str, Any]:
    """Run name -> (value, label, reason) of its score, or the reason it was declined."""
    names = {trace_id: name for name, trace_id in runs.items()}
    found: dict[str, Any] = {}
    for each in result.get("scores", []):
        found[names[each["trace_id"]]] = (each["value"], each["label"], each["reason"])
    for skipped in result.get("skipped", []):
        found[names[skipped["trace_id"]]] = skipped["reason"]
    return found


def test_a_judged_pass_stores_the_judges_scores_with_their_cost(
    score: Score, daemon: DaemonProcess, runs: dict[str, str], judge: JudgeServer
) -> None:
    asked = len(judge.requests)
    body = {
        "trace_ids": [runs["good"], runs["bad"], runs["broken"], runs["quiet"]],
        "scorers": ["llm_judge"],
        "config": {"rubric": RUBRIC},
    }
    result = score(body)
    assert (result["traces_scored"], result["scores_written"]) == (4, 2)
    assert _judged(result, runs) == {
        "good": (0.9, "pass", "the answer says the refund was issued"),
        "bad": (0.2, "fail", "the answer does not mention a refund"),
        "broken": "the judge's answer is not JSON: 'I think it is rather good'",
        "quiet": "the run's root span 'answer_ticket' has no output to judge",
    }
    for each in result["scores"]:
        assert (each["scorer_version"], each["min"], each["max"]) == ("1", 0.0, 1.0)
        assert (each["cost"], each["metadata"]) == (COST, {"judge_model": MODEL})
    sent = judge.requests[asked:]
    assert len(sent) == 3
    assert {request.headers["authorization"] for request in sent} == {f"Bearer {KEY}"}
    assert {(request.body["model"], request.body["temperature"]) for request in sent} == {
        (MODEL, 0)
    }
    assert all(request.message("system").endswith(RUBRIC) for request in sent)
    with httpx.Client(base_url=f"{daemon.http_url}/v1/api", timeout=30) as http:
        stored = http.get("/scores", params={"trace_id": runs["good"]}).json()["scores"]
    assert [(s["scorer_id"], s["value"], s["label"], s["cost"], s["metadata"]) for s in stored] == [
        ("llm_judge", 0.9, "pass", COST, {"judge_model": MODEL})
    ]
    assert stored[0]["correlation"]["service_name"] == "judged-bot"


def test_a_judged_pass_naming_more_runs_than_fit_is_refused(score: Score) -> None:
    # 10.45 s, somewhat less by the time the pass starts but more than 10: 20 runs fit.
    cap = (
        r"a pass with llm_judge fits 20 runs in the 10\.\d s left of the request's deadline "
        r"\(each judge call may take 2 s, 4 at once\); "
    )
    with pytest.raises(RefusedError) as by_limit:
        score({"scorers": ["llm_judge"], "config": {"rubric": RUBRIC}, "limit": 21}, 10.45)
    assert (by_limit.value.status, by_limit.value.field) == (400, "limit")
    assert re.fullmatch(
        cap + "limit names 21: name at most 20, or give the request a longer deadline",
        by_limit.value.message,
    )
    named = [new_trace_id() for _ in range(21)]
    with pytest.raises(RefusedError) as by_ids:
        score({"scorers": ["llm_judge"], "config": {"rubric": RUBRIC}, "trace_ids": named}, 10.45)
    assert (by_ids.value.status, by_ids.value.field) == (400, "trace_ids")
    assert re.fullmatch(
        cap + "trace_ids names 21: name at most 20, or give the request a longer deadline",
        by_ids.value.message,
    )
    fits = score({"scorers": ["llm_judge"], "trace_ids": named[:20], "dry_run": True}, 10.45)
    assert (fits["traces_scored"], len(fits["skipped"])) == (0, 20)


def test_without_a_limit_a_judged_pass_takes_what_fits(score: Score, runs: dict[str, str]) -> None:
    # 1.45 s, somewhat less once the pass starts but more than 1: two of the four runs fit.
    body = {"scorers": ["llm_judge"], "config": {"rubric": RUBRIC}, "dry_run": True}
    assert score(body, 1.45)["traces_scored"] == 2
    assert score(body, 30.0)["traces_scored"] == 4


def test_a_daemon_without_a_judge_lists_it_and_declines_it() -> None:
    with DaemonProcess(extra_env={"MCPD_STORAGE_BACKEND": "sqlite"}) as plain:
        run = _run("Where is my refund?", "The refund was issued.")
        with httpx.Client(base_url=f"{plain.http_url}/v1/api", timeout=30) as http:
            assert http.post("/ingest", json={"spans": run}).json()["accepted"] == 1
            listed = http.get("/scorers").json()["scorers"]
            result = http.post(
                "/scorers/run",
                json={
                    "trace_ids": [run[0]["trace_id"]],
                    "scorers": ["llm_judge"],
                    "config": {"rubric": RUBRIC},
                },
            ).json()
        with grpc.insecure_channel(plain.grpc_addr) as channel:
            stub = evaluation_service_pb2_grpc.EvaluationServiceStub(channel)
            over_grpc = stub.ListScorers(evaluation_service_pb2.ListScorersRequest(), timeout=30)
    assert {entry["id"]: entry["needs_config"] for entry in listed}["llm_judge"] is True
    assert "llm_judge" in [entry.id for entry in over_grpc.scorers]
    assert (result["traces_scored"], result["scores_written"]) == (1, 0)
    assert [(s["scorer_id"], s["reason"]) for s in result["skipped"]] == [("llm_judge", NO_JUDGE)]
