"""Token usage, model parameters and reported cost, from GenAI, OpenInference and OpenLLMetry."""

from __future__ import annotations

import json
from typing import Any

import pytest

from services.ingest.tests.otlp.producers import span_row

SCOPE = {"otel.scope.name": "test.instrumentation"}


def usage(attributes: dict[str, Any]) -> tuple[Any, ...]:
    row = span_row({"gen_ai.operation.name": "chat", **attributes})
    return row["input_tokens"], row["output_tokens"], row["total_tokens"], row["usage_details"]


def test_genai_usage_with_cache_and_reasoning() -> None:
    row = span_row(
        {
            "gen_ai.operation.name": "chat",
            "gen_ai.usage.input_tokens": 1500,
            "gen_ai.usage.output_tokens": 400,
            "gen_ai.usage.cache_read.input_tokens": 1000,
            "gen_ai.usage.cache_creation.input_tokens": 200,
            "gen_ai.usage.reasoning.output_tokens": 250,
        }
    )
    assert (row["input_tokens"], row["output_tokens"], row["total_tokens"]) == (1500, 400, None)
    assert row["usage_details"] == {
        "input": {"cache_read": 1000, "cache_write": 200, "text": 300},
        "output": {"reasoning": 250, "text": 150},
    }
    assert row["attributes"] == {"gen_ai.operation.name": "chat", **SCOPE}


def test_genai_modalities_and_the_newest_cache_write_name() -> None:
    row = span_row(
        {
            "gen_ai.usage.input_tokens": 1000,
            "gen_ai.usage.output_tokens": 300,
            "gen_ai.usage.cache_write.input_tokens": 100,
            "gen_ai.usage.cache_creation.input_tokens": 99,
            "gen_ai.usage.audio.input_tokens": 50,
            "gen_ai.usage.image.input_tokens": 250,
            "gen_ai.usage.audio.output_tokens": 40,
            "gen_ai.usage.image.output_tokens": 60,
        }
    )
    assert row["usage_details"] == {
        "input": {"cache_write": 100, "audio": 50, "image": 250, "text": 600},
        "output": {"audio": 40, "image": 60, "text": 200},
    }
    # The older name lost the precedence and is kept, like every alternative that lost.
    assert row["attributes"] == {"gen_ai.usage.cache_creation.input_tokens": 99, **SCOPE}


def test_older_genai_and_openllmetry_names() -> None:
    assert usage(
        {
            "gen_ai.usage.prompt_tokens": 120,
            "gen_ai.usage.completion_tokens": 30,
            "llm.usage.total_tokens": 150,
            "gen_ai.usage.cache_read_input_tokens": 100,
            "gen_ai.usage.reasoning_tokens": 10,
        }
    ) == (
        120,
        30,
        None,
        {"input": {"cache_read": 100, "text": 20}, "output": {"reasoning": 10, "text": 20}},
    )


def test_openinference_usage_with_cache_reasoning_and_audio() -> None:
    row = span_row(
        {
            "openinference.span.kind": "LLM",
            "llm.token_count.prompt": 2000,
            "llm.token_count.completion": 500,
            "llm.token_count.total": 2500,
            "llm.token_count.prompt_details.cache_read": 1500,
            "llm.token_count.prompt_details.cache_write": 100,
            "llm.token_count.prompt_details.audio": 50,
            "llm.token_count.completion_details.reasoning": 300,
            "llm.token_count.completion_details.audio": 20,
        }
    )
    assert (row["input_tokens"], row["output_tokens"], row["total_tokens"]) == (2000, 500, None)
    assert row["usage_details"] == {
        "input": {"cache_read": 1500, "cache_write": 100, "audio": 50, "text": 350},
        "output": {"reasoning": 300, "audio": 20, "text": 180},
    }
    assert row["attributes"] == {"openinference.span.kind": "LLM", **SCOPE}


def test_totals_without_details_have_no_breakdown() -> None:
    assert usage({"gen_ai.usage.input_tokens": 10, "gen_ai.usage.output_tokens": 5}) == (
        10,
        5,
        None,
        None,
    )


