"""Model and provider names as producers send them, reduced to price-book ids."""

from __future__ import annotations

import pytest

from mcpd.pricing import model_candidates, normalize_model, normalize_provider


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("gpt-4o", "gpt-4o"),
        ("GPT-4o-2024-08-06", "gpt-4o"),
        ("gpt-4o-mini-2024-07-18", "gpt-4o-mini"),
        ("gpt-3.5-turbo-0125", "gpt-3.5-turbo"),
        ("o3-2025-04-16", "o3"),
        ("gpt-4.1", "gpt-4.1"),
        ("claude-sonnet-4-5-20250929", "claude-sonnet-4-5"),
        ("claude-3-5-sonnet-latest", "claude-3-5-sonnet"),
        ("anthropic/claude-3.5-sonnet", "claude-3-5-sonnet"),
        ("anthropic/claude-sonnet-4.5", "claude-sonnet-4-5"),
        ("openrouter/anthropic/claude-3.7-sonnet:thinking", "claude-3-7-sonnet"),
        ("anthropic.claude-3-5-sonnet-20240620-v1:0", "claude-3-5-sonnet"),
        ("us.anthropic.claude-sonnet-4-20250514-v1:0", "claude-sonnet-4"),
        ("eu.anthropic.claude-3-haiku-20240307-v1:0", "claude-3-haiku"),
        ("claude-3-5-sonnet-v2@20241022", "claude-3-5-sonnet-v2"),
        ("claude-opus-4-1@20250805", "claude-opus-4-1"),
        ("models/gemini-2.5-pro", "gemini-2.5-pro"),
        ("gemini-2.5-flash-preview-09-2025", "gemini-2.5-flash"),
        ("gemini-2.5-flash-lite-preview-06-17", "gemini-2.5-flash-lite"),
        ("meta-llama/Llama-3.3-70B-Instruct-Turbo", "llama-3.3-70b-instruct-turbo"),
        ("mistral-large-2411", "mistral-large-2411"),
        ("grok-4-0709", "grok-4"),
        ("  Text-Embedding-3-Small ", "text-embedding-3-small"),
        ("ft:gpt-4o-mini-2024-07-18:acme::abc123", "ft:gpt-4o-mini-2024-07-18:acme::abc123"),
        ("", ""),
        ("///", ""),
    ],
)
def test_normalize_model(name: str, expected: str) -> None:
    assert normalize_model(name) == expected


def test_candidates_run_from_most_to_least_specific() -> None:
    assert model_candidates("gpt-4o-realtime-preview-2024-12-17") == (
        None,
        ["gpt-4o-realtime-preview-2024-12-17", "gpt-4o-realtime-preview", "gpt-4o-realtime"],
    )
    assert model_candidates("groq/llama-3.3-70b-versatile") == ("groq", ["llama-3.3-70b-versatile"])
    assert model_candidates("anthropic.claude-3-haiku-20240307-v1:0") == (
        "anthropic",
        ["claude-3-haiku-20240307", "claude-3-haiku"],
    )


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("OpenAI", "openai"),
        ("aws.bedrock", "bedrock"),
        ("amazon_bedrock", "bedrock"),
        ("gcp.vertex_ai", "google"),
        ("gcp.gemini", "google"),
        ("together_ai", "together"),
        ("mistral_ai", "mistral"),
        ("x_ai", "xai"),
        ("acme-llm", "acme-llm"),
        ("  ", None),
        (None, None),
    ],
)
def test_normalize_provider(name: str | None, expected: str | None) -> None:
    assert normalize_provider(name) == expected
