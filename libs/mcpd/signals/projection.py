"""The trace projection: one `traces` row computed from a trace's spans, scores and feedback.

Every backend calls `project_trace` with what it stores for one (project, trace_id), so the run
list reads the same on all of them. The rules:

* Spans are deduplicated by span id, the last occurrence winning (a span re-sent when it ends
  replaces the one sent when it started). Likewise scores by score id, feedback by feedback id.
* **Root**: the span with `is_root`; with several, the earliest start, then the smallest span
  id. Name, kind, correlation and tags come from the root. Until a root has arrived they come
  from the earliest-starting span (then smallest span id) and `root_span_id` is None. The
  session id alone falls back further: when that span carries none, it is the session id of
  the earliest-starting span that does, so a trace whose session id one child carries belongs
  to that session (the session read model groups traces by it, `services.ingest.trace_sessions`).
* **Status**: `error` when any span is an error, else the root's status, `unset` without a root.
* **Times**: `start_time` is the earliest start. `end_time` is the latest finish (a span's end,
  or an event's start when the event has no end), and None while any non-event span has no
  end. `duration_ns` is end minus start when the end is known.
* **Counts**: `span_count`, `error_count` (status `error`); `tool_count` counts spans of kind
  tool_call, client_tool_call, provider_tool_call and mcp_tool_call; `model_count` counts spans
  of kind model_generation, model_step and model_inference that have no descendant of those
  kinds, so a generation, its steps and their inferences are one model call, not three.
* **Usage and cost** are summed over the most specific reports: a span's usage counts unless a
  descendant of it in the trace also carries usage (any token total or detail), so a
  model_generation whose model_inference children report tokens is not counted twice; cost
  likewise, independently of usage. Token totals are summed as ints and `usage_details` field
  by field; a total no counted span reports stays None. Costs are summed; `cost_currency` is the
  first non-empty currency among the counted spans in start order (mixed currencies are not
  converted: the first is kept and the sums are taken as they are, which a pricing pipeline
  that prices one project in one currency never produces); `cost_price_book` is the price book
  every counted span shares, or None when they differ; `cost_is_estimated` is True when any
  counted cost is estimated (None when no span carries a cost).
* **Descendants** follow `parent_span_id` inside the trace only; a parent that has not arrived
  (or lives in another trace) makes its child a top-level span. Cycles are broken, not followed.
* **Summaries**: `score_summary` is `{scorer_id: mean value}`; `feedback_summary` is
  `{kind: {value: count}}` for thumbs, rating and tag (the value rendered as a string: `"up"`,
  `{"value": "up"}` and `4` give `"up"`, `"up"` and `"4"`) and `{kind: {"count": n}}` for
  correction and comment. Each is None when there is nothing to summarise.
* **Completeness**: `is_complete` when a root is present and has ended (an event root counts as
  ended) and no non-event span is still open.
* `received_at` is the earliest arrival of any span.

Two helpers every backend's reads share: `order_spans` puts a trace's spans in the read order
`TraceRecords` documents, and `summarize_held` turns held spans into tail sampling's
`HeldTrace` (choosing the root as the projection does).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, TypeVar

from mcpd.signals.batch import HeldTrace
from mcpd.signals.messages import CORRELATION_FIELDS
from mcpd.signals.rows import FeedbackRow, ScoreRow, SpanRow, TraceRow

# The span columns `project_trace` reads; stores select only these.
PROJECTION_SPAN_COLUMNS: tuple[str, ...] = (
    "trace_id",
    "span_id",
    "parent_span_id",
    "name",
    "kind",
    "status",
    "start_time",
    "end_time",
    "is_root",
    "is_event",
    "input_tokens",
    "output_tokens",
    "total_tokens",
    "usage_details",
    "cost_currency",
    "input_cost",
    "output_cost",
    "total_cost",
    "cost_price_book",
    "cost_is_estimated",
    "tags",
    *CORRELATION_FIELDS,
    "received_at",
)
# The score and feedback columns it reads.
PROJECTION_SCORE_COLUMNS: tuple[str, ...] = ("trace_id", "score_id", "scorer_id", "value")
PROJECTION_FEEDBACK_COLUMNS: tuple[str, ...] = ("trace_id", "feedback_id", "kind", "value")

MODEL_KINDS = frozenset({"model_generation", "model_step", "model_inference"})
TOOL_KINDS = frozenset({"tool_call", "client_tool_call", "provider_tool_call", "mcp_tool_call"})
# Feedback kinds summarised by value; the others are counted.
VALUED_FEEDBACK = frozenset({"thumbs", "rating", "tag"})

N = TypeVar("N", int, float)

_USAGE = 1
_COST = 2
_MODEL = 4


def project_trace(
    project: str,
    trace_id: str,
    spans: Sequence[SpanRow],
    scores: Sequence[ScoreRow],
    feedback: Sequence[FeedbackRow],
) -> TraceRow | None:
    """The `traces` row of one trace (see the module docstring); None when it has no spans."""
    by_id: dict[str, SpanRow] = {span["span_id"]: span for span in spans}
    if not by_id:
        return None
    ordered = sorted(by_id.values(), key=_start_order)
    root, head = _root_and_head(ordered)
    tags = head.get("tags")

    own = {span["span_id"]: _own_marks(span) for span in ordered}
    below = _marks_below(ordered, own)

    error_count = 0
    tool_count = 0
    model_count = 0
    open_spans = 0
    start = ordered[0]["start_time"]
    finish = start
    received: int | None = None
    usage_spans: list[SpanRow] = []
    cost_spans: list[SpanRow] = []
    for span in ordered:
        span_id = span["span_id"]
        kind = span.get("kind")
        if span.get("status") == "error":
            error_count += 1
        if kind in TOOL_KINDS:
            tool_count += 1
        marks, marks_below = own[span_id], below.get(span_id, 0)
        if marks & _MODEL and not marks_below & _MODEL:
            model_count += 1
        if marks & _USAGE and not marks_below & _USAGE:
            usage_spans.append(span)
        if marks & _COST and not marks_below & _COST:
            cost_spans.append(span)
        end = span.get("end_time")
        if end is None:
            if span.get("is_event"):
                end = span["start_time"]
            else:
                open_spans += 1
        if end is not None and end > finish:
            finish = end
        arrived = span.get("received_at")
        if arrived is not None and (received is None or arrived < received):
            received = arrived

    end_time = None if open_spans else finish
    root_ended = root is not None and (
        root.get("end_time") is not None or bool(root.get("is_event"))
    )
    if error_count:
        status = "error"
    elif root is not None:
        status = root.get("status") or "unset"
    else:
        status = "unset"

    row: TraceRow = {
        "project": project,
        "trace_id": trace_id,
        "root_span_id": root["span_id"] if root is not None else None,
        "name": head.get("name") or "",
        "kind": head.get("kind") or "generic",
        "status": status,
        "start_time": start,
        "end_time": end_time,
        "duration_ns": end_time - start if end_time is not None else None,
        "span_count": len(ordered),
        "error_count": error_count,
        "model_count": model_count,
        "tool_count": tool_count,
        "tags": list(tags) if tags else None,
        "score_summary": score_summary(scores),
        "feedback_summary": feedback_summary(feedback),
        "is_complete": root_ended and not open_spans,
        "received_at": received if received is not None else start,
        "environment": head.get("environment"),
        "service_name": head.get("service_name"),
        "service_version": head.get("service_version"),
        "session_id": head.get("session_id") or _first_session_id(ordered),
        "thread_id": head.get("thread_id"),
        "user_id": head.get("user_id"),
        "resource_id": head.get("resource_id"),
        "run_id": head.get("run_id"),
        "request_id": head.get("request_id"),
        "experiment_id": head.get("experiment_id"),
        "release": head.get("release"),
    }
    _sum_usage(row, usage_spans)
    _sum_cost(row, cost_spans)
    return row


def _start_order(span: SpanRow) -> tuple[int, str]:
    return span["start_time"], span["span_id"]


def trace_session_id(spans: Iterable[SpanRow]) -> str | None:
    """The session id `project_trace` gives a trace of these spans (see "Root")."""
    ordered = sorted(spans, key=_start_order)
    if not ordered:
        return None
    _, head = _root_and_head(ordered)
    return head.get("session_id") or _first_session_id(ordered)


def _root_and_head(ordered: Sequence[SpanRow]) -> tuple[SpanRow | None, SpanRow]:
    """The root of spans in start order (None before it arrives), and the span that names the
    trace: the root, else the earliest span."""
    root = next((span for span in ordered if span.get("is_root")), None)
    return root, root if root is not None else ordered[0]


def _first_session_id(ordered: Sequence[SpanRow]) -> str | None:
    return next((span["session_id"] for span in ordered if span.get("session_id")), None)


def _own_marks(span: SpanRow) -> int:
    marks = 0
    if (
        span.get("input_tokens") is not None
        or span.get("output_tokens") is not None
        or span.get("total_tokens") is not None
        or span.get("usage_details") is not None
    ):
        marks |= _USAGE
    if (
        span.get("cost_currency") is not None
        or span.get("input_cost") is not None
        or span.get("output_cost") is not None
        or span.get("total_cost") is not None
    ):
        marks |= _COST
    if span.get("kind") in MODEL_KINDS:
        marks |= _MODEL
    return marks


def _marks_below(ordered: Sequence[SpanRow], own: Mapping[str, int]) -> dict[str, int]:
    """Per span id, the marks carried by any of its descendants (absent: none)."""
    children: dict[str, list[str]] = {}
    for span in ordered:
        parent = span.get("parent_span_id")
        if parent is not None and parent in own and parent != span["span_id"]:
            children.setdefault(parent, []).append(span["span_id"])
    if not children:
        return {}
    below: dict[str, int] = {}
    visited: set[str] = set()
    # Top-level spans first, then whatever is left (only members of a parent cycle).
    tops = [
        span["span_id"]
        for span in ordered
        if span.get("parent_span_id") not in own or span.get("parent_span_id") == span["span_id"]
    ]
    for start in [*tops, *own]:
        if start in visited:
            continue
        stack: list[tuple[str, bool]] = [(start, False)]
        while stack:
            node, finished = stack.pop()
            if finished:
                marks = 0
                for child in children.get(node, ()):
                    # A child still without an entry is an ancestor in a cycle: not followed.
                    if child in below:
                        marks |= own[child] | below[child]
                below[node] = marks
                continue
            if node in visited:
                continue
            visited.add(node)
            stack.append((node, True))
            stack.extend((child, False) for child in children.get(node, ()) if child not in visited)
    return below


def _sum_usage(row: TraceRow, spans: Sequence[SpanRow]) -> None:
    input_tokens: int | None = None
    output_tokens: int | None = None
    total_tokens: int | None = None
    details: dict[str, dict[str, int]] = {}
    for span in spans:
        input_tokens = _add(input_tokens, span.get("input_tokens"))
        output_tokens = _add(output_tokens, span.get("output_tokens"))
        total_tokens = _add(total_tokens, span.get("total_tokens"))
        for side, fields in (span.get("usage_details") or {}).items():
            summed = details.setdefault(side, {})
            for field, count in fields.items():
                summed[field] = summed.get(field, 0) + int(count)
    row["input_tokens"] = input_tokens
    row["output_tokens"] = output_tokens
    row["total_tokens"] = total_tokens
    row["usage_details"] = details or None


def _sum_cost(row: TraceRow, spans: Sequence[SpanRow]) -> None:
    input_cost: float | None = None
    output_cost: float | None = None
    total_cost: float | None = None
    currency: str | None = None
    books: set[str | None] = set()
    estimated: bool | None = None
    for span in spans:
        input_cost = _add(input_cost, span.get("input_cost"))
        output_cost = _add(output_cost, span.get("output_cost"))
        total_cost = _add(total_cost, span.get("total_cost"))
        if currency is None:
            currency = span.get("cost_currency") or None
        books.add(span.get("cost_price_book"))
        estimated = bool(estimated) or bool(span.get("cost_is_estimated"))
    row["cost_currency"] = currency
    row["input_cost"] = input_cost
    row["output_cost"] = output_cost
    row["total_cost"] = total_cost
    row["cost_price_book"] = books.pop() if len(books) == 1 else None
    row["cost_is_estimated"] = estimated


def _add(total: N | None, value: N | None) -> N | None:
    if value is None:
        return total
    return value if total is None else total + value


def score_summary(scores: Iterable[ScoreRow]) -> dict[str, float] | None:
    """`{scorer_id: mean value}` over the scores (the last of each score id), keys sorted."""
    latest = {score["score_id"]: score for score in scores}
    if not latest:
        return None
    sums: dict[str, list[float]] = {}
    for score in latest.values():
        entry = sums.setdefault(score["scorer_id"], [0.0, 0.0])
        entry[0] += float(score["value"])
        entry[1] += 1
    return {scorer: total / count for scorer, (total, count) in sorted(sums.items())}


def feedback_summary(feedback: Iterable[FeedbackRow]) -> dict[str, dict[str, int]] | None:
    """`{kind: {value: count}}` (thumbs, rating, tag) and `{kind: {"count": n}}` (the rest)."""
    latest = {item["feedback_id"]: item for item in feedback}
    if not latest:
        return None
    summary: dict[str, dict[str, int]] = {}
    for item in latest.values():
        kind = item["kind"]
        bucket = summary.setdefault(kind, {})
        key = feedback_value_text(item.get("value")) if kind in VALUED_FEEDBACK else "count"
        bucket[key] = bucket.get(key, 0) + 1
    return {kind: dict(sorted(bucket.items())) for kind, bucket in sorted(summary.items())}


def feedback_value_text(value: Any) -> str:
    """A feedback value as a summary key: `{"value": x}` unwrapped, strings as they are, whole
    numbers without a fraction, booleans as `true`/`false`, anything else as compact JSON."""
    if isinstance(value, Mapping) and "value" in value:
        value = value["value"]
    if isinstance(value, str):
        return value
    if isinstance(value, bool) or value is None:
        return json.dumps(value)
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return str(int(value)) if value.is_integer() else repr(value)
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


# --- read order and held traces --------------------------------------------------------------

# The span fields `summarize_held` reads (stores extract only these from a held span's row).
HELD_SPAN_FIELDS: tuple[str, ...] = (
    "span_id",
    "status",
    "is_root",
    "is_event",
    "start_time",
    "end_time",
    "received_at",
)


def order_spans(spans: Iterable[SpanRow]) -> list[SpanRow]:
    """Spans in read order (`TraceRecords`): start time, then depth in the tree (a parent before
    a child that starts at the same instant), then span id. Depth follows `parent_span_id`
    inside the given spans; a span whose parent is absent has depth 0, and a cycle stops the
    count where it closes."""
    listed = list(spans)
    parents = {span["span_id"]: span.get("parent_span_id") for span in listed}
    depths: dict[str, int] = {}
    for span_id in parents:
        path: list[str] = []
        on_path: set[str] = set()
        node: str | None = span_id
        while node is not None and node in parents and node not in depths and node not in on_path:
            path.append(node)
            on_path.add(node)
            node = parents[node]
        base = depths[node] + 1 if node is not None and node in depths else 0
        for offset, member in enumerate(reversed(path)):
            depths[member] = base + offset
    return sorted(listed, key=lambda s: (s["start_time"], depths[s["span_id"]], s["span_id"]))


def summarize_held(project: str, trace_id: str, spans: Iterable[Mapping[str, Any]]) -> HeldTrace:
    """Tail sampling's view of one held trace, from its held spans' `HELD_SPAN_FIELDS` (the root
    chosen as `project_trace` chooses it). Raises ValueError when `spans` is empty."""
    listed = list(spans)
    if not listed:
        raise ValueError("a held trace has at least one span")
    roots = [span for span in listed if span.get("is_root")]
    root = min(roots, key=lambda s: (s["start_time"], s["span_id"])) if roots else None
    return HeldTrace(
        project=project,
        trace_id=trace_id,
        first_received_at=min(span["received_at"] for span in listed),
        span_count=len(listed),
        error_count=sum(1 for span in listed if span.get("status") == "error"),
        root_start_time=root["start_time"] if root is not None else None,
        root_end_time=root.get("end_time") if root is not None else None,
        open_count=sum(
            1 for span in listed if not span.get("is_event") and span.get("end_time") is None
        ),
    )
