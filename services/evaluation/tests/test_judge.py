"""The judged scorer against a real chat-completions server (`judge_server`), and the cap a
judged pass puts on its runs."""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from google.protobuf.timestamp_pb2 import Timestamp

from mcpd.model.v1 import enums_pb2, evaluation_pb2, query_pb2, telemetry_pb2
from mcpd.runtime.clock import ManualClock
from mcpd.runtime.config import EvaluationSettings
from mcpd.runtime.errors import FailedPrecondition, InvalidArgument
from mcpd.signals.messages import value_of
from services.evaluation.judge import (
    NO_JUDGE,
    JudgeEndpoint,
    JudgePrices,
    LlmJudge,
    judge_endpoint,
)
from services.evaluation.scorers import Declined, Verdict
from services.evaluation.scoring import Scoring
from services.evaluation.tests.judge_server import JudgeServer, judge_server

KEY = "sk-test-0123456789"
MODEL = "gpt-4o-mini"
RUBRIC = "The answer must say whether the customer's refund was issued."
ROOT_ID = "a" * 16
# gpt-4o-mini in the shipped book: 0.15 per million input tokens, 0.6 per million output; the
# server reports 1000 and 50.
GPT_4O_MINI_COST = telemetry_pb2.Cost(
    currency="USD",
    input_cost=0.00015,
    output_cost=0.00003,
    total_cost=0.00018,
    price_book="mcpd-2026-11",
    is_estimated=True,
)


@pytest.fixture
def server() -> Iterator[JudgeServer]:
    with judge_server() as running:
        yield running


@pytest.fixture
def key_file(tmp_path: Path) -> Path:
    path = tmp_path / "judge.key"
    path.write_text(KEY + "\n")
    path.chmod(0o600)
    return path


@pytest.fixture
def endpoint(server: JudgeServer, key_file: Path) -> JudgeEndpoint:
    settings = EvaluationSettings(
        judge_url=server.url, judge_model=MODEL, judge_key_file=key_file, judge_timeout_s=2.0
    )
    found = judge_endpoint(settings)
    assert found is not None
    return found


def run(answer: Any = None, question: Any = None, *, trace_id: str = "c" * 32) -> Any:
    """A stored run whose root span holds `question` as input and `answer` as output (each
    left out when None)."""
    trace = telemetry_pb2.Trace(trace_id=trace_id, root_span_id=ROOT_ID, is_complete=True)
    root = telemetry_pb2.Span(span_id=ROOT_ID, name="agent", is_root=True)
    if question is not None:
        root.input.CopyFrom(value_of(question))
    if answer is not None:
        root.output.CopyFrom(value_of(answer))
    return query_pb2.TraceDetail(trace=trace, spans=[root])


async def judge(
    endpoint: JudgeEndpoint | None,
    details: Sequence[query_pb2.TraceDetail],
    rubric: str | None = RUBRIC,
    prices: JudgePrices | None = None,
) -> list[Verdict | Declined]:
    config = evaluation_pb2.ScorerConfig(rubric=rubric)
    return await LlmJudge(endpoint, prices).judge_runs("acme", details, config)


# The request and the verdict.


async def test_the_judge_is_asked_with_the_rubric_the_input_and_the_answer(
    endpoint: JudgeEndpoint, server: JudgeServer
) -> None:
    (verdict,) = await judge(endpoint, [run("The refund was issued.", "Where is my refund?")])
    assert verdict == Verdict(
        0.9,
        0.0,
        1.0,
        "pass",
        "the answer says the refund was issued",
        cost=GPT_4O_MINI_COST,
        metadata={"judge_model": MODEL},
    )
    (sent,) = server.requests
    assert sent.path == "/v1/chat/completions"
    assert sent.headers["authorization"] == f"Bearer {KEY}"
    assert sent.headers["content-type"] == "application/json"
    assert (sent.body["model"], sent.body["temperature"]) == (MODEL, 0)
    assert sent.body["response_format"] == {"type": "json_object"}
    assert [message["role"] for message in sent.body["messages"]] == ["system", "user"]
    assert sent.message("system").endswith(f"\n\nRubric:\n{RUBRIC}")
    assert '{"score": <a number from 0 to 1' in sent.message("system")
    assert sent.message("user") == (
        "The run's input:\nWhere is my refund?\n\nThe run's answer:\nThe refund was issued."
    )


