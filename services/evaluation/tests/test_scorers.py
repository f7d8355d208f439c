"""The deterministic scorers, on hand-built runs: a pass, a fail and a decline for each."""

from __future__ import annotations

from typing import Any

import pytest

from mcpd.model.v1 import enums_pb2, evaluation_pb2, query_pb2, telemetry_pb2
from mcpd.signals.messages import value_of
from services.evaluation.scorers import (
    SCORERS,
    Declined,
    Verdict,
    scorer_info,
    without_config,
)

ROOT_ID = "a" * 16
MS = 1_000_000
NO_OUTPUT = object()
K = enums_pb2.SpanKind
S = enums_pb2.SpanStatus


def span(
    name: str,
    kind: enums_pb2.SpanKind.ValueType = K.SPAN_KIND_TOOL_CALL,
    status: enums_pb2.SpanStatus.ValueType = S.SPAN_STATUS_OK,
    *,
    span_id: str = "b" * 16,
) -> telemetry_pb2.Span:
    return telemetry_pb2.Span(span_id=span_id, name=name, kind=kind, status=status)


def run(
    output: Any = NO_OUTPUT,
    *children: telemetry_pb2.Span,
    root: bool = True,
    duration_ms: float | None = 1000,
    complete: bool = True,
    cost: telemetry_pb2.Cost | None = None,
    tool_count: int = 0,
) -> query_pb2.TraceDetail:
    """A stored run: a root agent span holding `output` (unless `root` is false) and children."""
    trace = telemetry_pb2.Trace(
        trace_id="c" * 32, is_complete=complete, tool_count=tool_count, cost=cost
    )
    if duration_ms is not None:
        trace.duration_ns = int(duration_ms * MS)
    spans = list(children)
    if root:
        trace.root_span_id = ROOT_ID
        agent = span("agent", K.SPAN_KIND_AGENT_RUN, span_id=ROOT_ID)
        agent.is_root = True
        if output is not NO_OUTPUT:
            agent.output.CopyFrom(value_of(output))
        spans.insert(0, agent)
    return query_pb2.TraceDetail(trace=trace, spans=spans)


def score(scorer_id: str, detail: query_pb2.TraceDetail, **config: Any) -> Verdict | Declined:
    return SCORERS[scorer_id].score(detail, evaluation_pb2.ScorerConfig(**config))


def verdict(scorer_id: str, detail: query_pb2.TraceDetail, **config: Any) -> Verdict:
    answer = score(scorer_id, detail, **config)
    assert isinstance(answer, Verdict), answer
    assert (answer.min, answer.max) == (0.0, 1.0)
    return answer


def declined(scorer_id: str, detail: query_pb2.TraceDetail, **config: Any) -> str:
    answer = score(scorer_id, detail, **config)
    assert isinstance(answer, Declined), answer
    return answer.reason


# The registry.


def test_scorers_are_keyed_by_id_in_id_order() -> None:
    assert list(SCORERS) == [
        "contains",
        "cost_budget",
        "exact_match",
        "latency_budget",
        "span_present",
        "tool_efficiency",
        "tool_succeeded",
    ]
    for scorer_id, scorer in SCORERS.items():
        assert (scorer.id, scorer.version) == (scorer_id, "1")
        assert scorer.description.endswith(".")
        assert "\n" not in scorer.description


def test_scorer_info_describes_a_scorer() -> None:
    for scorer in SCORERS.values():
        info = scorer_info(scorer)
        assert info == evaluation_pb2.ScorerInfo(
            id=scorer.id, description=scorer.description, needs_config=scorer.needs_config
        )
    assert scorer_info(SCORERS["tool_succeeded"]).needs_config is False
    assert scorer_info(SCORERS["exact_match"]).needs_config is True


def test_without_config_is_every_scorer_needing_none() -> None:
    assert [scorer.id for scorer in without_config()] == ["tool_succeeded"]
    assert [s.id for s in SCORERS.values() if s.needs_config] == [
        "contains",
        "cost_budget",
        "exact_match",
        "latency_budget",
        "span_present",
        "tool_efficiency",
    ]


