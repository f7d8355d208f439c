"""OTLP end to end: the OpenTelemetry SDKs' own exporters against a real `mcpd serve`.

Python SDK exporters over OTLP/gRPC (port 4317) and OTLP/HTTP protobuf (/v1/traces, /v1/logs,
/v1/metrics); the JavaScript SDK's exporters over OTLP/HTTP JSON (tests/e2e/otlp_js: the Python
SDK ships no JSON exporter). Each sends GenAI-instrumented spans, a log record and metrics;
the trace is read back over REST with its kinds, usage details, cost and correlation, and the
metric points are read from the store. Oversized spans, over OTLP/HTTP and over the native REST
route beside it, are read back truncated to the per-record limits.

The tests share one daemon: each sends its own services and traces.
"""

from __future__ import annotations

import asyncio
import json
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from opentelemetry import trace
from opentelemetry._logs import SeverityNumber
from opentelemetry.exporter.otlp.proto.grpc._log_exporter import OTLPLogExporter as GrpcLogs
from opentelemetry.exporter.otlp.proto.grpc.metric_exporter import OTLPMetricExporter as GrpcMetrics
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcSpans
from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter as HttpLogs
from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter as HttpMetrics
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpSpans
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import SimpleLogRecordProcessor
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import SpanLimits, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.trace import Status, StatusCode
from sqlalchemy import create_engine, text

from mcpd.testing.daemon import DaemonProcess
from tests.e2e.conftest import PROCESSES
from tests.e2e.ingest_payloads import T0, T1, new_span_id, new_trace_id

pytestmark = pytest.mark.e2e

PRODUCER = Path(__file__).resolve().parent / "otlp_js"
RESOURCE = {
    "service.name": "support-agent",
    "service.version": "1.4.2",
    "deployment.environment.name": "staging",
    "user.id": "customer-981",
}


@pytest.fixture(scope="module")
def daemon() -> Iterator[DaemonProcess]:
    with DaemonProcess(processes=PROCESSES) as running:
        yield running