def test_a_total_that_differs_from_the_sum_is_kept() -> None:
    assert usage(
        {
            "gen_ai.usage.input_tokens": 100,
            "gen_ai.usage.output_tokens": 50,
            "gen_ai.usage.total_tokens": 160,
        }
    ) == (100, 50, 160, None)


def test_cache_larger_than_the_input_means_the_input_excluded_it() -> None:
    # Anthropic's API shape: input_tokens counts only the uncached tokens.
    assert usage(
        {
            "gen_ai.provider.name": "anthropic",
            "gen_ai.usage.input_tokens": 200,
            "gen_ai.usage.output_tokens": 50,
            "gen_ai.usage.cache_read.input_tokens": 1000,
            "gen_ai.usage.cache_creation.input_tokens": 300,
        }
    ) == (
        1500,
        50,
        None,
        {"input": {"cache_read": 1000, "cache_write": 300, "text": 200}},
    )


def test_a_reported_total_settles_an_input_that_excluded_the_cache() -> None:
    assert usage(
        {
            "llm.token_count.prompt": 1500,
            "llm.token_count.completion": 100,
            "llm.token_count.total": 2600,
            "llm.token_count.prompt_details.cache_read": 1000,
        }
    ) == (2500, 100, None, {"input": {"cache_read": 1000, "text": 1500}})


def test_a_reported_total_settles_an_output_that_excluded_reasoning() -> None:
    # Gemini's shape: candidates exclude thoughts, the total includes them.
    assert usage(
        {
            "gen_ai.usage.input_tokens": 100,
            "gen_ai.usage.output_tokens": 300,
            "gen_ai.usage.reasoning.output_tokens": 200,
            "gen_ai.usage.total_tokens": 600,
        }
    ) == (100, 500, None, {"output": {"reasoning": 200, "text": 300}})


def test_a_total_matching_the_inclusive_reading_keeps_it() -> None:
    assert usage(
        {
            "gen_ai.usage.input_tokens": 1500,
            "gen_ai.usage.output_tokens": 100,
            "gen_ai.usage.total_tokens": 1600,
            "gen_ai.usage.cache_read.input_tokens": 1000,
        }
    ) == (1500, 100, None, {"input": {"cache_read": 1000, "text": 500}})


@pytest.mark.parametrize(
    ("declared", "expected"),
    [
        (False, (2500, 100, None, {"input": {"cache_read": 1000, "text": 1500}})),
        (True, (1500, 100, None, {"input": {"cache_read": 1000, "text": 500}})),
        ("false", (2500, 100, None, {"input": {"cache_read": 1000, "text": 1500}})),
    ],
)
def test_a_declaration_decides(declared: Any, expected: tuple[Any, ...]) -> None:
    row = span_row(
        {
            "gen_ai.usage.input_tokens": 1500,
            "gen_ai.usage.output_tokens": 100,
            "gen_ai.usage.cache_read.input_tokens": 1000,
            "mcpd.usage.input_includes_cache": declared,
        }
    )
    got = row["input_tokens"], row["output_tokens"], row["total_tokens"], row["usage_details"]
    assert got == expected
    assert row["attributes"] == SCOPE


def test_a_declared_inclusive_input_never_leaves_negative_text() -> None:
    assert usage(
        {
            "gen_ai.usage.input_tokens": 100,
            "gen_ai.usage.cache_read.input_tokens": 500,
            "mcpd.usage.input_includes_cache": True,
        }
    ) == (100, None, None, {"input": {"cache_read": 500, "text": 0}})


def test_a_count_that_is_not_a_count_stays_an_attribute() -> None:
    row = span_row({"gen_ai.usage.input_tokens": "n/a", "llm.token_count.prompt": "42"})
    assert row["input_tokens"] == 42
    assert row["attributes"] == {"gen_ai.usage.input_tokens": "n/a", **SCOPE}


def test_no_usage() -> None:
    assert usage({}) == (None, None, None, None)


