"""The query API end to end: a real `mcpd serve` (SQLite), data sent over POST /v1/api/ingest,
every read route asked over REST and answered with exact values.

The dataset (`Dataset`) is five agent runs an hour-aligned base time apart by ten minutes, with
models, tools, errors, tags, environments, sessions, end users and producer-reported costs
(exact binary fractions, so sums compare exactly), their logs, a counter, a gauge and a
histogram, scores and feedback. Read-only tests share one daemon; tests that change the data
(deltas, delete, erasure) each start their own.
"""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest

from mcpd.signals.rollups import RELATIVE_ACCURACY
from mcpd.testing.daemon import DaemonProcess
from tests.e2e.ingest_payloads import rfc3339
from tests.e2e.mcp_client import QUIET

SKETCH = RELATIVE_ACCURACY + 1e-9
"""The relative bound of quantiles answered from rollups (`mcpd.signals.rollups`)."""

pytestmark = pytest.mark.e2e

NS = 1_000_000_000
HOUR_S = 3600
# Hour-aligned, three hours ago: inside the default 24-hour analytics window, and bucket edges
# (aligned to the epoch) fall on known offsets.
BASE = datetime.now(UTC).replace(minute=0, second=0, microsecond=0) - timedelta(hours=3)
BASE_NS = int(BASE.timestamp()) * NS
WINDOW = {"from": rfc3339(BASE_NS), "to": rfc3339(BASE_NS + 2 * HOUR_S * NS)}


def at(seconds: float) -> str:
    """BASE + `seconds`, as RFC 3339."""
    return rfc3339(BASE_NS + round(seconds * NS))


def stamp(seconds: float) -> str:
    """BASE + `seconds` as the server writes it back: RFC 3339 UTC with milliseconds."""
    moment = BASE + timedelta(seconds=seconds)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def hex_id(label: str, size: int) -> str:
    """A stable id of `size` hex characters for `label`, so ids sort the same on every run."""
    return hashlib.sha256(label.encode()).hexdigest()[:size]


def trace_id(name: str) -> str:
    return hex_id(f"trace {name}", 32)


def span_id(trace: str, name: str) -> str:
    return hex_id(f"span {trace} {name}", 16)


def cost(input_cost: float, output_cost: float) -> dict[str, Any]:
    """A cost the producer reported (kept as sent, not estimated)."""
    return {
        "currency": "USD",
        "input_cost": input_cost,
        "output_cost": output_cost,
        "total_cost": input_cost + output_cost,
        "is_estimated": False,
    }


@dataclass(frozen=True)
class Run:
    """One agent run of the dataset; times are seconds after BASE."""

    name: str  # the dataset's letter: A..E
    root_name: str
    start: float
    duration: float
    user: str
    environment: str
    service: str
    tags: tuple[str, ...] = ()
    kind: str = "agent_run"
    root_error: bool = False
    model: str | None = None
    provider: str | None = None
    tokens: tuple[int, int] = (0, 0)
    costs: tuple[float, float] = (0.0, 0.0)
    model_duration: float = 1.0
    tool: str | None = None
    tool_error: bool = False
    question: str | None = None

    @property
    def trace_id(self) -> str:
        return trace_id(self.name)

    @property
    def total_cost(self) -> float | None:
        return sum(self.costs) if self.model else None

    @property
    def span_names(self) -> list[str]:
        return ["root"] + (["model"] if self.model else []) + (["tool"] if self.tool else [])

    def span_id(self, part: str) -> str:
        return span_id(self.trace_id, part)

    def correlation(self) -> dict[str, Any]:
        return {
            "project": "",
            "environment": self.environment,
            "service_name": self.service,
            "session_id": f"session-{self.name.lower()}",
            "user_id": self.user,
        }

    def spans(self) -> list[dict[str, Any]]:
        root = self.span_id("root")
        correlation = self.correlation()
        spans: list[dict[str, Any]] = [
            {
                "trace_id": self.trace_id,
                "span_id": root,
                "name": self.root_name,
                "kind": self.kind,
                "status": "error" if self.root_error else "ok",
                "start_time": at(self.start),
                "end_time": at(self.start + self.duration),
                "is_root": True,
                "tags": list(self.tags),
                "correlation": correlation,
            }
        ]
        if self.question is not None:
            spans[0]["input"] = {"question": self.question}
        if self.root_error:
            spans[0]["error"] = {"message": "the agent gave up", "kind": "AgentError"}
        if self.model is not None:
            spans.append(
                {
                    "trace_id": self.trace_id,
                    "span_id": self.span_id("model"),
                    "parent_span_id": root,
                    "name": f"chat {self.model}",
                    "kind": "model_inference",
                    "status": "ok",
                    "start_time": at(self.start),
                    "end_time": at(self.start + self.model_duration),
                    "model": self.model,
                    "provider": self.provider,
                    "usage": {"input_tokens": self.tokens[0], "output_tokens": self.tokens[1]},
                    "cost": cost(*self.costs),
                    "correlation": correlation,
                }
            )
        if self.tool is not None:
            tool: dict[str, Any] = {
                "trace_id": self.trace_id,
                "span_id": self.span_id("tool"),
                "parent_span_id": root,
                "name": self.tool,
                "kind": "tool_call",
                "status": "error" if self.tool_error else "ok",
                "start_time": at(self.start + self.model_duration),
                "end_time": at(self.start + self.duration),
                "correlation": correlation,
            }
            if self.tool_error:
                tool["error"] = {"message": "search backend timed out", "kind": "TimeoutError"}
            spans.append(tool)
        return spans


