"""How long `map_traces` takes per span on a realistic 512-span export (not a test).

    .venv/bin/python -m services.ingest.tests.otlp.bench_map_traces

The request is what an agent instrumented with the OpenTelemetry GenAI conventions sends: per
turn an invoke_agent span, two chat spans (17 attributes each, with JSON input and output
messages and cached input), two execute_tool spans with JSON arguments and results, and an
HTTP client span; encoded by the SDK's own OTLP encoder. Prints the best and median of 30 runs.
"""

from __future__ import annotations

import json
import statistics
import time

from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.trace import SpanKind, Tracer
from opentelemetry.util.types import AttributeValue

from services.ingest.otlp import map_traces
from services.ingest.tests.otlp.producers import SpanRecorder

SPANS = 512
RUNS = 30

_INPUT = json.dumps(
    [
        {"role": "system", "parts": [{"type": "text", "content": "You are a support agent. " * 8}]},
        {"role": "user", "parts": [{"type": "text", "content": "Where is order 12345?"}]},
    ]
)
_OUTPUT = json.dumps(
    [
        {
            "role": "assistant",
            "parts": [
                {
                    "type": "tool_call",
                    "id": "call_1",
                    "name": "lookup_order",
                    "arguments": {"order_id": "12345"},
                }
            ],
            "finish_reason": "tool_calls",
        }
    ]
)


def _turn(tracer: Tracer, turn: int) -> None:
    agent: dict[str, AttributeValue] = {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.agent.name": "support",
        "gen_ai.agent.id": "agent_1",
        "gen_ai.conversation.id": f"conv-{turn}",
        "user.id": "u-42",
    }
    with tracer.start_as_current_span("invoke_agent support", attributes=agent):
        for _ in range(2):
            chat: dict[str, AttributeValue] = {
                "gen_ai.operation.name": "chat",
                "gen_ai.provider.name": "openai",
                "gen_ai.request.model": "gpt-4o-mini",
                "gen_ai.response.model": "gpt-4o-mini-2024-07-18",
                "gen_ai.response.id": "chatcmpl-abc123",
                "gen_ai.response.finish_reasons": ("tool_calls",),
                "gen_ai.request.temperature": 0.2,
                "gen_ai.request.max_tokens": 1024,
                "gen_ai.request.top_p": 1.0,
                "gen_ai.usage.input_tokens": 1534,
                "gen_ai.usage.output_tokens": 88,
                "gen_ai.usage.cache_read.input_tokens": 1280,
                "server.address": "api.openai.com",
                "server.port": 443,
                "gen_ai.input.messages": _INPUT,
                "gen_ai.output.messages": _OUTPUT,
                "gen_ai.output.type": "text",
            }
            with tracer.start_as_current_span("chat gpt-4o-mini", attributes=chat):
                pass
            tool: dict[str, AttributeValue] = {
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": "lookup_order",
                "gen_ai.tool.call.id": "call_1",
                "gen_ai.tool.type": "function",
                "gen_ai.tool.call.arguments": '{"order_id": "12345"}',
                "gen_ai.tool.call.result": '{"status": "shipped", "eta": "tomorrow"}',
            }
            with tracer.start_as_current_span("execute_tool lookup_order", attributes=tool):
                pass
        http: dict[str, AttributeValue] = {
            "http.request.method": "GET",
            "url.full": "https://api.example.com/orders/12345",
            "http.response.status_code": 200,
        }
        with tracer.start_as_current_span("GET", kind=SpanKind.CLIENT, attributes=http):
            pass


def request() -> ExportTraceServiceRequest:
    """The 512-span export request."""
    recorder = SpanRecorder(
        {
            "service.name": "support-agent",
            "service.version": "1.4.2",
            "deployment.environment.name": "production",
        }
    )
    tracer = recorder.tracer("opentelemetry.instrumentation.openai_v2")
    turn = 0
    while len(recorder.spans()) < SPANS:
        _turn(tracer, turn)
        turn += 1
    return encode_spans(recorder.spans()[:SPANS])


def main() -> None:
    export = request()
    size = len(export.SerializeToString())
    for _ in range(5):
        map_traces(export)
    runs = []
    for _ in range(RUNS):
        started = time.perf_counter()
        map_traces(export)
        runs.append(time.perf_counter() - started)
    per_span = [run / SPANS * 1e6 for run in runs]
    print(
        f"map_traces, {SPANS} spans ({size} bytes): best {min(per_span):.1f} µs/span, "
        f"median {statistics.median(per_span):.1f} µs/span"
    )


if __name__ == "__main__":
    main()