def test_an_answer_needs_a_reason() -> None:
    with pytest.raises(ValueError, match="reason"):
        Verdict(1.0, 0.0, 1.0, "pass", "")
    with pytest.raises(ValueError, match="outside"):
        Verdict(2.0, 0.0, 1.0, "pass", "too good")
    with pytest.raises(ValueError, match="reason"):
        Declined("")


# exact_match.


@pytest.mark.parametrize(
    ("answer", "expected", "case_sensitive", "value", "label"),
    [
        ("Paris", "Paris", True, 1.0, "match"),
        ("Paris", "paris", False, 1.0, "match"),
        ("Paris", "paris", True, 0.0, "mismatch"),
        ("  Paris\n", " Paris ", True, 1.0, "match"),
        ("Paris", "London", False, 0.0, "mismatch"),
        ({"a": 1, "b": [2]}, '{ "b": [2], "a": 1 }', True, 1.0, "match"),
        ('{"a":1,"b":[2]}', '{ "b": [2], "a": 1 }', True, 1.0, "match"),
        ('{"a":1,"b":[2]}', '{"a": 1, "b": [3]}', True, 0.0, "mismatch"),
        ({"Name": "Ada"}, '{"name": "ADA"}', False, 1.0, "match"),
        ({"Name": "Ada"}, '{"name": "ADA"}', True, 0.0, "mismatch"),
        (42, "42.0", True, 1.0, "match"),
        ("42", " 42 ", True, 1.0, "match"),
        ("hello", '"hello"', True, 1.0, "match"),
        (None, "null", True, 1.0, "match"),
        ([1, 2], "[2, 1]", True, 0.0, "mismatch"),
        ("NaN", "NaN", True, 1.0, "match"),
    ],
)
def test_exact_match_compares_normalised_json(
    answer: Any, expected: str, case_sensitive: bool, value: float, label: str
) -> None:
    got = verdict("exact_match", run(answer), expected=expected, case_sensitive=case_sensitive)
    assert (got.value, got.label) == (value, label)


def test_exact_match_reasons_show_both_sides() -> None:
    matched = verdict("exact_match", run({"b": [2], "a": 1}), expected='{"a":1,"b":[2]}')
    assert matched.reason == (
        """the answer '{"a":1,"b":[2]}' matches the expected answer '{"a":1,"b":[2]}',"""
        " ignoring case"
    )
    missed = verdict("exact_match", run("Paris"), expected="paris", case_sensitive=True)
    assert missed.reason == "the answer 'Paris' does not match the expected answer 'paris'"
    long = verdict("exact_match", run("x" * 100), expected="y")
    assert long.reason.startswith(f"the answer '{'x' * 60}…' does not match")


def test_exact_match_declines_without_expected_or_answer() -> None:
    assert declined("exact_match", run("Paris")) == (
        "no expected answer was given (config.expected)"
    )
    assert declined("exact_match", run(), expected="Paris") == (
        "the run's root span 'agent' has no output to judge"
    )
    assert declined("exact_match", run(root=False), expected="Paris") == (
        "the run has no root span, so no output to judge"
    )


def test_an_empty_expected_answer_is_an_expectation() -> None:
    assert verdict("exact_match", run("  "), expected="").label == "match"
    assert verdict("exact_match", run("x"), expected="").label == "mismatch"


def test_the_root_is_the_span_the_trace_names_first() -> None:
    detail = run("from the root")
    stray = span("stray", K.SPAN_KIND_AGENT_RUN, span_id="d" * 16)
    stray.is_root = True
    stray.output.CopyFrom(value_of("from a stray root"))
    detail.spans.insert(0, stray)
    assert verdict("exact_match", detail, expected="from the root").value == 1.0
    detail.trace.ClearField("root_span_id")
    assert verdict("exact_match", detail, expected="from a stray root").value == 1.0


# contains.