async def test_a_low_score_fails_and_json_answers_are_sent_as_json(
    endpoint: JudgeEndpoint, server: JudgeServer
) -> None:
    (verdict,) = await judge(endpoint, [run({"status": "pending", "days": 3})])
    assert isinstance(verdict, Verdict)
    assert (verdict.value, verdict.label, verdict.reason) == (
        0.2,
        "fail",
        "the answer does not mention a refund",
    )
    assert server.requests[0].message("user") == (
        "The run's input:\n(none was recorded)\n\n"
        'The run\'s answer:\n{"days":3,"status":"pending"}'
    )


@pytest.mark.parametrize(
    ("answer", "reason"),
    [
        ("[garbage]", "the judge's answer is not JSON: 'I think it is rather good'"),
        (
            "[shape]",
            'the judge\'s answer has no numeric score: \'{"grade": "A", "reason": "fine"}\'',
        ),
        ("[outside]", "the judge's score 1.5 is outside 0..1"),
        ("[http500]", "the judge answered HTTP 500"),
    ],
)
async def test_a_reply_that_is_not_a_judgement_declines(
    endpoint: JudgeEndpoint, answer: str, reason: str
) -> None:
    assert await judge(endpoint, [run(answer)]) == [Declined(reason)]


async def test_a_judge_that_does_not_answer_in_time_declines(
    endpoint: JudgeEndpoint, server: JudgeServer
) -> None:
    hasty = replace(endpoint, timeout_s=0.3)
    answers = await judge(hasty, [run("[slow]"), run("The refund was issued.")])
    assert answers[0] == Declined(
        "the judge did not answer within 0.3 s (evaluation.judge_timeout_s)"
    )
    assert isinstance(answers[1], Verdict)
    assert len(server.requests) == 2


async def test_an_unreachable_judge_declines(endpoint: JudgeEndpoint) -> None:
    nowhere = replace(endpoint, url="http://127.0.0.1:9/v1")
    assert await judge(nowhere, [run("The refund was issued.")]) == [
        Declined("the judge could not be reached (ConnectError)")
    ]


async def test_without_a_rubric_an_answer_or_a_judge_nothing_is_asked(
    endpoint: JudgeEndpoint, server: JudgeServer
) -> None:
    no_rubric = "no rubric was given: llm_judge needs config.rubric, what the judge grades against"
    assert await judge(endpoint, [run("ok")], rubric=None) == [Declined(no_rubric)]
    assert await judge(endpoint, [run("ok")], rubric="  ") == [Declined(no_rubric)]
    assert await judge(endpoint, [run()]) == [
        Declined("the run's root span 'agent' has no output to judge")
    ]
    no_root = query_pb2.TraceDetail(trace=telemetry_pb2.Trace(trace_id="c" * 32))
    assert await judge(endpoint, [no_root]) == [
        Declined("the run has no root span, so no output to judge")
    ]
    assert await judge(None, [run("ok"), run("ok")]) == [Declined(NO_JUDGE), Declined(NO_JUDGE)]
    assert NO_JUDGE == (
        "no judge is configured: set evaluation.judge_url and evaluation.judge_model"
    )
    assert server.requests == []


async def test_at_most_judge_concurrency_calls_at_once(
    endpoint: JudgeEndpoint, server: JudgeServer
) -> None:
    two = replace(endpoint, concurrency=2)
    details = [run(f"[pause] refund {n}", trace_id=f"{n:032x}") for n in range(5)]
    answers = await judge(two, details)
    assert [answer.label for answer in answers if isinstance(answer, Verdict)] == ["pass"] * 5
    assert (len(server.requests), server.most_at_once) == (5, 2)


