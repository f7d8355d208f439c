"""The shipped price book, lookup under every name, per-project overrides, and book errors."""

from __future__ import annotations

import json
from importlib import resources
from typing import Any

import pytest

from mcpd.pricing import (
    RATE_FIELDS,
    SHIPPED_PRICE_BOOK,
    ModelPrice,
    PriceBook,
    load_price_book,
)
from mcpd.runtime.errors import InvalidArgument

BOOK = load_price_book()


def test_the_shipped_book() -> None:
    assert BOOK.id == SHIPPED_PRICE_BOOK == "mcpd-2026-11"
    assert BOOK.currency == "USD"
    assert load_price_book() is BOOK  # loaded once
    models = {price.model for price in BOOK.models}
    for required in (
        "gpt-5",
        "gpt-5-mini",
        "gpt-5-nano",
        "gpt-4.1",
        "gpt-4.1-mini",
        "gpt-4.1-nano",
        "gpt-4o",
        "gpt-4o-mini",
        "o3",
        "o4-mini",
        "text-embedding-3-small",
        "text-embedding-3-large",
        "claude-opus-4-1",
        "claude-sonnet-4-5",
        "claude-haiku-4-5",
        "claude-3-7-sonnet",
        "claude-3-5-haiku",
        "claude-3-haiku",
        "gemini-2.5-pro",
        "gemini-2.5-flash",
        "gemini-2.5-flash-lite",
        "mistral-large-2411",
        "deepseek-chat",
        "llama-3.3-70b-versatile",
    ):
        assert required in models, required


def test_every_shipped_model_name_is_reachable() -> None:
    for price in BOOK.models:
        for name in (price.model, *price.aliases):
            assert BOOK.lookup(price.provider, name) == price, name


def test_anthropic_cache_multipliers() -> None:
    for price in BOOK.models:
        if price.provider != "anthropic":
            continue
        assert price.cache_read == pytest.approx(price.input * 0.1), price.model
        assert price.cache_write_5m == pytest.approx(price.input * 1.25), price.model
        assert price.cache_write_1h == pytest.approx(price.input * 2), price.model
        assert price.cache_write == price.cache_write_5m  # the default TTL is five minutes


@pytest.mark.parametrize(
    ("provider", "model", "expected"),
    [
        ("openai", "gpt-4o-2024-08-06", "gpt-4o"),
        (None, "gpt-4o-2024-05-13", "gpt-4o-2024-05-13"),  # a snapshot priced apart
        ("anthropic", "claude-sonnet-4-5-20250929", "claude-sonnet-4-5"),
        ("openrouter", "anthropic/claude-3.5-sonnet", "claude-3-5-sonnet"),
        ("aws.bedrock", "anthropic.claude-3-5-sonnet-20240620-v1:0", "claude-3-5-sonnet"),
        ("gcp.vertex_ai", "claude-3-5-sonnet-v2@20241022", "claude-3-5-sonnet"),
        ("gcp.gemini", "models/gemini-2.5-pro", "gemini-2.5-pro"),
        (None, "gpt-5-chat-latest", "gpt-5"),
        (None, "mistral-small-latest", "mistral-small-2506"),
        (
            "together_ai",
            "meta-llama/Llama-4-Scout-17B-16E-Instruct",
            "llama-4-scout-17b-16e-instruct",
        ),
        (None, "groq/llama-4-scout-17b-16e-instruct", "llama-4-scout-17b-16e-instruct"),
    ],
)
def test_lookup(provider: str | None, model: str, expected: str) -> None:
    price = BOOK.lookup(provider, model)
    assert price is not None
    assert price.model == expected


def test_a_model_two_hosts_sell_needs_the_provider() -> None:
    name = "meta-llama/Llama-4-Scout-17B-16E-Instruct"
    assert BOOK.lookup(None, name) is None
    assert BOOK.lookup("fireworks", name) is None
    together = BOOK.lookup("together", name)
    groq = BOOK.lookup("groq", name)
    assert together is not None
    assert groq is not None
    assert (together.provider, groq.provider) == ("together", "groq")
    assert together.input != groq.input


@pytest.mark.parametrize(
    "model", [None, "", "mistral-large-latest", "ft:gpt-4o-mini:acme::x", "my-model"]
)
def test_unknown_models(model: str | None) -> None:
    assert BOOK.lookup("openai", model) is None


def test_rates_fall_back_to_what_they_refine() -> None:
    price = ModelPrice("p", "m", input=2.0, output=8.0)
    assert price.cache_read_rate == 2.0
    assert price.cache_write_rate == 2.0
    assert price.cache_write_5m_rate == 2.0
    assert price.cache_write_1h_rate == 2.0
    assert price.reasoning_rate == 8.0
    assert (price.input_audio_rate, price.input_image_rate) == (2.0, 2.0)
    assert (price.output_audio_rate, price.output_image_rate) == (8.0, 8.0)
    refined = ModelPrice("p", "m", input=2.0, output=8.0, cache_write=2.5, cache_write_1h=4.0)
    assert refined.cache_write_5m_rate == 2.5
    assert refined.cache_write_1h_rate == 4.0


