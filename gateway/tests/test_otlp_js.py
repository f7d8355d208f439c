"""The OpenTelemetry JS SDK's own OTLP HTTP/JSON exporters (tests/e2e/otlp_js) against the
gateway on a real uvicorn port, before the minimal collector: what the SDK sends decodes to the
spans, log record and metric points of the scenario, ids and attributes intact."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import shutil
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.proto.common.v1 import common_pb2
from opentelemetry.proto.trace.v1 import trace_pb2

from gateway.otlp import LOGS, METRICS, TRACES
from gateway.tests.otlp_collector import Seen, Upstream, running_collector, served_gateway

PRODUCER = Path(__file__).resolve().parents[2] / "tests" / "e2e" / "otlp_js"
SCENARIO = PRODUCER / "scenario.example.json"

# The producer is a node process (and needs the npm install of make test).
pytestmark = pytest.mark.e2e


@dataclasses.dataclass
class Gateway:
    url: str
    upstream: Upstream
    seen: list[Seen]


@pytest.fixture
async def gateway() -> AsyncIterator[Gateway]:
    seen: list[Seen] = []
    async with running_collector() as upstream, served_gateway(upstream, seen) as url:
        yield Gateway(url, upstream, seen)


async def produce(*args: str) -> tuple[int, str, str]:
    """Run the producer; its exit code, stdout and stderr."""
    node = shutil.which("node")
    assert node is not None, "node is not on PATH"
    assert (PRODUCER / "node_modules").is_dir(), "run `make install` (npm ci in tests/e2e/otlp_js)"
    process = await asyncio.create_subprocess_exec(
        node,
        str(PRODUCER / "produce.mjs"),
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    stdout, stderr = await asyncio.wait_for(process.communicate(), timeout=60)
    assert process.returncode is not None
    return process.returncode, stdout.decode(), stderr.decode()


def value_of(any_value: common_pb2.AnyValue) -> Any:
    kind = any_value.WhichOneof("value")
    if kind == "array_value":
        return [value_of(v) for v in any_value.array_value.values]
    return getattr(any_value, kind) if kind else None


def attributes(key_values: Any) -> dict[str, Any]:
    return {kv.key: value_of(kv.value) for kv in key_values}


async def test_the_js_sdk_json_export_arrives_decoded(gateway: Gateway) -> None:
    upstream = gateway.upstream
    scenario = json.loads(SCENARIO.read_text())
    code, stdout, stderr = await produce(gateway.url, "mcpd_k_e2e", str(SCENARIO))
    assert code == 0, stderr
    printed = json.loads(stdout)
    # The SDK's default encoding, JSON, which the gateway relays as the collector's protobuf.
    assert gateway.seen == [
        Seen(path, "application/json", None) for path in ("/v1/traces", "/v1/logs", "/v1/metrics")
    ]
    exports = upstream.collector.exports
    assert [e.signal for e in exports] == ["traces", "logs", "metrics"]
    assert all(e.metadata["authorization"] == "Bearer mcpd_k_e2e" for e in exports)

    request = upstream.collector.last(TRACES)
    resource_spans = request.resource_spans[0]
    resource = attributes(resource_spans.resource.attributes)
    assert resource["service.name"] == "support-agent"
    assert resource["deployment.environment.name"] == "e2e"
    spans = {s.name: s for ss in resource_spans.scope_spans for s in ss.spans}
    assert set(spans) == {s["name"] for s in scenario["spans"]}
    by_key = {s["key"]: s for s in scenario["spans"]}
    (trace_id,) = printed["trace_ids"]
    for key, spec in by_key.items():
        span = spans[spec["name"]]
        ids = printed["spans"][key]
        # Hex on the wire, the right 16 and 8 bytes here.
        assert span.trace_id == bytes.fromhex(trace_id)
        assert len(span.trace_id) == 16
        assert span.span_id == bytes.fromhex(ids["span_id"])
        assert len(span.span_id) == 8
        parent = spec.get("parent")
        expected_parent = bytes.fromhex(printed["spans"][parent]["span_id"]) if parent else b""
        assert span.parent_span_id == expected_parent
        assert attributes(span.attributes) == spec["attributes"]
        assert span.end_time_unix_nano - span.start_time_unix_nano == spec["duration_ms"] * 10**6
    chat = spans["chat gpt-4o"]
    assert chat.kind == trace_pb2.Span.SPAN_KIND_CLIENT
    assert isinstance(attributes(chat.attributes)["gen_ai.usage.input_tokens"], int)
    tool = spans["execute_tool search_docs"]
    assert tool.status.code == trace_pb2.Status.STATUS_CODE_ERROR
    assert tool.status.message == "search backend timed out"
    assert [e.name for e in tool.events] == ["exception"]

    record = upstream.collector.last(LOGS).resource_logs[0].scope_logs[0].log_records[0]
    assert record.body.string_value == scenario["log"]["body"]
    assert record.severity_number == 9
    assert record.trace_id == bytes.fromhex(trace_id)
    assert record.span_id == chat.span_id
    assert attributes(record.attributes) == scenario["log"]["attributes"]

    metrics = {
        m.name: m
        for rm in upstream.collector.last(METRICS).resource_metrics
        for sm in rm.scope_metrics
        for m in sm.metrics
    }
    counter = metrics[scenario["counter"]["name"]]
    assert counter.sum.is_monotonic
    assert counter.sum.data_points[0].as_int == scenario["counter"]["value"]
    assert attributes(counter.sum.data_points[0].attributes) == scenario["counter"]["attributes"]
    histogram = metrics[scenario["histogram"]["name"]]
    assert histogram.unit == "{token}"
    point = histogram.histogram.data_points[0]
    assert (point.count, point.sum) == (1, scenario["histogram"]["value"])


async def test_gzip_and_a_refused_export_fail_the_producer(
    gateway: Gateway, tmp_path: Path
) -> None:
    url, upstream = gateway.url, gateway.upstream
    scenario = json.loads(SCENARIO.read_text())
    scenario["compression"] = "gzip"
    path = tmp_path / "scenario.json"
    path.write_text(json.dumps(scenario))
    code, stdout, stderr = await produce(url, "", str(path))
    assert code == 0, stderr
    assert {s.content_encoding for s in gateway.seen} == {"gzip"}
    assert "authorization" not in upstream.collector.exports[0].metadata
    assert len(upstream.collector.last(TRACES).resource_spans[0].scope_spans[0].spans) == 3

    # 401 is not retryable: the exporter gives up at once and the producer says so.
    code, stdout, stderr = await produce(url, "wrong", str(path))
    assert code == 1
    assert "trace export failed" in stderr
    assert stdout == ""