@pytest.mark.parametrize(
    ("answer", "needle", "case_sensitive", "value", "label"),
    [
        ("The refund was issued.", "refund", True, 1.0, "pass"),
        ("The refund was issued.", "REFUND", False, 1.0, "pass"),
        ("The refund was issued.", "REFUND", True, 0.0, "fail"),
        ("The refund was issued.", "declined", False, 0.0, "fail"),
        ({"status": "Refunded"}, '"status":"Refunded"', True, 1.0, "pass"),
        ({"status": "Refunded"}, '"status": "Refunded"', True, 0.0, "fail"),
        ({"status": "Refunded"}, "refunded", False, 1.0, "pass"),
    ],
)
def test_contains_looks_in_the_answer_as_text(
    answer: Any, needle: str, case_sensitive: bool, value: float, label: str
) -> None:
    got = verdict("contains", run(answer), needle=needle, case_sensitive=case_sensitive)
    assert (got.value, got.label) == (value, label)


def test_contains_reasons() -> None:
    found = verdict("contains", run("The refund was issued."), needle="REFUND")
    assert found.reason == "the answer 'The refund was issued.' contains 'REFUND', ignoring case"
    missing = verdict("contains", run("no\n  luck"), needle="refund", case_sensitive=True)
    assert missing.reason == "the answer 'no luck' does not contain 'refund'"


@pytest.mark.parametrize("config", [{}, {"needle": ""}])
def test_contains_declines_without_a_needle(config: dict[str, Any]) -> None:
    reason = declined("contains", run("anything"), **config)
    assert reason == "no needle was given (config.needle): nothing to look for in the answer"


def test_contains_declines_without_an_answer() -> None:
    assert "no output" in declined("contains", run(), needle="x")
    assert "no root span" in declined("contains", run(root=False), needle="x")


# latency_budget.


@pytest.mark.parametrize(
    ("duration_ms", "max_ms", "value", "label", "reason"),
    [
        (1500, 2000, 1.0, "pass", "the run took 1500 ms, within the budget of 2000 ms"),
        (2000, 2000, 1.0, "pass", "the run took 2000 ms, within the budget of 2000 ms"),
        (2000.5, 2000, 0.0, "fail", "the run took 2000.5 ms, over the budget of 2000 ms"),
        (3, 0, 0.0, "fail", "the run took 3 ms, over the budget of 0 ms"),
    ],
)
def test_latency_budget(
    duration_ms: float, max_ms: float, value: float, label: str, reason: str
) -> None:
    got = verdict("latency_budget", run(duration_ms=duration_ms), max_ms=max_ms)
    assert (got.value, got.label, got.reason) == (value, label, reason)


@pytest.mark.parametrize(
    ("config", "reason"),
    [
        ({}, "no max_ms was given: this scorer needs a budget in ms"),
        ({"max_ms": -1}, "max_ms must be zero or more, not -1"),
        ({"max_ms": float("nan")}, "max_ms must be zero or more, not nan"),
    ],
)
def test_latency_budget_declines_without_a_valid_budget(
    config: dict[str, Any], reason: str
) -> None:
    assert declined("latency_budget", run(), **config) == reason


@pytest.mark.parametrize("detail", [run(complete=False), run(duration_ms=None)])
def test_latency_budget_declines_while_the_run_is_open(detail: query_pb2.TraceDetail) -> None:
    reason = declined("latency_budget", detail, max_ms=1000)
    assert reason == "the run has not ended, so its duration is not known yet"


# cost_budget.


@pytest.mark.parametrize(
    ("total", "max_cost", "value", "label", "reason"),
    [
        (0.0042, 0.01, 1.0, "pass", "the run cost 0.0042 USD, within the budget of 0.01 USD"),
        (0.01, 0.01, 1.0, "pass", "the run cost 0.01 USD, within the budget of 0.01 USD"),
        (0.25, 0.01, 0.0, "fail", "the run cost 0.25 USD, over the budget of 0.01 USD"),
    ],
)
def test_cost_budget(total: float, max_cost: float, value: float, label: str, reason: str) -> None:
    cost = telemetry_pb2.Cost(currency="USD", total_cost=total)
    got = verdict("cost_budget", run(cost=cost), max_cost=max_cost)
    assert (got.value, got.label, got.reason) == (value, label, reason)