RUNS = {
    run.name: run
    for run in [
        Run(
            "A",
            "answer_ticket",
            start=600,
            duration=2,
            user="alice",
            environment="production",
            service="support-bot",
            tags=("beta", "vip"),
            model="claude-sonnet-4-5",
            provider="anthropic",
            tokens=(1000, 500),
            costs=(0.25, 0.25),
            model_duration=1.5,
            tool="lookup_order",
            question="where is my order?",
        ),
        Run(
            "B",
            "answer_ticket",
            start=1200,
            duration=4,
            user="bob",
            environment="production",
            service="support-bot",
            tags=("beta",),
            model="gpt-4o",
            provider="openai",
            tokens=(2000, 1000),
            costs=(0.5, 0.75),
            model_duration=1,
            tool="search_docs",
            tool_error=True,
            question="refund for a broken umbrella",
        ),
        Run(
            "C",
            "summarize",
            start=1800,
            duration=1,
            user="alice",
            environment="staging",
            service="summarizer",
            model="gpt-4o",
            provider="openai",
            tokens=(400, 100),
            costs=(0.0625, 0.0625),
            model_duration=0.5,
        ),
        Run(
            "D",
            "nightly_eval",
            start=2400,
            duration=8,
            user="carol",
            environment="staging",
            service="evaluator",
            kind="workflow_run",
            tags=("nightly",),
            tool="fetch_dataset",
        ),
        Run(
            "E",
            "answer_ticket",
            start=3000,
            duration=3,
            user="dave",
            environment="production",
            service="support-bot",
            tags=("vip",),
            root_error=True,
            model="claude-sonnet-4-5",
            provider="anthropic",
            tokens=(3000, 800),
            costs=(1.0, 1.0),
            model_duration=2,
        ),
    ]
}


def log(run: Run, log_id: str, offset: float, level: str, message: str) -> dict[str, Any]:
    return {
        "log_id": log_id,
        "trace_id": run.trace_id,
        "span_id": run.span_id("root"),
        "timestamp": at(run.start + offset),
        "level": level,
        "message": message,
        "correlation": run.correlation(),
    }


def logs() -> list[dict[str, Any]]:
    a, b, c, e = RUNS["A"], RUNS["B"], RUNS["C"], RUNS["E"]
    return [
        log(a, "log-a-debug", 0.1, "debug", "cache miss"),
        log(a, "log-a-info", 1.6, "info", "order found"),
        log(b, "log-b-warn", 2, "warn", "search is slow"),
        log(b, "log-b-error", 3.9, "error", "search backend timed out"),
        log(c, "log-c-info", 0.9, "info", "summary written"),
        log(e, "log-e-error", 2.9, "error", "model refused"),
        log(e, "log-e-fatal", 3, "fatal", "worker crashed"),
    ]


def metric(
    metric_id: str,
    name: str,
    kind: str,
    value: float,
    seconds: float,
    labels: dict[str, str],
    **extra: Any,
) -> dict[str, Any]:
    return {
        "metric_id": metric_id,
        "name": name,
        "kind": kind,
        "value": value,
        "timestamp": at(seconds),
        "labels": labels,
        "correlation": {"project": "", "environment": "production", "service_name": "support-bot"},
        **extra,
    }


def histogram(
    bounds: list[float], counts: list[int], total: float, low: float, high: float
) -> dict[str, Any]:
    """A histogram point's buckets, in the shape OTLP ingest stores."""
    return {
        "bounds": bounds,
        "counts": counts,
        "count": sum(counts),
        "sum": total,
        "min": low,
        "max": high,
    }


def metrics() -> list[dict[str, Any]]:
    a = RUNS["A"]
    return [
        # Counter: eu sums to 3 in the first hour and 4 in the second; us has 3 in the first.
        # The first point is linked to run A and its user, so erasing alice removes it.
        metric(
            "m-count-1",
            "orders.lookups",
            "counter",
            1,
            60,
            {"region": "eu"},
            trace_id=a.trace_id,
            correlation=a.correlation(),
        ),
        metric("m-count-2", "orders.lookups", "counter", 2, 120, {"region": "eu"}),
        metric("m-count-3", "orders.lookups", "counter", 3, 300, {"region": "us"}),
        metric("m-count-4", "orders.lookups", "counter", 4, HOUR_S + 60, {"region": "eu"}),
        # Gauge: max 9, last 7 in the first hour.
        metric("m-gauge-1", "queue.depth", "gauge", 5, 60, {"queue": "ingest"}),
        metric("m-gauge-2", "queue.depth", "gauge", 9, 600, {"queue": "ingest"}),
        metric("m-gauge-3", "queue.depth", "gauge", 7, 1200, {"queue": "ingest"}),
        # Histogram: request durations per route.
        metric(
            "m-hist-1",
            "request.duration",
            "histogram",
            3200,
            60,
            {"route": "/answer"},
            unit="ms",
            buckets=histogram([100, 500, 1000], [4, 4, 1, 1], 3200, 20, 1500),
        ),
        metric(
            "m-hist-2",
            "request.duration",
            "histogram",
            300,
            600,
            {"route": "/summarize"},
            unit="ms",
            buckets=histogram([100, 500, 1000], [2, 1, 0, 0], 300, 10, 400),
        ),
    ]


def scores() -> list[dict[str, Any]]:
    a, b, e = RUNS["A"], RUNS["B"], RUNS["E"]

    def score(
        run: Run, score_id: str, scorer: str, source: str, value: float, offset: float
    ) -> dict[str, Any]:
        return {
            "score_id": score_id,
            "trace_id": run.trace_id,
            "scorer_id": scorer,
            "source": source,
            "value": value,
            "timestamp": at(run.start + offset),
            "correlation": run.correlation(),
        }

    return [
        score(a, "score-a-help", "helpfulness", "live", 0.75, 2),
        score(a, "score-a-tox", "toxicity", "offline", 0.0, 5),
        score(b, "score-b-help", "helpfulness", "live", 0.25, 4),
        score(e, "score-e-help", "helpfulness", "live", 0.5, 3),
    ]


def feedback() -> list[dict[str, Any]]:
    a, b, c = RUNS["A"], RUNS["B"], RUNS["C"]

    def one(run: Run, feedback_id: str, kind: str, value: Any) -> dict[str, Any]:
        return {
            "feedback_id": feedback_id,
            "trace_id": run.trace_id,
            "kind": kind,
            "value": value,
            "timestamp": at(run.start + 10),
            "correlation": run.correlation(),
        }

    return [
        one(a, "feedback-a", "thumbs", "up"),
        one(b, "feedback-b", "thumbs", "down"),
        one(c, "feedback-c", "rating", 4),
    ]