# Cost.


class Overrides:
    """A control store's price overrides: one project's own price for the judge's model."""

    def price_overrides(self, project_id: str) -> dict[str, dict[str, float]]:
        return {MODEL: {"input": 1.0, "output": 2.0}} if project_id == "acme" else {}

    def set_price_overrides(
        self, project_id: str, prices: Mapping[str, Mapping[str, float]], currency: str = "USD"
    ) -> int:
        raise NotImplementedError


async def test_the_cost_uses_the_projects_own_prices(endpoint: JudgeEndpoint) -> None:
    (verdict,) = await judge(endpoint, [run("refund")], prices=JudgePrices(Overrides()))
    assert isinstance(verdict, Verdict)
    assert verdict.cost == telemetry_pb2.Cost(
        currency="USD",
        input_cost=0.001,
        output_cost=0.0001,
        total_cost=0.0011,
        price_book="mcpd-2026-11+acme",
        is_estimated=True,
    )


async def test_a_model_the_book_cannot_price_has_no_cost(endpoint: JudgeEndpoint) -> None:
    local = replace(endpoint, model="my-local-judge")
    (verdict,) = await judge(local, [run("refund")])
    assert isinstance(verdict, Verdict)
    assert (verdict.value, verdict.cost, verdict.metadata) == (
        0.9,
        None,
        {"judge_model": "my-local-judge"},
    )


# The key.


def test_the_key_is_read_from_its_file_and_never_shown(
    endpoint: JudgeEndpoint, key_file: Path
) -> None:
    assert endpoint.key == KEY
    assert KEY not in repr(endpoint)
    assert KEY not in repr(LlmJudge(endpoint))
    settings = EvaluationSettings(judge_url="http://judge/v1", judge_model=MODEL)
    assert judge_endpoint(settings) == JudgeEndpoint(
        url="http://judge/v1", model=MODEL, timeout_s=30.0, concurrency=4, key=None
    )
    assert judge_endpoint(EvaluationSettings()) is None


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        (None, "cannot read the judge's key: No such file or directory"),
        ("\n", "expected the judge's API key alone on one line"),
        ("sk-1 sk-2\n", "expected the judge's API key alone on one line"),
    ],
)
def test_a_key_file_that_cannot_be_used_is_refused_at_start(
    tmp_path: Path, content: str | None, problem: str
) -> None:
    path = tmp_path / "judge.key"
    if content is not None:
        path.write_text(content)
    settings = EvaluationSettings(
        judge_url="http://judge/v1", judge_model=MODEL, judge_key_file=path
    )
    with pytest.raises(FailedPrecondition) as refused:
        judge_endpoint(settings)
    assert refused.value.field == "evaluation.judge_key_file"
    assert refused.value.message == f"evaluation.judge_key_file {path}: {problem}"


async def test_the_key_is_not_logged(
    endpoint: JudgeEndpoint, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.DEBUG):
        await judge(endpoint, [run("[http500]")])
        await judge(replace(endpoint, timeout_s=0.3), [run("[slow]")])
    assert [
        record.getMessage() for record in caplog.records if record.name == "mcpd.evaluation"
    ] == [
        "the judge answered HTTP 500",
        "the judge did not answer in time",
    ]
    assert all(KEY not in str(record.__dict__) for record in caplog.records)


def test_a_readable_key_file_is_warned_about(
    key_file: Path, caplog: pytest.LogCaptureFixture
) -> None:
    key_file.chmod(0o644)
    settings = EvaluationSettings(
        judge_url="http://judge/v1", judge_model=MODEL, judge_key_file=key_file
    )
    with caplog.at_level(logging.WARNING, logger="mcpd.evaluation"):
        judge_endpoint(settings)
    assert [record.getMessage() for record in caplog.records] == [
        "the judge's key file is readable by other users; chmod 600 it"
    ]