def test_overrides() -> None:
    book = BOOK.with_overrides(
        {
            "gpt-4o": {"input": 2.0, "output": 8.0},
            "claude-sonnet-4-5": {"cache_read": 0.25},
            "acme/in-house-7b": {"input": 0.1, "output": 0.2},
            "ft:gpt-4o-mini-2024-07-18:acme::abc": {"input": 0.3, "output": 1.2},
        },
        name="shop",
    )
    assert book.id == "mcpd-2026-11+shop"
    dated = book.lookup("openai", "gpt-4o-2024-11-20")
    assert dated is not None
    assert (dated.input, dated.output, dated.cache_read) == (2.0, 8.0, 1.25)
    sonnet = book.lookup(None, "claude-sonnet-4-5-20250929")
    assert sonnet is not None
    assert (sonnet.input, sonnet.cache_read, sonnet.tiers) == (3.0, 0.25, ())
    own = book.lookup(None, "in-house-7b")
    assert own is not None
    assert (own.input, own.output, own.provider) == (0.1, 0.2, "project")
    tuned = book.lookup("openai", "ft:gpt-4o-mini-2024-07-18:acme::abc")
    assert tuned is not None
    assert (tuned.input, tuned.output) == (0.3, 1.2)
    assert BOOK.lookup("openai", "ft:gpt-4o-mini-2024-07-18:acme::abc") is None
    assert book.lookup(None, "gpt-4o-mini") == BOOK.lookup(None, "gpt-4o-mini")
    # The base book is unchanged, and no overrides means the same book.
    base = BOOK.lookup(None, "gpt-4o")
    assert base is not None
    assert base.input == 2.5
    assert BOOK.with_overrides({}) is BOOK
    # Overrides stack.
    again = book.with_overrides({"gpt-4o-mini": {"input": 0.1}}, name="again")
    assert again.id == "mcpd-2026-11+shop+again"
    assert again.lookup(None, "gpt-4o") == dated


@pytest.mark.parametrize(
    ("overrides", "field", "words"),
    [
        ([], "price_overrides", "object keyed by model"),
        ({" ": {"input": 1}}, "price_overrides. ", "not a model name"),
        ({"gpt-4o": []}, "price_overrides.gpt-4o", "object of rates"),
        ({"gpt-4o": {"inptu": 1}}, "price_overrides.gpt-4o.inptu", "unknown rate"),
        ({"gpt-4o": {"input": -1}}, "price_overrides.gpt-4o.input", "from 0"),
        ({"gpt-4o": {"input": True}}, "price_overrides.gpt-4o.input", "price per million"),
        ({"gpt-4o": {"input": float("nan")}}, "price_overrides.gpt-4o.input", "price per"),
        ({"gpt-4o": {"input": 2e6}}, "price_overrides.gpt-4o.input", "from 0"),
        ({"new-model": {"input": 1}}, "price_overrides.new-model.output", "is required"),
    ],
)
def test_override_mistakes_name_the_field(overrides: Any, field: str, words: str) -> None:
    with pytest.raises(InvalidArgument) as caught:
        BOOK.with_overrides(overrides)
    assert caught.value.field == field
    assert words in caught.value.message


def _shipped() -> dict[str, Any]:
    path = resources.files("mcpd.pricing").joinpath("data", f"{SHIPPED_PRICE_BOOK}.json")
    document: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return document


def test_every_shipped_entry_uses_known_fields_only() -> None:
    allowed = {"provider", "model", "aliases", "tiers", "note", *RATE_FIELDS}
    for entry in _shipped()["models"]:
        assert set(entry) <= allowed, entry["model"]


ENTRY = {"provider": "p", "model": "m", "input": 1, "output": 2}


@pytest.mark.parametrize(
    ("document", "field"),
    [
        ([], "price_book"),
        ({"models": []}, "price_book.id"),
        ({"id": "b", "currency": "usd", "models": []}, "price_book.currency"),
        ({"id": "b", "models": {}}, "price_book.models"),
        ({"id": "b", "models": [1]}, "price_book.models[0]"),
        ({"id": "b", "models": [{**ENTRY, "extra": 1}]}, "price_book.models[0].extra"),
        ({"id": "b", "models": [{**ENTRY, "provider": ""}]}, "price_book.models[0].provider"),
        ({"id": "b", "models": [{**ENTRY, "model": "GPT"}]}, "price_book.models[0].model"),
        ({"id": "b", "models": [{**ENTRY, "aliases": ["A"]}]}, "price_book.models[0].aliases"),
        (
            {"id": "b", "models": [{"provider": "p", "model": "m", "input": 1}]},
            "price_book.models[0].output",
        ),
        ({"id": "b", "models": [{**ENTRY, "tiers": {}}]}, "price_book.models[0].tiers"),
        ({"id": "b", "models": [{**ENTRY, "tiers": [1]}]}, "price_book.models[0].tiers[0]"),
        (
            {"id": "b", "models": [{**ENTRY, "tiers": [{"input": 1}]}]},
            "price_book.models[0].tiers[0].above_input_tokens",
        ),
        (
            {"id": "b", "models": [{**ENTRY, "tiers": [{"above_input_tokens": 1, "x": 1}]}]},
            "price_book.models[0].tiers[0].x",
        ),
    ],
)
def test_book_mistakes_name_the_field(document: Any, field: str) -> None:
    with pytest.raises(InvalidArgument) as caught:
        PriceBook.from_json(document)
    assert caught.value.field == field