def dataset() -> dict[str, Any]:
    return {
        "spans": [span for run in RUNS.values() for span in run.spans()],
        "logs": logs(),
        "metrics": metrics(),
        "scores": scores(),
        "feedback": feedback(),
    }


SPAN_COUNT = sum(len(run.span_names) for run in RUNS.values())
RECORD_COUNT = SPAN_COUNT + len(logs()) + len(metrics()) + len(scores()) + len(feedback())


# --- helpers -----------------------------------------------------------------------------------


def ingest(http: httpx.Client, body: dict[str, Any]) -> dict[str, Any]:
    answer = http.post("/v1/api/ingest", json=body)
    assert answer.status_code == 200, answer.text
    result: dict[str, Any] = answer.json()
    assert result["rejected"] == 0, result
    return result


def get(http: httpx.Client, path: str, **params: Any) -> dict[str, Any]:
    answer = http.get(path, params=params)
    assert answer.status_code == 200, f"GET {answer.request.url}: {answer.text}"
    body: dict[str, Any] = answer.json()
    return body


def refused(answer: httpx.Response, status: int, field: str | None) -> dict[str, Any]:
    """The error body of a refusal: the one error shape, naming `field`."""
    assert answer.status_code == status, answer.text
    error: dict[str, Any] = answer.json()["error"]
    assert set(error) <= {"code", "status", "reason", "message", "field"}
    assert error["code"] == status
    assert isinstance(error["status"], str)
    assert isinstance(error["reason"], str)
    assert error["message"]
    assert error.get("field") == field, error
    return error


def names(traces: list[dict[str, Any]]) -> list[str]:
    """The dataset letters of `traces`, in order."""
    letters = {run.trace_id: run.name for run in RUNS.values()}
    return [letters.get(t["trace_id"], t["trace_id"]) for t in traces]


def list_traces(http: httpx.Client, **params: Any) -> list[str]:
    return names(get(http, "/v1/api/traces", **params)["traces"])


@contextlib.contextmanager
def seeded_daemon() -> Iterator[httpx.Client]:
    """A client of a fresh daemon holding the dataset."""
    with (
        DaemonProcess(extra_env=QUIET) as daemon,
        httpx.Client(base_url=daemon.http_url, timeout=30, trust_env=False) as client,
    ):
        result = ingest(client, dataset())
        assert result == {"accepted": RECORD_COUNT, "rejected": 0, "duplicate": 0, "errors": []}
        yield client


@pytest.fixture(scope="module")
def http() -> Iterator[httpx.Client]:
    """One daemon holding the dataset, shared by the read-only tests."""
    with seeded_daemon() as client:
        yield client


@pytest.fixture
def own_http() -> Iterator[httpx.Client]:
    """A daemon of the test's own, holding the dataset: for tests that change the data."""
    with seeded_daemon() as client:
        yield client


# --- traces ------------------------------------------------------------------------------------


def test_trace_list_is_newest_first_with_projected_fields(http: httpx.Client) -> None:
    body = get(http, "/v1/api/traces")
    assert names(body["traces"]) == ["E", "D", "C", "B", "A"]
    assert body["page"] == {"has_more": False}

    b = next(t for t in body["traces"] if t["trace_id"] == RUNS["B"].trace_id)
    assert b["name"] == "answer_ticket"
    assert b["kind"] == "agent_run"
    assert b["status"] == "error"  # its tool call failed
    assert b["root_span_id"] == RUNS["B"].span_id("root")
    assert b["start_time"] == stamp(1200)
    assert b["end_time"] == stamp(1204)
    assert b["duration_ns"] == 4 * NS
    assert (b["span_count"], b["error_count"]) == (3, 1)
    assert (b["model_count"], b["tool_count"]) == (1, 1)
    assert b["tags"] == ["beta"]
    assert b["usage"]["input_tokens"] == 2000
    assert b["usage"]["output_tokens"] == 1000
    assert b["cost"]["total_cost"] == 1.25
    assert b["cost"]["currency"] == "USD"
    assert b["cost"]["is_estimated"] is False
    assert b["score_summary"] == {"helpfulness": 0.25}
    assert b["feedback_summary"] == {"thumbs": {"down": 1}}
    assert b["is_complete"] is True
    correlation = b["correlation"]
    assert correlation["environment"] == "production"
    assert correlation["service_name"] == "support-bot"
    assert correlation["session_id"] == "session-b"
    # The server stores the end user as a keyed digest, never as sent.
    assert correlation["user_id"] not in ("", "bob")

    d = next(t for t in body["traces"] if t["trace_id"] == RUNS["D"].trace_id)
    assert d["kind"] == "workflow_run"
    assert "cost" not in d or "total_cost" not in d["cost"]


@pytest.mark.parametrize(
    ("params", "expected"),
    [
        ({"status": "error"}, ["E", "B"]),
        ({"status": ["ok", "error"]}, ["E", "D", "C", "B", "A"]),
        ({"kind": "workflow_run"}, ["D"]),
        ({"name": "answer_ticket"}, ["E", "B", "A"]),
        ({"model": "gpt-4o"}, ["C", "B"]),
        ({"provider": "anthropic"}, ["E", "A"]),
        ({"tags": "beta"}, ["B", "A"]),
        ({"tags": ["beta", "vip"]}, ["A"]),
        ({"tags": "beta,vip"}, ["A"]),
        ({"environment": "staging"}, ["D", "C"]),
        ({"service_name": "support-bot"}, ["E", "B", "A"]),
        ({"session_id": "session-c"}, ["C"]),
        # The producer's user id: the server hashes it as ingest did.
        ({"user_id": "alice"}, ["C", "A"]),
        ({"user_id": "nobody"}, []),
        ({"min_cost": 1.0}, ["E", "B"]),
        ({"max_cost": 0.5}, ["C", "A"]),
        ({"min_duration_ms": 3000}, ["E", "D", "B"]),
        ({"max_duration_ms": 1000}, ["C"]),
        ({"q": "umbrella"}, ["B"]),
        ({"q": "UMBRELLA"}, ["B"]),
        ({"from": at(1200), "to": at(3000)}, ["D", "C", "B"]),
        ({"scorer_id": "helpfulness", "min_score": 0.5}, ["E", "A"]),
        ({"feedback_kind": "thumbs", "feedback_value": "up"}, ["A"]),
        ({"environment": "production", "status": "error", "tags": "vip"}, ["E"]),
    ],
    ids=lambda value: str(value) if isinstance(value, dict) else "",
)
def test_trace_filters(http: httpx.Client, params: dict[str, Any], expected: list[str]) -> None:
    assert list_traces(http, **params) == expected