def test_cost_budget_names_the_runs_currency() -> None:
    cost = telemetry_pb2.Cost(currency="EUR", total_cost=2)
    assert verdict("cost_budget", run(cost=cost), max_cost=1).reason == (
        "the run cost 2 EUR, over the budget of 1 EUR"
    )


@pytest.mark.parametrize(
    ("cost", "config", "reason"),
    [
        (
            telemetry_pb2.Cost(currency="USD", total_cost=1),
            {},
            "no max_cost was given: this scorer needs a budget in currency units",
        ),
        (
            telemetry_pb2.Cost(currency="USD", total_cost=1),
            {"max_cost": -0.5},
            "max_cost must be zero or more, not -0.5",
        ),
        (None, {"max_cost": 1}, "the run's cost is unknown"),
        (
            telemetry_pb2.Cost(currency="USD", input_cost=1),
            {"max_cost": 1},
            "the run's cost is unknown",
        ),
    ],
)
def test_cost_budget_declines(
    cost: telemetry_pb2.Cost | None, config: dict[str, Any], reason: str
) -> None:
    assert declined("cost_budget", run(cost=cost), **config) == reason


# tool_efficiency.


@pytest.mark.parametrize(
    ("calls", "budget", "value", "label"),
    [
        (0, 2, 1.0, "within"),
        (2, 2, 1.0, "within"),
        (3, 2, 2 / 3, "over"),
        (8, 2, 0.25, "over"),
        (0, 0, 1.0, "within"),
        (4, 0, 0.0, "over"),
    ],
)
def test_tool_efficiency_is_graded(calls: int, budget: int, value: float, label: str) -> None:
    got = verdict("tool_efficiency", run(tool_count=calls), max_tool_calls=budget)
    assert (got.value, got.label) == (value, label)
    assert got.reason == f"the run made {calls} tool calls, {label} the budget of {budget}"


def test_tool_efficiency_declines_without_a_budget() -> None:
    assert declined("tool_efficiency", run(tool_count=3)) == (
        "no max_tool_calls was given: this scorer needs a budget of tool calls"
    )


# span_present.

SEARCH = span("search", K.SPAN_KIND_TOOL_CALL, span_id="1" * 16)
THINK = span("think", K.SPAN_KIND_MODEL_INFERENCE, span_id="2" * 16)
THINK_AGAIN = span("think", K.SPAN_KIND_MODEL_INFERENCE, span_id="3" * 16)


@pytest.mark.parametrize(
    ("config", "value", "label", "reason"),
    [
        (
            {"span_kind": K.SPAN_KIND_MODEL_INFERENCE},
            1.0,
            "present",
            "found 2 spans with kind model_inference among the run's 4 spans",
        ),
        (
            {"span_name": "search"},
            1.0,
            "present",
            "found 1 span with name 'search' among the run's 4 spans",
        ),
        (
            {"span_kind": K.SPAN_KIND_TOOL_CALL, "span_name": "search"},
            1.0,
            "present",
            "found 1 span with kind tool_call and name 'search' among the run's 4 spans",
        ),
        (
            {"span_kind": K.SPAN_KIND_TOOL_CALL, "span_name": "think"},
            0.0,
            "absent",
            "found no span with kind tool_call and name 'think' among the run's 4 spans",
        ),
        (
            {"span_kind": K.SPAN_KIND_RETRIEVAL},
            0.0,
            "absent",
            "found no span with kind retrieval among the run's 4 spans",
        ),
        (
            {"span_kind": K.SPAN_KIND_RETRIEVAL, "span_name": ""},
            0.0,
            "absent",
            "found no span with kind retrieval among the run's 4 spans",
        ),
        (
            {"span_name": "Search"},
            0.0,
            "absent",
            "found no span with name 'Search' among the run's 4 spans",
        ),
    ],
)
def test_span_present(config: dict[str, Any], value: float, label: str, reason: str) -> None:
    got = verdict("span_present", run("ok", SEARCH, THINK, THINK_AGAIN), **config)
    assert (got.value, got.label, got.reason) == (value, label, reason)