def _emit_with_python_sdk(
    spans: Any, logs: Any, metrics: Any, resource_extra: dict[str, str]
) -> str:
    """One agent run through the Python SDK; returns its trace id (hex)."""
    resource = Resource.create(RESOURCE | resource_extra)
    tracer_provider = TracerProvider(resource=resource)
    tracer_provider.add_span_processor(SimpleSpanProcessor(spans))
    tracer = tracer_provider.get_tracer("support-agent")
    with tracer.start_as_current_span(
        "invoke_agent support",
        attributes={
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.agent.name": "support",
            "gen_ai.conversation.id": "conversation-5",
        },
    ) as root:
        with tracer.start_as_current_span(
            "chat gpt-4o",
            kind=trace.SpanKind.CLIENT,
            attributes={
                "gen_ai.operation.name": "chat",
                "gen_ai.provider.name": "openai",
                "gen_ai.request.model": "gpt-4o",
                "gen_ai.request.temperature": 0.2,
                "gen_ai.request.max_tokens": 512,
                "gen_ai.usage.input_tokens": 1200,
                "gen_ai.usage.output_tokens": 300,
                "gen_ai.usage.cache_read.input_tokens": 1000,
                "gen_ai.usage.reasoning.output_tokens": 200,
            },
        ):
            pass
        with tracer.start_as_current_span(
            "execute_tool search_docs",
            attributes={"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "search_docs"},
        ) as tool:
            tool.set_status(Status(StatusCode.ERROR, "search backend timed out"))
        trace_id = format(root.get_span_context().trace_id, "032x")
        span_id = root.get_span_context().span_id

    logger_provider = LoggerProvider(resource=resource)
    logger_provider.add_log_record_processor(SimpleLogRecordProcessor(logs))
    span_context = trace.SpanContext(
        int(trace_id, 16), span_id, is_remote=False, trace_flags=trace.TraceFlags(1)
    )
    logger_provider.get_logger("support-agent").emit(
        body="answered the ticket",
        severity_number=SeverityNumber.WARN,
        context=trace.set_span_in_context(trace.NonRecordingSpan(span_context)),
    )
    logger_provider.shutdown()

    reader = PeriodicExportingMetricReader(metrics, export_interval_millis=3_600_000)
    meter_provider = MeterProvider(resource=resource, metric_readers=[reader])
    meter = meter_provider.get_meter("support-agent")
    meter.create_histogram("gen_ai.client.token.usage", unit="{token}").record(
        1500, {"gen_ai.token.type": "input"}
    )
    meter_provider.shutdown()
    tracer_provider.shutdown()
    return trace_id


def _grpc_exporters(daemon: DaemonProcess) -> tuple[Any, Any, Any]:
    endpoint = daemon.otlp_grpc_addr
    return (
        GrpcSpans(endpoint=endpoint, insecure=True),
        GrpcLogs(endpoint=endpoint, insecure=True),
        GrpcMetrics(endpoint=endpoint, insecure=True),
    )


def _http_exporters(daemon: DaemonProcess) -> tuple[Any, Any, Any]:
    base = daemon.http_url
    return (
        HttpSpans(endpoint=f"{base}/v1/traces"),
        HttpLogs(endpoint=f"{base}/v1/logs"),
        HttpMetrics(endpoint=f"{base}/v1/metrics"),
    )


EXPORTERS: dict[str, Callable[[DaemonProcess], tuple[Any, Any, Any]]] = {
    "grpc": _grpc_exporters,
    "http-protobuf": _http_exporters,
}


def _metric_points(daemon: DaemonProcess, service: str) -> Iterator[dict[str, Any]]:
    engine = create_engine(f"sqlite:///{daemon.data_dir / 'trace.db'}")
    try:
        with engine.connect() as connection:
            rows = connection.execute(
                text(
                    "SELECT name, kind, value, unit, labels, service_name, environment"
                    " FROM metrics WHERE service_name = :service"
                ),
                {"service": service},
            )
            for row in rows.mappings():
                yield dict(row)
    finally:
        engine.dispose()


@pytest.mark.parametrize("route", sorted(EXPORTERS))
async def test_python_sdk_exporters_round_trip(daemon: DaemonProcess, route: str) -> None:
    spans, logs, metrics = EXPORTERS[route](daemon)
    service = f"support-agent-{route}"
    trace_id = await asyncio.to_thread(
        _emit_with_python_sdk, spans, logs, metrics, {"service.name": service}
    )
    async with httpx.AsyncClient(base_url=daemon.http_url, timeout=30) as http:
        answer = await http.get(f"/v1/api/traces/{trace_id}", params={"include": "logs"})

    assert answer.status_code == 200, answer.text
    detail = answer.json()
    _assert_agent_run(detail, service=service, environment="staging")
    assert detail["trace"]["correlation"]["service_version"] == "1.4.2"
    assert [(log["level"], log["message"]) for log in detail["logs"]] == [
        ("warn", "answered the ticket")
    ]
    points = list(_metric_points(daemon, service))
    assert [(p["name"], p["kind"], p["value"], p["unit"]) for p in points] == [
        ("gen_ai.client.token.usage", "histogram", 1500.0, "{token}")
    ]
    assert json.loads(points[0]["labels"]) == {"gen_ai.token.type": "input"}


def _assert_agent_run(detail: dict[str, Any], *, service: str, environment: str) -> None:
    trace_row = detail["trace"]
    assert trace_row["name"] == "invoke_agent support"
    assert trace_row["kind"] == "agent_run"
    assert trace_row["status"] == "error"
    assert trace_row["span_count"] == 3
    assert trace_row["error_count"] == 1
    assert trace_row["model_count"] == 1
    assert trace_row["tool_count"] == 1
    correlation = trace_row["correlation"]
    assert correlation["service_name"] == service
    assert correlation["environment"] == environment
    assert correlation["session_id"] == "conversation-5"
    assert correlation["user_id"].startswith("hmac-sha256:")
    kinds = {span["name"]: span["kind"] for span in detail["spans"]}
    assert kinds == {
        "invoke_agent support": "agent_run",
        "chat gpt-4o": "model_inference",
        "execute_tool search_docs": "tool_call",
    }
    chat = next(span for span in detail["spans"] if span["kind"] == "model_inference")
    assert chat["model"] == "gpt-4o"
    assert chat["provider"] == "openai"
    assert chat["usage"] == {
        "input_tokens": 1200,
        "output_tokens": 300,
        "input_details": {"cache_read": 1000, "text": 200},
        "output_details": {"reasoning": 200, "text": 100},
    }
    assert chat["model_parameters"]["temperature"] == 0.2
    assert chat["model_parameters"]["max_tokens"] == 512
    cost = chat["cost"]
    assert cost["is_estimated"] is True
    # gpt-4o list prices: $2.50/M input, $1.25/M cache read, $10/M output.
    assert cost["input_cost"] == pytest.approx(200 * 2.5e-6 + 1000 * 1.25e-6)
    assert cost["output_cost"] == pytest.approx(300 * 10e-6)
    assert trace_row["cost"]["total_cost"] == pytest.approx(cost["total_cost"])
    tool = next(span for span in detail["spans"] if span["kind"] == "tool_call")
    assert tool["status"] == "error"
    assert tool["error"]["message"] == "search backend timed out"
    assert tool["entity_name"] == "search_docs"


async def test_javascript_sdk_json_exporters_round_trip(
    daemon: DaemonProcess, tmp_path: Path
) -> None:
    scenario = json.loads((PRODUCER / "scenario.example.json").read_text())
    scenario["service_name"] = "support-agent-js"
    scenario["compression"] = "gzip"
    chat = next(span for span in scenario["spans"] if span["key"] == "chat")
    chat["attributes"] |= {
        "gen_ai.usage.cache_read.input_tokens": 1000,
        "gen_ai.usage.reasoning.output_tokens": 40,
    }
    path = tmp_path / "scenario.json"
    path.write_text(json.dumps(scenario))
    node = shutil.which("node")
    assert node is not None, "node is not on PATH"
    process = await asyncio.create_subprocess_exec(
        node,
        str(PRODUCER / "produce.mjs"),
        daemon.http_url,
        "",
        str(path),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    stdout, stderr = await asyncio.wait_for(process.communicate(), timeout=60)
    assert process.returncode == 0, stderr.decode()
    (trace_id,) = json.loads(stdout)["trace_ids"]

    async with httpx.AsyncClient(base_url=daemon.http_url, timeout=30) as http:
        answer = await http.get(f"/v1/api/traces/{trace_id}", params={"include": "logs"})

    assert answer.status_code == 200, answer.text
    detail = answer.json()
    trace_row = detail["trace"]
    assert trace_row["kind"] == "agent_run"
    assert trace_row["status"] == "error"
    assert trace_row["span_count"] == 3
    assert trace_row["correlation"]["service_name"] == "support-agent-js"
    assert trace_row["correlation"]["environment"] == "e2e"
    assert trace_row["correlation"]["session_id"] == "conv-42"
    chat_span = next(span for span in detail["spans"] if span["kind"] == "model_inference")
    assert chat_span["model"] == "gpt-4o-2024-08-06"
    assert chat_span["usage"]["input_details"] == {"cache_read": 1000, "text": 200}
    assert chat_span["usage"]["output_details"] == {"reasoning": 40, "text": 45}
    assert chat_span["cost"]["is_estimated"] is True
    assert chat_span["cost"]["total_cost"] == pytest.approx(
        200 * 2.5e-6 + 1000 * 1.25e-6 + 85 * 10e-6
    )
    assert [log["message"] for log in detail["logs"]] == ["model answered in 800 ms"]
    points = list(_metric_points(daemon, "support-agent-js"))
    assert sorted((p["name"], p["kind"]) for p in points) == [
        ("gen_ai.client.operation.count", "gauge"),
        ("gen_ai.client.token.usage", "histogram"),
    ]


# --- per-record limits --------------------------------------------------------------------------

# Five times the default payload limit of a record (1 MiB), well within the request size limits.
OVERSIZED = 5 * 1024 * 1024
PAYLOAD_LIMIT = 1024 * 1024
SPAN_PAYLOAD = ("input", "output", "attributes", "metadata", "error", "links")


def _compact(value: Any) -> str:
    """`value` as the stores keep it: compact JSON text."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def _stored_size(value: Any) -> int:
    return len(_compact(value).encode())


async def _read_spans(daemon: DaemonProcess, trace_id: str) -> list[dict[str, Any]]:
    async with httpx.AsyncClient(base_url=daemon.http_url, timeout=60) as http:
        answer = await http.get(f"/v1/api/traces/{trace_id}")
    assert answer.status_code == 200, answer.text
    # A head of the payload came back, not the payload.
    assert len(answer.content) < 2 * PAYLOAD_LIMIT
    spans: list[dict[str, Any]] = answer.json()["spans"]
    return spans


def _assert_truncated(span: dict[str, Any], original: Any) -> None:
    """The span's input is the marker of `original`, and its payload fits the limit."""
    marker = span["input"]
    assert marker["truncated"] is True
    assert marker["original_bytes"] == _stored_size(original)
    text = original if isinstance(original, str) else _compact(original)
    assert text.startswith(marker["head"])
    # The payload fields, sized as the limit sizes them (a JSON array of them): the head fills
    # what the rest leaves.
    payload = _stored_size([span.get(name) for name in SPAN_PAYLOAD])
    assert PAYLOAD_LIMIT - 256 < payload <= PAYLOAD_LIMIT


async def test_an_oversized_native_span_is_stored_truncated_with_the_rest_intact(
    daemon: DaemonProcess,
) -> None:
    trace_id = new_trace_id()
    log_lines = "GET /orders/42 200 12ms\n" * (OVERSIZED // 24)
    # One key per object: a document's key order is not kept on the way through protobuf.
    prompt = {"messages": [{"content": f"summarise this log:\n{log_lines}"}]}
    answer_text = {"role": "assistant", "content": "every request succeeded"}
    span = {
        "trace_id": trace_id,
        "span_id": new_span_id(),
        "name": "chat gpt-4o",
        "kind": "model_inference",
        "status": "ok",
        "start_time": T0,
        "end_time": T1,
        "model": "gpt-4o",
        "provider": "openai",
        "usage": {"input_tokens": 1_200_000, "output_tokens": 4},
        "input": prompt,
        "output": answer_text,
        "attributes": {"http.route": "/summarise"},
        "correlation": {"project": "", "service_name": "limits-native"},
    }
    async with httpx.AsyncClient(base_url=daemon.http_url, timeout=60) as http:
        answer = await http.post("/v1/api/ingest", json={"spans": [span]})
    assert answer.status_code == 200, answer.text
    assert answer.json() == {"accepted": 1, "rejected": 0, "duplicate": 0, "errors": []}

    (stored,) = await _read_spans(daemon, trace_id)

    _assert_truncated(stored, prompt)
    assert stored["attributes"] == {
        "http.route": "/summarise",
        "mcpd.truncated": {"fields": {"input": _stored_size(prompt)}},
    }
    assert stored["output"] == answer_text
    assert (stored["name"], stored["kind"], stored["status"]) == (
        "chat gpt-4o",
        "model_inference",
        "ok",
    )
    assert (stored["start_time"], stored["end_time"]) == (T0, T1)
    assert stored["usage"]["input_tokens"] == 1_200_000
    assert stored["cost"]["is_estimated"] is True
    assert stored["correlation"]["service_name"] == "limits-native"


def _emit_oversized_span(exporter: Any, text: str) -> str:
    """One span through the Python SDK whose input, attributes and events are all past the
    default limits (the SDK's own limits raised so it sends them); its trace id (hex)."""
    provider = TracerProvider(
        resource=Resource.create({"service.name": "limits-otlp"}),
        span_limits=SpanLimits(max_span_attributes=200, max_events=200),
    )
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    attributes: dict[str, Any] = {"input.value": text, "output.value": "3 documents"}
    attributes |= {f"app.field.{n}": n for n in range(140)}
    with provider.get_tracer("retriever").start_as_current_span(
        "retrieve documents", attributes=attributes
    ) as span:
        for n in range(140):
            span.add_event(f"step {n}")
        trace_id = format(span.get_span_context().trace_id, "032x")
    provider.shutdown()
    return trace_id


async def test_an_oversized_otlp_span_is_stored_truncated_with_its_counts_cut(
    daemon: DaemonProcess,
) -> None:
    text = "retrieved passage. " * (OVERSIZED // 19)
    exporter = HttpSpans(endpoint=f"{daemon.http_url}/v1/traces", timeout=60)
    trace_id = await asyncio.to_thread(_emit_oversized_span, exporter, text)

    (stored,) = await _read_spans(daemon, trace_id)

    _assert_truncated(stored, text)
    assert stored["output"] == "3 documents"
    attributes = stored["attributes"]
    assert attributes.pop("mcpd.truncated") == {
        "fields": {"input": _stored_size(text)},
        "dropped_attributes": 12,
        "dropped_events": 12,
    }
    events = attributes.pop("otel.events")
    assert [event["name"] for event in events] == [f"step {n}" for n in range(128)]
    assert attributes == {"otel.scope.name": "retriever"} | {
        f"app.field.{n}": n for n in range(128)
    }
    assert (stored["name"], stored["status"]) == ("retrieve documents", "unset")