@pytest.mark.parametrize(
    ("order_by", "expected"),
    [
        ("start_time", ["A", "B", "C", "D", "E"]),
        ("-start_time", ["E", "D", "C", "B", "A"]),
        # Runs without a cost come last in either direction.
        ("-cost", ["E", "B", "A", "C", "D"]),
        ("cost", ["C", "A", "B", "E", "D"]),
        ("duration", ["C", "A", "E", "B", "D"]),
        ("-duration", ["D", "B", "E", "A", "C"]),
    ],
)
def test_trace_order(http: httpx.Client, order_by: str, expected: list[str]) -> None:
    assert list_traces(http, order_by=order_by) == expected


@pytest.mark.parametrize("order_by", [None, "-cost", "duration"])
def test_paging_returns_every_trace_exactly_once(http: httpx.Client, order_by: str | None) -> None:
    whole = list_traces(http, **({"order_by": order_by} if order_by else {}))
    params: dict[str, Any] = {"limit": 2} | ({"order_by": order_by} if order_by else {})
    pages: list[list[str]] = []
    has_more: list[bool] = []
    while True:
        body = get(http, "/v1/api/traces", **params)
        pages.append(names(body["traces"]))
        has_more.append(body["page"]["has_more"])
        cursor = body["page"].get("next_cursor")
        if cursor is None:
            break
        assert len(pages) < 10, pages
        params["cursor"] = cursor
    assert pages == [whole[0:2], whole[2:4], whole[4:]]
    assert has_more == [True, True, False]


def test_a_cursor_is_refused_with_other_filters(http: httpx.Client) -> None:
    first = get(http, "/v1/api/traces", limit=2)
    cursor = first["page"]["next_cursor"]

    same = http.get("/v1/api/traces", params={"limit": 3, "cursor": cursor})
    assert same.status_code == 200, same.text  # the page size may change
    assert names(same.json()["traces"]) == ["C", "B", "A"]

    other = http.get("/v1/api/traces", params={"limit": 2, "cursor": cursor, "status": "error"})
    refused(other, 400, "cursor")
    elsewhere = http.get("/v1/api/spans", params={"cursor": cursor})
    refused(elsewhere, 400, "cursor")
    garbage = http.get("/v1/api/traces", params={"cursor": "not-a-cursor"})
    refused(garbage, 400, "cursor")


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"order_by": "tokens"}, "order_by"),
        ({"order_by": "-"}, "order_by"),
        ({"limit": 0}, "limit"),
        ({"limit": 5000}, "limit"),
        ({"status": "exploded"}, "status[0]"),
        ({"from": "yesterday"}, "from"),
        ({"from": at(60), "to": at(30)}, "from"),
        ({"min_score": 0.5}, "scorer_id"),
        ({"feedback_value": "up"}, "feedback_kind"),
        ({"model": ""}, "model"),
    ],
    ids=str,
)
def test_bad_trace_list_requests_name_the_field(
    http: httpx.Client, params: dict[str, Any], field: str
) -> None:
    error = refused(http.get("/v1/api/traces", params=params), 400, field)
    assert error["status"] == "INVALID_ARGUMENT"


# Times are int64 nanoseconds from the epoch in every store (1970-01-01 .. 2262-04-11): a bound
# outside that, or a duration that overflows it in nanoseconds, is the caller's mistake, not a
# server error.
PAST = "1969-12-31T23:59:59Z"
FUTURE = "9999-01-01T00:00:00Z"


@pytest.mark.parametrize(
    ("path", "params", "field"),
    [
        ("/v1/api/traces", {"from": PAST}, "from"),
        ("/v1/api/traces", {"to": FUTURE}, "to"),
        ("/v1/api/traces", {"min_duration_ms": 2**64 - 1}, "min_duration_ms"),
        ("/v1/api/traces", {"max_duration_ms": 9_300_000_000_000}, "max_duration_ms"),
        ("/v1/api/spans", {"from": PAST}, "from"),
        ("/v1/api/logs", {"to": "2262-04-12T00:00:00Z"}, "to"),
        ("/v1/api/metrics/orders.lookups/series", {"from": PAST, "to": at(0)}, "from"),
        ("/v1/api/analytics/summary", {"to": FUTURE}, "to"),
        ("/v1/api/analytics/cost", {"from": PAST}, "from"),
    ],
    ids=str,
)
def test_times_beyond_what_a_store_holds_are_refused(
    http: httpx.Client, path: str, params: dict[str, Any], field: str
) -> None:
    refused(http.get(path, params=params), 400, field)


def test_times_at_the_edges_of_what_a_store_holds_are_served(http: httpx.Client) -> None:
    edges = {"from": "1970-01-01T00:00:00Z", "to": "2262-04-11T00:00:00Z"}
    assert list_traces(http, **edges) == ["E", "D", "C", "B", "A"]
    assert get(http, "/v1/api/analytics/summary", **edges)["trace_count"] == 5


def test_unknown_parameter_is_refused(http: httpx.Client) -> None:
    error = refused(http.get("/v1/api/traces", params={"colour": "red"}), 400, "colour")
    assert error["reason"] == "UNKNOWN_PARAMETER"


