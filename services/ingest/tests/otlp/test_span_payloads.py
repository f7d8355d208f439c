"""Input and output: GenAI messages, OpenInference, OpenLLMetry indexed forms, events, tools."""

from __future__ import annotations

import json

from opentelemetry.trace import Tracer

from services.ingest.otlp import map_traces
from services.ingest.tests.otlp.producers import span_row, trace_request

SCOPE = {"otel.scope.name": "test.instrumentation"}


def test_genai_messages_with_system_instructions() -> None:
    row = span_row(
        {
            "gen_ai.operation.name": "chat",
            "gen_ai.system_instructions": json.dumps([{"type": "text", "content": "Be brief."}]),
            "gen_ai.input.messages": json.dumps(
                [{"role": "user", "parts": [{"type": "text", "content": "Weather in Paris?"}]}]
            ),
            "gen_ai.output.messages": json.dumps(
                [
                    {
                        "role": "assistant",
                        "parts": [{"type": "text", "content": "Sunny."}],
                        "finish_reason": "stop",
                    }
                ]
            ),
        }
    )
    assert row["input"] == [
        {"role": "system", "parts": [{"type": "text", "content": "Be brief."}]},
        {"role": "user", "parts": [{"type": "text", "content": "Weather in Paris?"}]},
    ]
    assert row["output"] == [
        {
            "role": "assistant",
            "parts": [{"type": "text", "content": "Sunny."}],
            "finish_reason": "stop",
        }
    ]
    assert row["attributes"] == {"gen_ai.operation.name": "chat", **SCOPE}


def test_openinference_messages_win_over_input_value() -> None:
    raw_request = json.dumps({"messages": [{"role": "user", "content": "hi"}]})
    row = span_row(
        {
            "openinference.span.kind": "LLM",
            "input.value": raw_request,
            "input.mime_type": "application/json",
            "llm.input_messages.0.message.role": "system",
            "llm.input_messages.0.message.content": "Be brief.",
            "llm.input_messages.1.message.role": "user",
            "llm.input_messages.1.message.contents.0.message_content.type": "text",
            "llm.input_messages.1.message.contents.0.message_content.text": "hi",
            "llm.output_messages.0.message.role": "assistant",
            "llm.output_messages.0.message.tool_calls.0.tool_call.id": "call_1",
            "llm.output_messages.0.message.tool_calls.0.tool_call.function.name": "search",
            "llm.output_messages.0.message.tool_calls.0.tool_call.function.arguments": (
                '{"q": "paris"}'
            ),
        }
    )
    assert row["input"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "contents": [{"type": "text", "text": "hi"}]},
    ]
    assert row["output"] == [
        {
            "role": "assistant",
            "tool_calls": [
                {"id": "call_1", "function": {"name": "search", "arguments": {"q": "paris"}}}
            ],
        }
    ]
    # The raw request lost the precedence and is kept, with its mime type.
    assert row["attributes"] == {
        "openinference.span.kind": "LLM",
        "input.value": raw_request,
        "input.mime_type": "application/json",
        **SCOPE,
    }


def test_openllmetry_indexed_prompts_and_completions() -> None:
    row = span_row(
        {
            "gen_ai.system": "openai",
            "gen_ai.request.model": "gpt-4o",
            "gen_ai.prompt.name": "support-template",
            "gen_ai.prompt.0.role": "system",
            "gen_ai.prompt.0.content": "Be brief.",
            "gen_ai.prompt.1.role": "user",
            "gen_ai.prompt.1.content": "hi",
            "gen_ai.completion.0.role": "assistant",
            "gen_ai.completion.0.content": "hello",
            "gen_ai.completion.0.finish_reason": "stop",
        }
    )
    assert row["input"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "hi"},
    ]
    assert row["output"] == [{"role": "assistant", "content": "hello", "finish_reason": "stop"}]
    # gen_ai.prompt.name is the template's name, not a message.
    assert row["attributes"] == {"gen_ai.prompt.name": "support-template", **SCOPE}


def test_older_single_prompt_and_completion() -> None:
    row = span_row(
        {
            "gen_ai.request.model": "gpt-4o",
            "gen_ai.prompt": json.dumps([{"role": "user", "content": "hi"}]),
            "gen_ai.completion": "hello there",
        }
    )
    assert row["input"] == [{"role": "user", "content": "hi"}]
    assert row["output"] == "hello there"


def test_tool_arguments_and_result() -> None:
    row = span_row(
        {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": "get_weather",
            "gen_ai.tool.call.id": "call_1",
            "gen_ai.tool.call.arguments": '{"city": "Paris"}',
            "gen_ai.tool.call.result": '{"temperature": 21}',
        }
    )
    assert (row["input"], row["output"]) == ({"city": "Paris"}, {"temperature": 21})
    assert row["attributes"] == {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.call.id": "call_1",
        **SCOPE,
    }


def test_openinference_values_parse_only_when_json() -> None:
    row = span_row(
        {
            "openinference.span.kind": "TOOL",
            "tool.name": "search",
            "tool.parameters": '{"type": "object"}',
            "input.value": '{"q": "paris"}',
            "input.mime_type": "application/json",
            "output.value": "{not json, just braces}",
            "output.mime_type": "text/plain",
        }
    )
    assert row["input"] == {"q": "paris"}
    assert row["output"] == "{not json, just braces}"
    assert row["attributes"] == {
        "openinference.span.kind": "TOOL",
        "tool.parameters": '{"type": "object"}',
        **SCOPE,
    }


def test_message_events() -> None:
    def record(tracer: Tracer) -> None:
        with tracer.start_as_current_span(
            "chat gpt-4o", attributes={"gen_ai.request.model": "gpt-4o"}
        ) as span:
            span.add_event(
                "gen_ai.system.message", {"gen_ai.system": "openai", "content": "Be brief."}
            )
            span.add_event("gen_ai.user.message", {"content": "hi"})
            span.add_event(
                "gen_ai.choice",
                {
                    "index": 0,
                    "finish_reason": "stop",
                    "message": json.dumps({"role": "assistant", "content": "hello"}),
                },
            )
            span.add_event("first_token", {"ttft_ms": 120})

    [(_, row)] = map_traces(trace_request(record)).spans
    assert row["input"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "hi"},
    ]
    assert row["output"] == [
        {"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "hello"}}
    ]
    attributes = row["attributes"]
    assert attributes is not None
    [event] = attributes["otel.events"]
    assert (event["name"], event["attributes"]) == ("first_token", {"ttft_ms": 120})
    assert isinstance(event["time_unix_nano"], int)


def test_inference_details_event() -> None:
    def record(tracer: Tracer) -> None:
        with tracer.start_as_current_span(
            "chat", attributes={"gen_ai.operation.name": "chat"}
        ) as s:
            s.add_event(
                "gen_ai.client.inference.operation.details",
                {
                    "gen_ai.input.messages": '[{"role": "user", "parts": []}]',
                    "gen_ai.output.messages": '[{"role": "assistant", "parts": []}]',
                },
            )

    [(_, row)] = map_traces(trace_request(record)).spans
    assert row["input"] == [{"role": "user", "parts": []}]
    assert row["output"] == [{"role": "assistant", "parts": []}]
    assert row["attributes"] == {"gen_ai.operation.name": "chat", **SCOPE}


def test_no_payload() -> None:
    row = span_row({"http.request.method": "GET"})
    assert (row["input"], row["output"]) == (None, None)