@pytest.mark.parametrize(
    ("config", "reason"),
    [
        ({}, "neither span_kind nor span_name was given: nothing to look for"),
        ({"span_name": ""}, "neither span_kind nor span_name was given: nothing to look for"),
        ({"span_kind": K.SPAN_KIND_UNSPECIFIED}, "span_kind 0 is not a span kind"),
        ({"span_kind": 999}, "span_kind 999 is not a span kind"),
    ],
)
def test_span_present_declines_without_a_valid_target(config: dict[str, Any], reason: str) -> None:
    assert declined("span_present", run("ok", SEARCH), **config) == reason


# tool_succeeded.

OK_LOOKUP = span("lookup_order", K.SPAN_KIND_MCP_TOOL_CALL, span_id="4" * 16)
OK_REFUND = span("issue_refund", K.SPAN_KIND_CLIENT_TOOL_CALL, span_id="5" * 16)
BAD_REFUND = span("issue_refund", status=S.SPAN_STATUS_ERROR, span_id="6" * 16)
OPEN_SEARCH = span("web_search", K.SPAN_KIND_PROVIDER_TOOL_CALL, S.SPAN_STATUS_UNSET)
FAILED_MODEL = span("think", K.SPAN_KIND_MODEL_INFERENCE, S.SPAN_STATUS_ERROR)


@pytest.mark.parametrize(
    ("children", "value", "label", "reason"),
    [
        ((OK_LOOKUP, OK_REFUND, FAILED_MODEL), 1.0, "pass", "2 of 2 calls to tools ended ok"),
        (
            (OK_LOOKUP, BAD_REFUND),
            0.0,
            "fail",
            "1 of 2 calls to tools did not end ok: 'issue_refund' (error)",
        ),
        (
            (OK_LOOKUP, BAD_REFUND, OPEN_SEARCH, BAD_REFUND),
            0.0,
            "fail",
            "3 of 4 calls to tools did not end ok: 'issue_refund' (error), 'web_search' (unset)",
        ),
    ],
)
def test_tool_succeeded_judges_every_tool_call(
    children: tuple[telemetry_pb2.Span, ...], value: float, label: str, reason: str
) -> None:
    got = verdict("tool_succeeded", run("ok", *children))
    assert (got.value, got.label, got.reason) == (value, label, reason)


def test_tool_succeeded_names_at_most_five_failed_tools() -> None:
    failed = [span(f"tool_{n}", status=S.SPAN_STATUS_ERROR) for n in range(7)]
    got = verdict("tool_succeeded", run("ok", *failed))
    shown = ", ".join(f"'tool_{n}' (error)" for n in range(5))
    assert got.reason == f"7 of 7 calls to tools did not end ok: {shown} and 2 more"


@pytest.mark.parametrize("config", [{}, {"tool_name": ""}])
def test_tool_succeeded_declines_on_a_run_without_tool_calls(config: dict[str, Any]) -> None:
    assert declined("tool_succeeded", run("ok", FAILED_MODEL), **config) == (
        "the run made no tool call"
    )


@pytest.mark.parametrize(
    ("children", "value", "label", "reason"),
    [
        ((OK_LOOKUP, OK_REFUND), 1.0, "pass", "1 of 1 call to 'issue_refund' ended ok"),
        ((OK_REFUND, OPEN_SEARCH), 1.0, "pass", "1 of 1 call to 'issue_refund' ended ok"),
        (
            (OK_REFUND, BAD_REFUND),
            0.0,
            "fail",
            "1 of 2 calls to 'issue_refund' did not end ok: 'issue_refund' (error)",
        ),
        ((OK_LOOKUP,), 0.0, "fail", "no tool call named 'issue_refund' ran"),
        ((), 0.0, "fail", "no tool call named 'issue_refund' ran"),
        (
            (span("issue_refund", K.SPAN_KIND_GENERIC),),
            0.0,
            "fail",
            "no tool call named 'issue_refund' ran",
        ),
    ],
)
def test_tool_succeeded_with_a_tool_name(
    children: tuple[telemetry_pb2.Span, ...], value: float, label: str, reason: str
) -> None:
    got = verdict("tool_succeeded", run("ok", *children), tool_name="issue_refund")
    assert (got.value, got.label, got.reason) == (value, label, reason)