# The longest value the HTTP server reliably admits in a request line (uvicorn's h11 refuses a
# line it has not seen the end of past 16 KiB); the gateway alone is tested with 2 MB.
LONG_VALUE = "x" * 15_000


@pytest.mark.parametrize(
    "parameter", ["from", "order_by"], ids=["refused by the gateway", "refused by the service"]
)
def test_a_long_parameter_value_is_quoted_not_echoed(http: httpx.Client, parameter: str) -> None:
    answer = http.get("/v1/api/traces", params={parameter: LONG_VALUE})

    error = refused(answer, 400, parameter)
    assert len(answer.content) < 2048
    assert error["message"].startswith(f"{parameter}: 'xxxx")
    assert " more characters) is not " in error["message"]


def test_get_trace_with_everything_attached(http: httpx.Client) -> None:
    a = RUNS["A"]
    body = get(http, f"/v1/api/traces/{a.trace_id}", include=["logs", "scores", "feedback"])
    assert body["trace"]["trace_id"] == a.trace_id
    assert [s["span_id"] for s in body["spans"]] == [
        a.span_id("root"),
        a.span_id("model"),
        a.span_id("tool"),
    ]
    assert [log["log_id"] for log in body["logs"]] == ["log-a-debug", "log-a-info"]
    assert sorted(s["score_id"] for s in body["scores"]) == ["score-a-help", "score-a-tox"]
    assert [f["feedback_id"] for f in body["feedback"]] == ["feedback-a"]

    refused(http.get(f"/v1/api/traces/{trace_id('nope')}"), 404, "trace_id")
    refused(http.get("/v1/api/traces/not-hex"), 400, "trace_id")


# --- spans, logs -------------------------------------------------------------------------------


def _span_order(spans: list[dict[str, Any]]) -> list[str]:
    """Span ids in the list's order: start time, trace id, span id, all descending."""
    ordered = sorted(
        spans, key=lambda s: (s["start_time"], s["trace_id"], s["span_id"]), reverse=True
    )
    return [s["span_id"] for s in ordered]


def test_span_list_newest_first_and_filtered(http: httpx.Client) -> None:
    every = [span for run in RUNS.values() for span in run.spans()]
    whole = get(http, "/v1/api/spans", limit=100)
    assert len(whole["spans"]) == SPAN_COUNT
    # The sent times share one format, so their strings order like the times.
    expected = _span_order(every)
    assert [s["span_id"] for s in whole["spans"]] == expected
    assert whole["page"] == {"has_more": False}

    b = RUNS["B"]
    of_b = get(http, "/v1/api/spans", trace_id=b.trace_id)["spans"]
    assert [s["span_id"] for s in of_b] == [
        b.span_id("tool"),
        *sorted([b.span_id("root"), b.span_id("model")], reverse=True),
    ]
    tool = of_b[0]
    assert tool["status"] == "error"
    assert tool["error"]["message"] == "search backend timed out"
    assert tool["parent_span_id"] == b.span_id("root")

    models = get(http, "/v1/api/spans", kind="model_inference")["spans"]
    assert [s["trace_id"] for s in models] == [RUNS[n].trace_id for n in "ECBA"]
    model_b = next(s for s in models if s["trace_id"] == b.trace_id)
    assert model_b["model"] == "gpt-4o"
    assert model_b["provider"] == "openai"
    assert model_b["cost"]["total_cost"] == 1.25
    assert model_b["usage"] == {"input_tokens": 2000, "output_tokens": 1000}

    errors = get(http, "/v1/api/spans", status="error")["spans"]
    assert [s["span_id"] for s in errors] == [RUNS["E"].span_id("root"), b.span_id("tool")]
    assert names_of_spans(get(http, "/v1/api/spans", model="claude-sonnet-4-5")) == ["E", "A"]
    assert [s["name"] for s in get(http, "/v1/api/spans", q="umbrella")["spans"]] == [
        "answer_ticket"
    ]

    page = get(http, "/v1/api/spans", limit=5)
    assert [s["span_id"] for s in page["spans"]] == expected[:5]
    assert page["page"]["has_more"] is True
    rest = get(http, "/v1/api/spans", limit=100, cursor=page["page"]["next_cursor"])
    assert [s["span_id"] for s in rest["spans"]] == expected[5:]

    refused(http.get("/v1/api/spans", params={"trace_id": "xyz"}), 400, "trace_id")
    refused(http.get("/v1/api/spans", params={"kind": "spaceship"}), 400, "kind[0]")


def names_of_spans(body: dict[str, Any]) -> list[str]:
    return names([{"trace_id": s["trace_id"]} for s in body["spans"]])


def test_log_list_keeps_the_level_and_above(http: httpx.Client) -> None:
    every = get(http, "/v1/api/logs")
    assert [r["log_id"] for r in every["logs"]] == [
        "log-e-fatal",
        "log-e-error",
        "log-c-info",
        "log-b-error",
        "log-b-warn",
        "log-a-info",
        "log-a-debug",
    ]
    first = every["logs"][0]
    assert first["level"] == "fatal"
    assert first["message"] == "worker crashed"
    assert first["timestamp"] == stamp(3003)
    assert first["trace_id"] == RUNS["E"].trace_id

    warn = get(http, "/v1/api/logs", level="warn")
    assert [r["log_id"] for r in warn["logs"]] == [
        "log-e-fatal",
        "log-e-error",
        "log-b-error",
        "log-b-warn",
    ]
    assert [r["log_id"] for r in get(http, "/v1/api/logs", level="trace")["logs"]] == [
        r["log_id"] for r in every["logs"]
    ]
    of_b = get(http, "/v1/api/logs", trace_id=RUNS["B"].trace_id, level="error")
    assert [r["log_id"] for r in of_b["logs"]] == ["log-b-error"]
    assert [r["log_id"] for r in get(http, "/v1/api/logs", q="backend")["logs"]] == ["log-b-error"]
    refused(http.get("/v1/api/logs", params={"level": "loud"}), 400, "level")