# A judged pass: the scores it stores and the cap on its runs.


class Runs:
    """Stored runs, newest first, and the scores written."""

    def __init__(self, details: Sequence[query_pb2.TraceDetail]) -> None:
        self.details = {detail.trace.trace_id: detail for detail in details}
        self.written: list[telemetry_pb2.Score] = []

    async def newest(self, project: str, *, since: Timestamp | None, limit: int) -> list[str]:
        return list(self.details)[:limit]

    async def detail(self, project: str, trace_id: str) -> query_pb2.TraceDetail | None:
        return self.details.get(trace_id)

    async def write(self, scores: Sequence[telemetry_pb2.Score], *, ingest_key: str) -> int:
        self.written += scores
        return len(scores)


def stored(count: int) -> Runs:
    return Runs([run("The refund was issued.", trace_id=f"{n:032x}") for n in range(count)])


def scoring(runs: Runs, endpoint: JudgeEndpoint | None) -> Scoring:
    clock = ManualClock(datetime(2026, 12, 6, tzinfo=UTC))
    return Scoring(runs, runs, clock, LlmJudge(endpoint))


def judged(**fields: Any) -> evaluation_pb2.ScoreRunRequest:
    config = evaluation_pb2.ScorerConfig(rubric=RUBRIC)
    return evaluation_pb2.ScoreRunRequest(
        project="acme", scorers=["llm_judge"], config=config, **fields
    )


async def test_a_judged_pass_stores_the_cost_and_the_judges_model(endpoint: JudgeEndpoint) -> None:
    runs = stored(1)
    result = await scoring(runs, endpoint).run(judged())
    (score,) = result.scores
    assert (result.traces_scored, result.scores_written, list(result.skipped)) == (1, 1, [])
    assert (score.scorer_id, score.scorer_version, score.value, score.label) == (
        "llm_judge",
        "1",
        0.9,
        "pass",
    )
    assert (score.source, score.correlation.project) == (enums_pb2.SCORE_SOURCE_OFFLINE, "acme")
    assert score.cost == GPT_4O_MINI_COST
    assert score.metadata == value_of({"judge_model": MODEL})
    assert list(runs.written) == [score]
    again = await scoring(runs, endpoint).run(judged())
    other = await scoring(runs, replace(endpoint, model="gpt-4o")).run(judged())
    assert again.scores[0].score_id == score.score_id
    assert other.scores[0].score_id != score.score_id


def test_the_judge_is_listed_with_the_deterministic_scorers() -> None:
    listed = scoring(stored(0), None).scorers
    assert list(listed) == [
        "contains",
        "cost_budget",
        "exact_match",
        "latency_budget",
        "llm_judge",
        "span_present",
        "tool_efficiency",
        "tool_succeeded",
    ]
    assert (listed["llm_judge"].needs_config, listed["llm_judge"].version) == (True, "1")


# 5.3 s left, calls of up to 2 s, 4 at once: floor(5.3 * 4 / 2) = 10 runs fit.
TIME_LEFT = 5.3
CAP = (
    "a pass with llm_judge fits 10 runs in the 5.3 s left of the request's deadline (each judge "
    "call may take 2 s, 4 at once)"
)


async def test_a_judged_pass_naming_more_runs_than_fit_is_refused(endpoint: JudgeEndpoint) -> None:
    runs = stored(15)
    passes = scoring(runs, endpoint)
    with pytest.raises(InvalidArgument) as by_limit:
        await passes.run(judged(limit=11), time_left=TIME_LEFT)
    assert (by_limit.value.field, by_limit.value.message) == (
        "limit",
        f"{CAP}; limit names 11: name at most 10, or give the request a longer deadline",
    )
    eleven = [f"{n:032x}" for n in range(11)]
    with pytest.raises(InvalidArgument) as by_ids:
        await passes.run(judged(trace_ids=[*eleven, eleven[0]]), time_left=TIME_LEFT)
    assert (by_ids.value.field, by_ids.value.message) == (
        "trace_ids",
        f"{CAP}; trace_ids names 11: name at most 10, or give the request a longer deadline",
    )
    assert runs.written == []


