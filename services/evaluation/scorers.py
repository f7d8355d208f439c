"""The deterministic scorers: pure functions of one stored run and a ScorerConfig.

Every scorer answers a `Verdict` on the scale 0 to 1 (`min` 0.0, `max` 1.0), higher is better, so
a mean that moved down is a run that got worse; the binary ones answer 1 for pass and 0 for fail.
A scorer that needs a setting it did not get, or got an invalid one (a negative budget, an unknown
span kind), or that finds nothing in the run to judge, answers `Declined` with a reason instead of
guessing; it never raises for a config or a run. `scorers: []` runs `without_config()`: every
scorer that needs no configuration, which is only `tool_succeeded`.

The run's **answer** is the `output` of its root span: the span whose `span_id` is the trace's
`root_span_id`, or failing that the first span with `is_root`. With no root span, or a root
without output, `exact_match` and `contains` decline saying so. JSON null is an answer (`null`).

An empty `needle`, `span_name` or `tool_name` counts as not given; an empty `expected` is an
expected empty answer. `case_sensitive` (default false) applies to the text comparisons only,
`exact_match` and `contains`; span and tool names always match exactly.

- `exact_match` (needs `expected`): each side is parsed as JSON when it is a string holding strict
  JSON (the answer may already be a JSON value), integral numbers become integers, and unless
  `case_sensitive` every string in it, object keys included, is casefolded. A side that is then a
  string compares as its text with surrounding whitespace stripped; any other value compares as
  canonical JSON (`sort_keys`, no spaces, `ensure_ascii=False`). 1 `match`, 0 `mismatch`.
- `contains` (needs `needle`): the answer as text (a string as is, anything else as canonical
  JSON) contains the needle, both casefolded unless `case_sensitive`. 1 `pass`, 0 `fail`.
- `latency_budget` (needs `max_ms` >= 0): the trace's `duration_ns` in milliseconds is at most
  `max_ms`. Declines while the run has not ended (no duration, or `is_complete` false).
  1 `pass`, 0 `fail`.
- `cost_budget` (needs `max_cost` >= 0): the trace's `cost.total_cost` is at most `max_cost`, in
  the cost's currency. Declines when the run's cost is unknown. 1 `pass`, 0 `fail`.
- `tool_efficiency` (needs `max_tool_calls`): with calls the trace's `tool_count`, 1 when calls
  <= max, else max / calls (0 when max is 0), so it falls as calls exceed the budget.
  `within` or `over`.
- `span_present` (needs `span_kind` or `span_name`; with both, one span must match both): some
  span of the run matches. 1 `present`, 0 `absent`.
- `tool_succeeded` (needs nothing): tool spans are those of kind tool_call, client_tool_call,
  provider_tool_call or mcp_tool_call, and ending ok means status ok (an unset status has not).
  With `tool_name`, the tool spans named exactly so: it passes when at least one ran and every one
  ended ok, and a named tool that never ran fails. Without it, every tool span must have ended ok,
  and a run with no tool call declines. 1 `pass`, 0 `fail`; the reason names at most five of the
  tools that did not end ok.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, NoReturn, Protocol

from mcpd.codec import enum_names
from mcpd.model.v1 import enums_pb2, evaluation_pb2, query_pb2, telemetry_pb2
from mcpd.signals.messages import python_of

__all__ = [
    "SCORERS",
    "CannotScoreError",
    "Declined",
    "Described",
    "Scorer",
    "Verdict",
    "as_text",
    "decline",
    "quoted_text",
    "root_span",
    "run_answer",
    "scorer_info",
    "without_config",
]

VERSION = "1"

_SPAN_KIND = enum_names(enums_pb2.SpanKind.DESCRIPTOR)
_SPAN_STATUS = enum_names(enums_pb2.SpanStatus.DESCRIPTOR)
_TOOL_KINDS = frozenset(
    {
        enums_pb2.SPAN_KIND_TOOL_CALL,
        enums_pb2.SPAN_KIND_CLIENT_TOOL_CALL,
        enums_pb2.SPAN_KIND_PROVIDER_TOOL_CALL,
        enums_pb2.SPAN_KIND_MCP_TOOL_CALL,
    }
)
_MAX_NAMED_FAILURES = 5
_PREVIEW_CHARS = 60
_NS_PER_MS = 1_000_000


@dataclass(frozen=True, slots=True)
class Verdict:
    """A scorer's answer on one run. `cost` is what producing it cost (a judge's call), and
    `metadata` what else the score records about how it was produced (the judge's model); the
    deterministic scorers set neither."""

    value: float
    min: float
    max: float
    label: str
    reason: str
    cost: telemetry_pb2.Cost | None = None
    metadata: Mapping[str, str] | None = None

    def __post_init__(self) -> None:
        if not self.reason:
            raise ValueError("a verdict needs a reason")
        if not self.min <= self.value <= self.max:
            raise ValueError(f"value {self.value} is outside {self.min}..{self.max}")


@dataclass(frozen=True, slots=True)
class Declined:
    """A scorer that cannot answer on this run, and why (never empty)."""

    reason: str

    def __post_init__(self) -> None:
        if not self.reason:
            raise ValueError("a declined scorer needs a reason")


class Described(Protocol):
    """A scorer as ListScorers describes it, deterministic or judged."""

    id: str
    version: str
    description: str
    needs_config: bool


class Scorer(Described, Protocol):
    """One deterministic scorer."""

    def score(
        self, detail: query_pb2.TraceDetail, config: evaluation_pb2.ScorerConfig
    ) -> Verdict | Declined: ...


_Judge = Callable[[query_pb2.TraceDetail, evaluation_pb2.ScorerConfig], Verdict]


class CannotScoreError(Exception):
    """Raised by a judge, anywhere below it, that cannot answer; `score` turns it into Declined."""


def decline(reason: str) -> NoReturn:
    """Stop judging this run: the scorer declines with `reason`."""
    raise CannotScoreError(reason)


class _Deterministic:
    """A scorer built from a judge function."""

    __slots__ = ("_judge", "description", "id", "needs_config", "version")

    def __init__(self, id: str, description: str, needs_config: bool, judge: _Judge) -> None:
        self.id = id
        self.version = VERSION
        self.description = description
        self.needs_config = needs_config
        self._judge = judge

    def score(
        self, detail: query_pb2.TraceDetail, config: evaluation_pb2.ScorerConfig
    ) -> Verdict | Declined:
        try:
            return self._judge(detail, config)
        except CannotScoreError as declined:
            return Declined(str(declined))

    def __repr__(self) -> str:
        return f"<scorer {self.id} v{self.version}>"


# --- shared pieces ---------------------------------------------------------------------------


def _binary(passed: bool, labels: tuple[str, str], reason: str) -> Verdict:
    return Verdict(1.0 if passed else 0.0, 0.0, 1.0, labels[0] if passed else labels[1], reason)


def _figure(number: float) -> str:
    return f"{number:.10g}"


def quoted_text(text: str) -> str:
    """`text` quoted for a reason: one line, bounded (a reason is a sentence, an answer can be
    a page)."""
    flat = " ".join(text.split())
    if len(flat) > _PREVIEW_CHARS:
        flat = flat[:_PREVIEW_CHARS] + "…"
    return f"'{flat}'"


def _counted(count: int, noun: str) -> str:
    return f"{count} {noun}{'' if count == 1 else 's'}"


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def as_text(value: Any) -> str:
    """A JSON value as text: a string as is, anything else as canonical JSON."""
    return value if isinstance(value, str) else _canonical(value)


def _given(text: str, present: bool) -> str | None:
    return text if present and text else None


def root_span(detail: query_pb2.TraceDetail) -> telemetry_pb2.Span | None:
    """The span the trace names its root, else the first span marked root, else None."""
    trace = detail.trace
    if trace.HasField("root_span_id"):
        named = next((s for s in detail.spans if s.span_id == trace.root_span_id), None)
        if named is not None:
            return named
    return next((s for s in detail.spans if s.is_root), None)


def run_answer(detail: query_pb2.TraceDetail) -> Any:
    """The run's answer, its root span's output as JSON; declines when there is none."""
    root = root_span(detail)
    if root is None:
        decline("the run has no root span, so no output to judge")
    # An empty Value (no kind set) is as good as no output: python_of would call it null.
    if not root.HasField("output") or root.output.WhichOneof("kind") is None:
        decline(f"the run's root span {quoted_text(root.name)} has no output to judge")
    return python_of(root.output)


def _budget(value: float | None, field: str, unit: str) -> float:
    if value is None:
        decline(f"no {field} was given: this scorer needs a budget in {unit}")
    if not value >= 0:  # written so NaN is refused too
        decline(f"{field} must be zero or more, not {_figure(value)}")
    return value


# --- exact_match and contains ----------------------------------------------------------------


def _refuse_constant(name: str) -> NoReturn:
    raise ValueError(f"{name} is not JSON")


def _parsed(side: Any) -> Any:
    if not isinstance(side, str):
        return side
    text = side.strip()
    try:
        return json.loads(text, parse_constant=_refuse_constant)
    except ValueError:
        return text


def _normalised(value: Any, fold: bool) -> Any:
    if isinstance(value, str):
        return value.casefold() if fold else value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {_normalised(k, fold): _normalised(v, fold) for k, v in value.items()}
    if isinstance(value, list):
        return [_normalised(item, fold) for item in value]
    return value


def _comparable(side: Any, fold: bool) -> str:
    value = _normalised(_parsed(side), fold)
    return value.strip() if isinstance(value, str) else _canonical(value)


def _exact_match(detail: query_pb2.TraceDetail, config: evaluation_pb2.ScorerConfig) -> Verdict:
    if not config.HasField("expected"):
        decline("no expected answer was given (config.expected)")
    answer = run_answer(detail)
    fold = not config.case_sensitive
    got, want = _comparable(answer, fold), _comparable(config.expected, fold)
    how = "" if config.case_sensitive else ", ignoring case"
    shown = quoted_text(_comparable(answer, False))
    expected = quoted_text(_comparable(config.expected, False))
    verb = "matches" if got == want else "does not match"
    reason = f"the answer {shown} {verb} the expected answer {expected}{how}"
    return _binary(got == want, ("match", "mismatch"), reason)


def _contains(detail: query_pb2.TraceDetail, config: evaluation_pb2.ScorerConfig) -> Verdict:
    needle = _given(config.needle, config.HasField("needle"))
    if needle is None:
        decline("no needle was given (config.needle): nothing to look for in the answer")
    text = as_text(run_answer(detail))
    found = needle in text if config.case_sensitive else needle.casefold() in text.casefold()
    how = "" if config.case_sensitive else ", ignoring case"
    verb = "contains" if found else "does not contain"
    reason = f"the answer {quoted_text(text)} {verb} {quoted_text(needle)}{how}"
    return _binary(found, ("pass", "fail"), reason)


# --- budgets ---------------------------------------------------------------------------------


def _latency_budget(detail: query_pb2.TraceDetail, config: evaluation_pb2.ScorerConfig) -> Verdict:
    max_ms = _budget(config.max_ms if config.HasField("max_ms") else None, "max_ms", "ms")
    trace = detail.trace
    if not trace.HasField("duration_ns") or not trace.is_complete:
        decline("the run has not ended, so its duration is not known yet")
    took = trace.duration_ns / _NS_PER_MS
    within = took <= max_ms
    verb = "within" if within else "over"
    reason = f"the run took {_figure(took)} ms, {verb} the budget of {_figure(max_ms)} ms"
    return _binary(within, ("pass", "fail"), reason)


def _cost_budget(detail: query_pb2.TraceDetail, config: evaluation_pb2.ScorerConfig) -> Verdict:
    max_cost = _budget(
        config.max_cost if config.HasField("max_cost") else None, "max_cost", "currency units"
    )
    trace = detail.trace
    if not trace.HasField("cost") or not trace.cost.HasField("total_cost"):
        decline("the run's cost is unknown")
    cost = trace.cost.total_cost
    unit = f" {trace.cost.currency}" if trace.cost.currency else ""
    within = cost <= max_cost
    verb = "within" if within else "over"
    reason = f"the run cost {_figure(cost)}{unit}, {verb} the budget of {_figure(max_cost)}{unit}"
    return _binary(within, ("pass", "fail"), reason)


def _tool_efficiency(detail: query_pb2.TraceDetail, config: evaluation_pb2.ScorerConfig) -> Verdict:
    if not config.HasField("max_tool_calls"):
        decline("no max_tool_calls was given: this scorer needs a budget of tool calls")
    budget = config.max_tool_calls
    calls = detail.trace.tool_count
    within = calls <= budget
    value = 1.0 if within else budget / calls
    label = "within" if within else "over"
    reason = f"the run made {calls} tool calls, {label} the budget of {budget}"
    return Verdict(value, 0.0, 1.0, label, reason)


# --- spans and tools -------------------------------------------------------------------------


def _looked_for(kind: int | None, name: str | None) -> str:
    parts: list[str] = []
    if kind is not None:
        parts.append(f"kind {_SPAN_KIND.by_number[kind]}")
    if name is not None:
        parts.append(f"name {quoted_text(name)}")
    return " and ".join(parts)


def _span_present(detail: query_pb2.TraceDetail, config: evaluation_pb2.ScorerConfig) -> Verdict:
    kind = config.span_kind if config.HasField("span_kind") else None
    name = _given(config.span_name, config.HasField("span_name"))
    if kind is None and name is None:
        decline("neither span_kind nor span_name was given: nothing to look for")
    if kind is not None and kind not in _SPAN_KIND.by_number:
        decline(f"span_kind {kind} is not a span kind")
    spans = detail.spans
    found = sum(
        1
        for span in spans
        if (kind is None or span.kind == kind) and (name is None or span.name == name)
    )
    what = _looked_for(kind, name)
    count = _counted(found, "span") if found else "no span"
    reason = f"found {count} with {what} among the run's {_counted(len(spans), 'span')}"
    return _binary(found > 0, ("present", "absent"), reason)


def _status_name(status: int) -> str:
    return _SPAN_STATUS.by_number.get(status, "no status")


def _failures(spans: Sequence[telemetry_pb2.Span]) -> str:
    distinct = list(dict.fromkeys((span.name, _status_name(span.status)) for span in spans))
    shown = [f"{quoted_text(name)} ({status})" for name, status in distinct[:_MAX_NAMED_FAILURES]]
    more = len(distinct) - len(shown)
    return ", ".join(shown) + (f" and {more} more" if more else "")


def _tool_succeeded(detail: query_pb2.TraceDetail, config: evaluation_pb2.ScorerConfig) -> Verdict:
    name = _given(config.tool_name, config.HasField("tool_name"))
    tools = [span for span in detail.spans if span.kind in _TOOL_KINDS]
    if name is not None:
        tools = [span for span in tools if span.name == name]
        if not tools:
            return _binary(False, ("pass", "fail"), f"no tool call named {quoted_text(name)} ran")
    elif not tools:
        decline("the run made no tool call")
    failed = [span for span in tools if span.status != enums_pb2.SPAN_STATUS_OK]
    target = quoted_text(name) if name is not None else "tools"
    calls = f"{len(tools)} {'call' if len(tools) == 1 else 'calls'} to {target}"
    if not failed:
        return _binary(True, ("pass", "fail"), f"{len(tools)} of {calls} ended ok")
    reason = f"{len(failed)} of {calls} did not end ok: {_failures(failed)}"
    return _binary(False, ("pass", "fail"), reason)


# --- the registry ----------------------------------------------------------------------------


_ALL: tuple[_Deterministic, ...] = (
    _Deterministic(
        "exact_match",
        "Whether the run's answer equals the expected answer, compared as normalised JSON.",
        True,
        _exact_match,
    ),
    _Deterministic(
        "contains", "Whether the run's answer contains the given text.", True, _contains
    ),
    _Deterministic(
        "latency_budget",
        "Whether the run finished within a budget in milliseconds.",
        True,
        _latency_budget,
    ),
    _Deterministic(
        "cost_budget", "Whether the run cost no more than a budget.", True, _cost_budget
    ),
    _Deterministic(
        "tool_efficiency",
        "How well the run kept to a budget of tool calls: 1 within it, budget/calls over it.",
        True,
        _tool_efficiency,
    ),
    _Deterministic(
        "span_present",
        "Whether the run has a span of the given kind and/or name.",
        True,
        _span_present,
    ),
    _Deterministic(
        "tool_succeeded",
        "Whether every tool call of the run, or of the named tool, ended ok.",
        False,
        _tool_succeeded,
    ),
)

SCORERS: Mapping[str, Scorer] = MappingProxyType(
    {scorer.id: scorer for scorer in sorted(_ALL, key=lambda scorer: scorer.id)}
)


def scorer_info(scorer: Described) -> evaluation_pb2.ScorerInfo:
    """How `scorer` is described to a caller."""
    return evaluation_pb2.ScorerInfo(
        id=scorer.id, description=scorer.description, needs_config=scorer.needs_config
    )


def without_config() -> list[Scorer]:
    """What `scorers: []` runs: every scorer that needs no configuration, in id order."""
    return [scorer for scorer in SCORERS.values() if not scorer.needs_config]