# --- metrics -----------------------------------------------------------------------------------


def bucket_start(offset: int, width: int) -> str:
    """The start of the epoch-aligned `width`-second bucket holding BASE + `offset`."""
    moment = BASE_NS // NS + offset
    return stamp(moment - moment % width - BASE_NS // NS)


def _series(body: dict[str, Any]) -> dict[str, list[tuple[str, float]]]:
    """label values -> [(bucket start, value)]."""
    found: dict[str, list[tuple[str, float]]] = {}
    for line in body["series"]:
        key = ",".join(f"{k}={v}" for k, v in sorted((line.get("labels") or {}).items()))
        found[key] = [(p["timestamp"], p["value"]) for p in line["points"]]
    return found


def test_counter_series_sums_per_bucket(http: httpx.Client) -> None:
    path = "/v1/api/metrics/orders.lookups/series"
    body = get(http, path, **WINDOW, bucket=HOUR_S, group_by="region")
    assert body["name"] == "orders.lookups"
    assert body["bucket"] == "3600s"
    assert _series(body) == {
        "region=eu": [(stamp(0), 3.0), (stamp(HOUR_S), 4.0)],
        "region=us": [(stamp(0), 3.0)],
    }
    eu, us = body["series"]
    assert eu["labels"] == {"region": "eu"}
    assert [p["count"] for p in eu["points"]] == [2, 1]
    assert [p["count"] for p in us["points"]] == [1]
    # The exemplar: the trace of the bucket's largest point that names one.
    assert eu["points"][0]["exemplar_trace_id"] == RUNS["A"].trace_id
    assert "exemplar_trace_id" not in us["points"][0]

    # Without group_by, one series per full label set. Two-hour buckets are aligned to the
    # epoch, so the eu points share one or not depending on the hour BASE falls on.
    whole = get(http, path, **WINDOW, bucket=2 * HOUR_S)
    eu_sums: dict[str, float] = {}
    for offset, value in [(60, 3.0), (HOUR_S + 60, 4.0)]:
        start = bucket_start(offset, 2 * HOUR_S)
        eu_sums[start] = eu_sums.get(start, 0.0) + value
    assert _series(whole) == {
        "region=eu": sorted(eu_sums.items()),
        "region=us": [(bucket_start(300, 2 * HOUR_S), 3.0)],
    }
    # The server chooses a bucket when none is asked for.
    chosen = get(http, path, **WINDOW)
    assert chosen["bucket"] == "60s"
    assert sum(p["value"] for line in chosen["series"] for p in line["points"]) == 10.0


def test_gauge_series_by_max_and_last(http: httpx.Client) -> None:
    path = "/v1/api/metrics/queue.depth/series"
    top = get(http, path, **WINDOW, bucket=HOUR_S, agg="max")
    assert _series(top) == {"queue=ingest": [(stamp(0), 9.0)]}
    last = get(http, path, **WINDOW, bucket=HOUR_S, group_by="queue")  # last is the default
    assert _series(last) == {"queue=ingest": [(stamp(0), 7.0)]}
    lowest = get(http, path, **WINDOW, bucket=HOUR_S, agg="min", group_by="missing")
    assert lowest["series"][0]["labels"] == {"missing": None}
    assert [p["value"] for p in lowest["series"][0]["points"]] == [5.0]
    refused(http.get(path, params={**WINDOW, "agg": "sum"}), 400, "agg")


def test_histogram_series_answers_a_quantile(http: httpx.Client) -> None:
    path = "/v1/api/metrics/request.duration/series"

    def by_route(agg: str) -> dict[str, float]:
        """route -> the value of its one point (in the first hour)."""
        body = get(http, path, **WINDOW, bucket=HOUR_S, agg=agg, group_by="route")
        assert body["unit"] == "ms"
        found: dict[str, float] = {}
        for line in body["series"]:
            [point] = line["points"]
            assert point["timestamp"] == stamp(0)
            found[line["labels"]["route"]] = point["value"]
        return found

    # Observations spread evenly inside each histogram bucket, the open ends bounded by the
    # point's min and max. /answer: 10 observations, 4 in [20, 100], 4 in (100, 500],
    # 1 in (500, 1000], 1 in (1000, 1500]: the 9.5th lies halfway through the last.
    # /summarize: 3 observations, 2 in [10, 100], 1 in (100, 400]: 85% through the last.
    assert by_route("p95") == {
        "/answer": pytest.approx(1250.0),
        "/summarize": pytest.approx(355.0),
    }
    assert by_route("p50")["/answer"] == pytest.approx(200.0)
    assert by_route("mean") == {"/answer": pytest.approx(320.0), "/summarize": pytest.approx(100.0)}
    assert by_route("count") == {"/answer": 10.0, "/summarize": 3.0}


def test_metric_series_refusals(http: httpx.Client) -> None:
    path = "/v1/api/metrics/orders.lookups/series"
    refused(http.get(path, params={**WINDOW, "agg": "median-ish"}), 400, "agg")
    refused(http.get(path, params={"from": at(60), "to": at(0)}), 400, "from")


# --- scores, feedback ---------------------------------------------------------------------------


def test_score_and_feedback_lists(http: httpx.Client) -> None:
    every = get(http, "/v1/api/scores")
    assert [s["score_id"] for s in every["scores"]] == [
        "score-e-help",
        "score-b-help",
        "score-a-tox",
        "score-a-help",
    ]
    assert every["scores"][1]["value"] == 0.25
    assert every["scores"][1]["source"] == "live"
    helpful = get(http, "/v1/api/scores", scorer_id="helpfulness", limit=2)
    assert [s["score_id"] for s in helpful["scores"]] == ["score-e-help", "score-b-help"]
    rest = get(
        http,
        "/v1/api/scores",
        scorer_id="helpfulness",
        limit=2,
        cursor=helpful["page"]["next_cursor"],
    )
    assert [s["score_id"] for s in rest["scores"]] == ["score-a-help"]
    assert rest["page"] == {"has_more": False}
    assert [s["score_id"] for s in get(http, "/v1/api/scores", source="offline")["scores"]] == [
        "score-a-tox"
    ]
    of_a = get(http, "/v1/api/scores", trace_id=RUNS["A"].trace_id)
    assert [s["score_id"] for s in of_a["scores"]] == ["score-a-tox", "score-a-help"]

    given = get(http, "/v1/api/feedback")
    assert [f["feedback_id"] for f in given["feedback"]] == [
        "feedback-c",
        "feedback-b",
        "feedback-a",
    ]
    assert given["feedback"][0]["value"] == 4
    assert given["feedback"][0]["kind"] == "rating"
    thumbs = get(http, "/v1/api/feedback", kind="thumbs")
    assert [(f["feedback_id"], f["value"]) for f in thumbs["feedback"]] == [
        ("feedback-b", "down"),
        ("feedback-a", "up"),
    ]
    refused(http.get("/v1/api/feedback", params={"kind": "shrug"}), 400, "kind")


# --- analytics ---------------------------------------------------------------------------------


def test_analytics_summary_over_the_window(http: httpx.Client) -> None:
    body = get(http, "/v1/api/analytics/summary", **WINDOW)
    assert body["from"] == stamp(0)
    assert body["to"] == stamp(2 * HOUR_S)
    assert body["trace_count"] == 5
    assert body["span_count"] == SPAN_COUNT
    assert body["error_count"] == 2
    assert body["error_rate"] == pytest.approx(0.4)
    assert body["input_tokens"] == 6400
    assert body["output_tokens"] == 2400
    assert body["total_cost"] == 3.875
    assert body["currency"] == "USD"
    # Durations 1, 2, 3, 4 and 8 s; quantiles interpolate linearly. The window holds whole
    # hours, answered from rollups: quantiles and max within the sketch's bound, the mean exact.
    latency = body["latency"]
    assert latency["p50"] == pytest.approx(3000, rel=SKETCH)
    assert latency["p90"] == pytest.approx(6400, rel=SKETCH)
    assert latency["p95"] == pytest.approx(7200, rel=SKETCH)
    assert latency["p99"] == pytest.approx(7840, rel=SKETCH)
    assert latency["mean"] == pytest.approx(3600)
    assert latency["max"] == pytest.approx(8000, rel=SKETCH)
    assert body.get("groups", []) == []

    # Without a window: the last 24 hours, which hold the whole dataset.
    assert get(http, "/v1/api/analytics/summary")["trace_count"] == 5
    later = get(http, "/v1/api/analytics/summary", **{"from": at(1800), "to": at(HOUR_S)})
    assert (later["trace_count"], later["error_count"]) == (3, 1)


def test_analytics_summary_grouped_by_model_and_environment(http: httpx.Client) -> None:
    by_model = get(http, "/v1/api/analytics/summary", **WINDOW, group_by="model")
    groups = {g["key"]: g for g in by_model["groups"]}
    assert [g["key"] for g in by_model["groups"]] == ["claude-sonnet-4-5", "gpt-4o"]
    claude, gpt = groups["claude-sonnet-4-5"], groups["gpt-4o"]
    assert (claude["count"], claude["error_count"]) == (2, 0)
    assert (claude["input_tokens"], claude["output_tokens"]) == (4000, 1300)
    assert claude["total_cost"] == 2.5
    # The model calls' own durations (within the rollups' sketch bound).
    assert claude["latency"]["max"] == pytest.approx(2000, rel=SKETCH)
    assert (gpt["count"], gpt["input_tokens"], gpt["output_tokens"]) == (2, 2400, 1100)
    assert gpt["total_cost"] == 1.375

    by_environment = get(http, "/v1/api/analytics/summary", **WINDOW, group_by="environment")
    environments = {g["key"]: g for g in by_environment["groups"]}
    assert sorted(environments) == ["production", "staging"]
    assert (environments["production"]["count"], environments["production"]["error_count"]) == (
        3,
        2,
    )
    assert environments["staging"]["count"] == 2
    assert environments["staging"]["total_cost"] == 0.125

    refused(http.get("/v1/api/analytics/summary", params={"group_by": "colour"}), 400, "group_by")


def test_cost_breakdown_by_model_in_buckets(http: httpx.Client) -> None:
    body = get(http, "/v1/api/analytics/cost", **WINDOW, group_by="model", bucket=1800)
    assert body["currency"] == "USD"
    assert body["total_cost"] == 3.875
    assert [(g["key"], g["total_cost"]) for g in body["groups"]] == [
        ("claude-sonnet-4-5", 2.5),
        ("gpt-4o", 1.375),
    ]
    assert [
        (p["timestamp"], p["key"], p["total_cost"], p.get("input_tokens"), p.get("output_tokens"))
        for p in body["series"]
    ] == [
        (stamp(0), "claude-sonnet-4-5", 0.5, 1000, 500),
        (stamp(0), "gpt-4o", 1.25, 2000, 1000),
        (stamp(1800), "claude-sonnet-4-5", 2.0, 3000, 800),
        (stamp(1800), "gpt-4o", 0.125, 400, 100),
    ]

    ungrouped = get(http, "/v1/api/analytics/cost", **WINDOW, bucket=HOUR_S)
    assert [(p["timestamp"], p["key"], p["total_cost"]) for p in ungrouped["series"]] == [
        (stamp(0), "", 3.875)
    ]
    assert ungrouped.get("groups", []) == []
    refused(http.get("/v1/api/analytics/cost", params={**WINDOW, "bucket": 0}), 400, "bucket")


# --- discovery ---------------------------------------------------------------------------------


def test_discovery_lists_facet_values(http: httpx.Client) -> None:
    environments = get(http, "/v1/api/discovery", facet="environment")
    assert environments["facet"] == "environment"
    assert [v["value"] for v in environments["values"]] == ["production", "staging"]
    assert all(v["last_seen"].endswith("Z") for v in environments["values"])
    assert "key" not in environments

    def values(**params: Any) -> list[str]:
        return [v["value"] for v in get(http, "/v1/api/discovery", **params)["values"]]

    assert values(facet="tag") == ["beta", "nightly", "vip"]
    assert values(facet="service_name", prefix="s") == ["summarizer", "support-bot"]
    assert values(facet="service_name", limit=1) == ["evaluator"]
    assert values(facet="metric_name") == ["orders.lookups", "queue.depth", "request.duration"]
    assert values(facet="metric_label_key") == ["queue", "region", "route"]
    labelled = get(http, "/v1/api/discovery", facet="metric_label_value", key="region")
    assert labelled["key"] == "region"
    assert [v["value"] for v in labelled["values"]] == ["eu", "us"]

    refused(http.get("/v1/api/discovery", params={"facet": "metric_label_value"}), 400, "key")
    refused(http.get("/v1/api/discovery", params={"facet": "tag", "key": "x"}), 400, "key")
    refused(http.get("/v1/api/discovery"), 400, "facet")


def test_capabilities_describe_sqlite(http: httpx.Client) -> None:
    body = get(http, "/v1/api/capabilities")
    assert body["backend"] == "sqlite"
    assert body["text_search"] == "words"
    assert body["discovery"] is True
    assert body["delta_polling"] is True


# --- changes: deltas, delete, erasure ----------------------------------------------------------


def test_delta_polls_return_exactly_what_arrived(own_http: httpx.Client) -> None:
    http = own_http
    start = get(http, "/v1/api/deltas", signal="spans")
    assert start["signal"] == "spans"
    assert start["spans"] == []
    assert start["has_more"] is False
    cursor = start["cursor"]
    assert cursor
    traces_start = get(http, "/v1/api/deltas", signal="traces")["cursor"]

    late = Run(
        "F",
        "answer_ticket",
        start=4000,
        duration=2,
        user="erin",
        environment="production",
        service="support-bot",
        model="gpt-4o",
        provider="openai",
        tokens=(10, 10),
        costs=(0.5, 0.5),
        tool="lookup_order",
    )
    ingest(http, {"spans": late.spans()})

    arrived = get(http, "/v1/api/deltas", signal="spans", cursor=cursor)
    assert sorted(s["span_id"] for s in arrived["spans"]) == sorted(
        late.span_id(part) for part in late.span_names
    )
    assert arrived["has_more"] is False
    assert arrived["traces"] == []
    assert arrived["logs"] == []
    assert arrived["cursor"] != cursor

    again = get(http, "/v1/api/deltas", signal="spans", cursor=arrived["cursor"])
    assert again["spans"] == []
    assert again["cursor"] == arrived["cursor"]

    traces = get(http, "/v1/api/deltas", signal="traces", cursor=traces_start)
    assert [t["trace_id"] for t in traces["traces"]] == [late.trace_id]
    assert traces["traces"][0]["span_count"] == 3

    # Paged polls: one row at a time, each exactly once.
    seen: list[str] = []
    position = cursor
    for _ in range(10):
        page = get(http, "/v1/api/deltas", signal="spans", cursor=position, limit=1)
        seen.extend(s["span_id"] for s in page["spans"])
        position = page["cursor"]
        if not page["has_more"]:
            break
    assert sorted(seen) == sorted(late.span_id(part) for part in late.span_names)

    refused(http.get("/v1/api/deltas", params={"signal": "logs", "cursor": cursor}), 400, "cursor")
    refused(http.get("/v1/api/deltas"), 400, "signal")


def test_deleting_a_trace_removes_it_and_what_hangs_off_it(own_http: httpx.Client) -> None:
    http = own_http
    b = RUNS["B"]
    answer = http.delete(f"/v1/api/traces/{b.trace_id}")
    assert answer.status_code == 200, answer.text
    # The trace row, three spans, two logs, one score, one piece of feedback.
    assert answer.json() == {"deleted": 8}

    refused(http.get(f"/v1/api/traces/{b.trace_id}"), 404, "trace_id")
    refused(http.delete(f"/v1/api/traces/{b.trace_id}"), 404, "trace_id")
    assert list_traces(http) == ["E", "D", "C", "A"]
    assert get(http, "/v1/api/spans", trace_id=b.trace_id)["spans"] == []
    assert get(http, "/v1/api/logs", trace_id=b.trace_id)["logs"] == []
    assert get(http, "/v1/api/scores", trace_id=b.trace_id)["scores"] == []
    assert get(http, "/v1/api/feedback", trace_id=b.trace_id)["feedback"] == []


def test_erasure_of_a_user_removes_their_runs_and_nothing_else(own_http: httpx.Client) -> None:
    http = own_http
    answer = http.post("/v1/api/erasure", json={"user_id": "alice"})
    assert answer.status_code == 200, answer.text
    result = answer.json()
    # alice: runs A (3 spans, 2 logs, 2 scores, 1 feedback, 1 metric point) and C (2 spans,
    # 1 log, 1 feedback).
    expected = {"traces": 2, "spans": 5, "logs": 3, "metrics": 1, "scores": 2, "feedback": 2}
    assert {name: result.get(name, 0) for name in expected} == expected
    assert result["deleted"] == sum(expected.values())
    assert "alice" not in answer.text

    assert list_traces(http) == ["E", "D", "B"]
    assert list_traces(http, user_id="alice") == []
    refused(http.get(f"/v1/api/traces/{RUNS['A'].trace_id}"), 404, "trace_id")
    assert [r["log_id"] for r in get(http, "/v1/api/logs")["logs"]] == [
        "log-e-fatal",
        "log-e-error",
        "log-b-error",
        "log-b-warn",
    ]
    assert len(get(http, "/v1/api/spans", limit=100)["spans"]) == SPAN_COUNT - 5

    again = http.post("/v1/api/erasure", json={"user_id": "alice"}).json()
    assert again["deleted"] == 0
    refused(http.post("/v1/api/erasure", json={}), 400, "user_id")