async def test_a_judged_pass_without_a_limit_takes_what_fits(
    endpoint: JudgeEndpoint, server: JudgeServer
) -> None:
    runs = stored(15)
    passes = scoring(runs, endpoint)
    fitted = await passes.run(judged(dry_run=True), time_left=TIME_LEFT)
    assert (fitted.traces_scored, len(fitted.scores), len(server.requests)) == (10, 10, 10)
    named = await passes.run(
        judged(trace_ids=list(runs.details)[:10], dry_run=True), time_left=TIME_LEFT
    )
    assert named.traces_scored == 10
    limited = await passes.run(judged(limit=10, dry_run=True), time_left=TIME_LEFT)
    assert limited.traces_scored == 10
    unbounded = await passes.run(judged(dry_run=True))
    assert unbounded.traces_scored == 15


async def test_a_deadline_too_short_for_one_judge_call_is_refused(endpoint: JudgeEndpoint) -> None:
    with pytest.raises(InvalidArgument) as refused:
        await scoring(stored(3), endpoint).run(judged(), time_left=0.4)
    assert (refused.value.field, refused.value.message) == (
        "limit",
        "a pass with llm_judge fits no run in the 0.4 s left of the request's deadline (each "
        "judge call may take 2 s, 4 at once): give the request a longer deadline",
    )


async def test_only_a_pass_that_calls_a_judge_is_capped(endpoint: JudgeEndpoint) -> None:
    runs = stored(15)
    deterministic = evaluation_pb2.ScoreRunRequest(
        project="acme",
        scorers=["contains"],
        config=evaluation_pb2.ScorerConfig(needle="refund"),
        limit=15,
        dry_run=True,
    )
    assert (await scoring(runs, endpoint).run(deterministic, time_left=0.4)).traces_scored == 15
    unconfigured = await scoring(runs, None).run(judged(limit=15), time_left=0.4)
    assert unconfigured.traces_scored == 15
    assert {skip.reason for skip in unconfigured.skipped} == {NO_JUDGE}


class Rubrics:
    """Experiments' rubrics by id, and the experiments asked about."""

    def __init__(self, rubrics: dict[str, str]) -> None:
        self.rubrics = rubrics
        self.asked: list[str] = []

    async def rubric(self, project: str, experiment_id: str) -> str | None:
        self.asked.append(experiment_id)
        return self.rubrics.get(experiment_id)


async def test_a_run_of_an_experiment_is_judged_against_its_rubric_when_the_pass_gives_none(
    endpoint: JudgeEndpoint, server: JudgeServer
) -> None:
    runs = stored(3)
    joined = list(runs.details.values())
    joined[0].trace.correlation.experiment_id = "ex-with"
    joined[1].trace.correlation.experiment_id = "ex-without"
    rubrics = Rubrics({"ex-with": "Names the day the refund was issued."})
    clock = ManualClock(datetime(2026, 12, 6, tzinfo=UTC))
    passes = Scoring(runs, runs, clock, LlmJudge(endpoint), rubrics)
    request = evaluation_pb2.ScoreRunRequest(project="acme", scorers=["llm_judge"])
    result = await passes.run(request)
    assert [score.trace_id for score in result.scores] == [joined[0].trace.trace_id]
    assert [skip.reason.startswith("no rubric") for skip in result.skipped] == [True, True]
    (sent,) = server.requests
    assert sent.message("system").endswith("\n\nRubric:\nNames the day the refund was issued.")
    assert sorted(rubrics.asked) == ["ex-with", "ex-without"]

    given = await passes.run(judged())
    assert len(given.scores) == 3, "a rubric the pass gives wins"
    assert all(r.message("system").endswith(RUBRIC) for r in server.requests[1:])