def test_genai_model_parameters() -> None:
    row = span_row(
        {
            "gen_ai.operation.name": "chat",
            "gen_ai.request.temperature": 0.2,
            "gen_ai.request.top_p": 0.9,
            "gen_ai.request.top_k": 40,
            "gen_ai.request.max_tokens": 512,
            "gen_ai.request.seed": -7,
            "gen_ai.request.stop_sequences": ("END", "STOP"),
            "gen_ai.request.frequency_penalty": 0.5,
            "gen_ai.output.type": "json",
        }
    )
    assert row["model_parameters"] == {
        "temperature": 0.2,
        "top_p": 0.9,
        "top_k": 40,
        "max_tokens": 512,
        "seed": -7,
        "stop_sequences": ["END", "STOP"],
        "has_response_format": True,
    }
    # No spec field for a penalty; the output type says more than the flag: both kept.
    assert row["attributes"] == {
        "gen_ai.operation.name": "chat",
        "gen_ai.request.frequency_penalty": 0.5,
        "gen_ai.output.type": "json",
        **SCOPE,
    }


@pytest.mark.parametrize(
    ("attributes", "has_response_format"),
    [
        ({"gen_ai.output.type": "text"}, False),
        ({"gen_ai.output.type": "json"}, True),
        ({"gen_ai.openai.request.response_format": "json_schema"}, True),
        ({"gen_ai.openai.request.response_format": "text"}, False),
        ({"llm.invocation_parameters": '{"response_format": {"type": "json_object"}}'}, True),
        ({"llm.invocation_parameters": '{"response_format": {"type": "text"}}'}, False),
        ({"llm.invocation_parameters": '{"response_mime_type": "application/json"}'}, True),
        ({"gen_ai.request.temperature": 1.0}, False),
    ],
)
def test_has_response_format(attributes: dict[str, Any], has_response_format: bool) -> None:
    parameters = span_row(attributes)["model_parameters"]
    assert parameters is not None
    assert parameters["has_response_format"] is has_response_format


def test_openinference_invocation_parameters() -> None:
    invocation = json.dumps(
        {
            "temperature": 0.5,
            "max_completion_tokens": 256,
            "stop": "###",
            "seed": 11,
            "response_format": {"type": "json_schema", "json_schema": {"name": "answer"}},
            "frequency_penalty": 0.1,
        }
    )
    row = span_row(
        {
            "openinference.span.kind": "LLM",
            "llm.invocation_parameters": invocation,
            "gen_ai.request.temperature": 0.7,  # an attribute beats the JSON
        }
    )
    assert row["model_parameters"] == {
        "temperature": 0.7,
        "max_tokens": 256,
        "seed": 11,
        "stop_sequences": ["###"],
        "has_response_format": True,
    }
    assert row["attributes"] == {
        "openinference.span.kind": "LLM",
        "llm.invocation_parameters": invocation,
        **SCOPE,
    }


def test_no_model_parameters() -> None:
    assert span_row({"gen_ai.operation.name": "chat"})["model_parameters"] is None


COST_COLUMNS = (
    "cost_currency",
    "input_cost",
    "output_cost",
    "total_cost",
    "cost_price_book",
    "cost_is_estimated",
)


@pytest.mark.parametrize(
    ("attributes", "cost"),
    [
        (
            {
                "mcpd.cost.input": 0.01,
                "mcpd.cost.output": 0.0023,
                "mcpd.cost.total": 0.0125,
                "mcpd.cost.currency": "eur",
            },
            ("EUR", 0.01, 0.0023, 0.0125, None, False),
        ),
        (
            {"llm.cost.prompt": 0.25, "llm.cost.completion": 0.5},
            ("USD", 0.25, 0.5, 0.75, None, False),
        ),
        ({"gen_ai.usage.cost": 0.003}, ("USD", None, None, 0.003, None, False)),
        (
            {"mcpd.cost.total": 2.0, "llm.cost.total": 1.0, "gen_ai.usage.cost": 3.0},
            ("USD", None, None, 2.0, None, False),
        ),
        # Nothing reported: left for the pipeline to price.
        ({"gen_ai.usage.input_tokens": 10}, (None, None, None, None, None, None)),
        ({"gen_ai.usage.cost": "cheap"}, (None, None, None, None, None, None)),
    ],
)
def test_reported_cost(attributes: dict[str, Any], cost: tuple[Any, ...]) -> None:
    row = span_row(attributes)
    assert tuple(row[column] for column in COST_COLUMNS) == cost  # type: ignore[literal-required]
