"""Native ingest end to end: POST /v1/api/ingest to a real daemon, read back over REST."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from mcpd.testing.daemon import DaemonProcess
from tests.e2e.conftest import BACKENDS, PROCESSES, storage_env
from tests.e2e.ingest_payloads import T0, agent_trace, new_span_id, new_trace_id

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module", params=BACKENDS)
def daemon(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[DaemonProcess]:
    """One daemon per backend for the module: each test ingests and reads traces of its own
    (new ids), so none sees another's."""
    directory = tmp_path_factory.mktemp(f"native-{request.param}")
    env = storage_env(request.param, directory, request)
    with DaemonProcess(extra_env=env, processes=PROCESSES) as running:
        yield running


async def _ingest(http: httpx.AsyncClient, body: dict[str, Any]) -> dict[str, Any]:
    answer = await http.post("/v1/api/ingest", json=body)
    assert answer.status_code == 200, answer.text
    result: dict[str, Any] = answer.json()
    return result


async def test_every_signal_round_trips_with_projection_cost_and_hashed_user(
    daemon: DaemonProcess,
) -> None:
    trace_id = new_trace_id()
    async with httpx.AsyncClient(base_url=daemon.http_url, timeout=30) as http:
        result = await _ingest(http, agent_trace(trace_id))
        detail = await http.get(
            f"/v1/api/traces/{trace_id}", params={"include": ["logs", "scores", "feedback"]}
        )

    assert result == {"accepted": 7, "rejected": 0, "duplicate": 0, "errors": []}
    assert detail.status_code == 200, detail.text
    body = detail.json()
    trace = body["trace"]
    assert trace["name"] == "answer_ticket"
    assert trace["kind"] == "agent_run"
    assert trace["status"] == "ok"
    assert trace["span_count"] == 3
    assert trace["error_count"] == 0
    assert trace["model_count"] == 1
    assert trace["tool_count"] == 1
    assert trace["is_complete"] is True
    assert trace["duration_ns"] == 2_000_000_000
    assert trace["tags"] == ["beta"]
    assert trace["usage"]["input_tokens"] == 1000
    assert trace["usage"]["output_tokens"] == 500
    assert trace["score_summary"] == {"helpfulness": 0.75}
    assert trace["feedback_summary"] == {"thumbs": {"up": 1}}
    correlation = trace["correlation"]
    assert correlation["service_name"] == "support-bot"
    assert correlation["environment"] == "production"
    assert correlation["session_id"] == "session-7"
    # Stored as a keyed digest, never as sent.
    assert correlation["user_id"] != "user-42"
    assert "user-42" not in detail.text

    spans = body["spans"]
    assert [span["name"] for span in spans] == [
        "answer_ticket",
        "chat claude-sonnet-4-5",
        "lookup_order",
    ]
    model_span = spans[1]
    assert model_span["kind"] == "model_inference"
    assert model_span["usage"]["input_details"] == {"cache_read": 600, "text": 400}
    assert model_span["usage"]["output_details"] == {"reasoning": 200, "text": 300}
    cost = model_span["cost"]
    assert cost["is_estimated"] is True
    assert cost["currency"] == "USD"
    assert cost["price_book"]
    # Sonnet 4.5 list prices: $3/M input, $0.30/M cache read, $15/M output (reasoning is output).
    assert cost["input_cost"] == pytest.approx(400 * 3e-6 + 600 * 0.3e-6)
    assert cost["output_cost"] == pytest.approx(500 * 15e-6)
    assert cost["total_cost"] == pytest.approx(cost["input_cost"] + cost["output_cost"])
    assert trace["cost"]["total_cost"] == pytest.approx(cost["total_cost"])
    assert [log["message"] for log in body["logs"]] == ["order found"]
    assert [score["value"] for score in body["scores"]] == [0.75]
    assert [feedback["value"] for feedback in body["feedback"]] == ["up"]


async def test_partial_rejection_names_each_bad_record_by_signal_and_index(
    daemon: DaemonProcess,
) -> None:
    trace_id = new_trace_id()
    batch = agent_trace(trace_id)
    spans = batch["spans"]
    assert isinstance(spans, list)
    good = dict(spans[2])
    bad_id = dict(good, span_id="xyz", name="bad id")
    no_kind = {k: v for k, v in good.items() if k != "kind"} | {"span_id": new_span_id()}
    backwards = dict(good, span_id=new_span_id(), end_time=T0, start_time="2026-11-29T11:00:00Z")
    batch["spans"] = [spans[0], bad_id, spans[1], no_kind, backwards]
    metrics = batch["metrics"]
    assert isinstance(metrics, list)
    batch["metrics"] = [dict(metrics[0], labels={"user_id": "u1"})]

    async with httpx.AsyncClient(base_url=daemon.http_url, timeout=30) as http:
        result = await _ingest(http, batch)
        detail = (await http.get(f"/v1/api/traces/{trace_id}")).json()

    assert result["accepted"] == 2 + 3  # two spans, the log, the score, the feedback
    assert result["rejected"] == 4
    assert result["duplicate"] == 0
    errors = result["errors"]
    assert isinstance(errors, list)
    assert [(e["signal"], e["index"]) for e in errors] == [
        ("span", 1),
        ("span", 3),
        ("span", 4),
        ("metric", 0),
    ]
    assert errors[0]["message"].startswith("span_id must be 16 hex characters")
    assert errors[1]["message"] == "kind is required"
    assert errors[2]["message"] == "end_time is before start_time"
    assert "labels.user_id" in errors[3]["message"]
    assert "cardinality" in errors[3]["message"]
    assert detail["trace"]["span_count"] == 2


async def test_replayed_and_concurrent_batches_with_one_key_are_stored_once(
    daemon: DaemonProcess,
) -> None:
    trace_id = new_trace_id()
    batch = agent_trace(trace_id) | {"ingest_key": f"batch-{trace_id}"}
    async with httpx.AsyncClient(base_url=daemon.http_url, timeout=60) as http:
        first = await _ingest(http, batch)
        replay = await _ingest(http, batch)
        other_trace = new_trace_id()
        racing = agent_trace(other_trace) | {"ingest_key": f"batch-{other_trace}"}
        raced = await asyncio.gather(*(_ingest(http, racing) for _ in range(8)))
        detail = await http.get(f"/v1/api/traces/{trace_id}", params={"include": "scores"})
        raced_detail = (await http.get(f"/v1/api/traces/{other_trace}")).json()

    assert first == {"accepted": 7, "rejected": 0, "duplicate": 0, "errors": []}
    assert replay == {"accepted": 0, "rejected": 0, "duplicate": 7, "errors": []}
    assert detail.json()["trace"]["span_count"] == 3
    assert len(detail.json()["scores"]) == 1
    assert sorted(r["accepted"] for r in raced) == [0] * 7 + [7]
    assert sorted(r["duplicate"] for r in raced) == [0] + [7] * 7
    assert raced_detail["trace"]["span_count"] == 3


async def test_unknown_trace_is_not_found_and_bad_include_is_invalid(
    daemon: DaemonProcess,
) -> None:
    async with httpx.AsyncClient(base_url=daemon.http_url, timeout=30) as http:
        missing = await http.get(f"/v1/api/traces/{new_trace_id()}")
        bad = await http.get(f"/v1/api/traces/{new_trace_id()}", params={"include": "spans"})

    assert missing.status_code == 404
    assert missing.json()["error"]["field"] == "trace_id"
    assert bad.status_code == 400
    assert bad.json()["error"]["field"] == "include"
