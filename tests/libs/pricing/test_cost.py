"""Cost from usage, with exact numbers: caches with TTLs, reasoning, audio, tiers, rows."""

from __future__ import annotations

from typing import Any

import pytest

from mcpd.pricing import Meters, ModelPrice, apply_price, load_price_book, meters, price

BOOK = load_price_book()


def model(name: str, provider: str | None = None) -> ModelPrice:
    found = BOOK.lookup(provider, name)
    assert found is not None, name
    return found


def test_anthropic_sonnet_with_cache_read_and_both_ttls() -> None:
    # 10,000 input tokens: 6,000 read from cache, 3,000 written (1,000 for 5 minutes, 2,000
    # for an hour), so 1,000 are plain text.
    details = {
        "input": {
            "cache_read": 6000,
            "cache_write": 3000,
            "cache_write_5m": 1000,
            "cache_write_1h": 2000,
        },
        "output": {},
    }
    cost = price(10_000, 500, details, model("claude-sonnet-4-5-20250929"), price_book="b")
    # 1,000 x $3 + 6,000 x $0.30 + 1,000 x $3.75 + 2,000 x $6, per million.
    assert cost["input_cost"] == pytest.approx(0.02055)
    assert cost["output_cost"] == pytest.approx(0.0075)  # 500 x $15
    assert cost["total_cost"] == pytest.approx(0.02805)
    assert cost["cost_currency"] == "USD"
    assert cost["cost_price_book"] == "b"
    assert cost["cost_is_estimated"] is True


def test_cache_writes_beyond_the_ttl_parts_are_billed_at_the_cache_write_rate() -> None:
    details = {"input": {"cache_write": 4000, "cache_write_1h": 1000}}
    billed = meters(5000, 0, details)
    assert billed == Meters(text_in=1000, cache_write=3000, cache_write_1h=1000)
    cost = price(5000, 0, details, model("claude-haiku-4-5"))
    # 1,000 x $1 + 3,000 x $1.25 + 1,000 x $2
    assert cost["input_cost"] == pytest.approx(0.00675)
    # TTL parts without a cache_write total: the total is their sum.
    assert meters(None, None, {"input": {"cache_write_5m": 10, "cache_write_1h": 5}}) == Meters(
        cache_write_5m=10, cache_write_1h=5
    )


def test_openai_reasoning_is_billed_at_the_output_rate() -> None:
    details = {"input": {"cache_read": 500}, "output": {"reasoning": 2500}}
    cost = price(2000, 3000, details, model("o3-2025-04-16"))
    assert cost["input_cost"] == pytest.approx(0.00325)  # 1,500 x $2 + 500 x $0.50
    assert cost["output_cost"] == pytest.approx(0.024)  # 500 x $8 + 2,500 x $8
    assert cost["total_cost"] == pytest.approx(0.02725)


def test_reasoning_priced_apart() -> None:
    custom = ModelPrice("p", "m", input=1.0, output=4.0, reasoning=10.0)
    cost = price(0, 1000, {"output": {"reasoning": 600}}, custom)
    assert cost["output_cost"] == pytest.approx((400 * 4 + 600 * 10) / 1e6)


def test_audio_in_and_out() -> None:
    details = {"input": {"audio": 800}, "output": {"audio": 500}}
    cost = price(1000, 600, details, model("gpt-4o-audio-preview"))
    assert cost["input_cost"] == pytest.approx(0.0325)  # 200 x $2.50 + 800 x $40
    assert cost["output_cost"] == pytest.approx(0.041)  # 100 x $10 + 500 x $80
    assert cost["total_cost"] == pytest.approx(0.0735)


def test_images_in_and_out() -> None:
    details = {"input": {"image": 1000, "text": 100}, "output": {"image": 4160}}
    cost = price(1100, 4160, details, model("gpt-image-1"))
    assert cost["input_cost"] == pytest.approx((100 * 5 + 1000 * 10) / 1e6)
    assert cost["output_cost"] == pytest.approx(4160 * 40 / 1e6)


def test_plain_usage_without_details() -> None:
    cost = price(1000, 100, None, model("gpt-4o-mini"))
    assert cost["input_cost"] == pytest.approx(0.00015)
    assert cost["output_cost"] == pytest.approx(0.00006)
    assert cost["total_cost"] == pytest.approx(0.00021)


def test_embeddings_have_no_output_cost() -> None:
    cost = price(1_000_000, None, None, model("text-embedding-3-small"))
    assert cost["input_cost"] == pytest.approx(0.02)
    assert cost["output_cost"] == 0


def test_long_prompts_use_the_tier() -> None:
    gemini = model("gemini-2.5-pro")
    at_threshold = price(200_000, 1000, None, gemini)
    assert at_threshold["input_cost"] == pytest.approx(0.25)  # 200,000 x $1.25
    assert at_threshold["output_cost"] == pytest.approx(0.01)  # 1,000 x $10
    above = price(250_000, 1000, {"input": {"cache_read": 50_000}}, gemini)
    # 200,000 x $2.50 + 50,000 x $0.25; 1,000 x $15
    assert above["input_cost"] == pytest.approx(0.5125)
    assert above["output_cost"] == pytest.approx(0.015)
    # Cache reads count towards the threshold (billed input, not just text).
    sonnet = model("claude-sonnet-4-5")
    cost = price(210_000, 0, {"input": {"cache_read": 200_000}}, sonnet)
    assert cost["input_cost"] == pytest.approx((10_000 * 6 + 200_000 * 0.6) / 1e6)


@pytest.mark.parametrize(
    ("input_tokens", "details", "expected"),
    [
        # `text` reported and consistent.
        (1000, {"text": 400, "cache_read": 600}, Meters(text_in=400, cache_read=600)),
        # `text` reported but the total says more: the remainder is text.
        (1000, {"text": 100, "cache_read": 600}, Meters(text_in=400, cache_read=600)),
        # Details exceed the total (uncached input sent as the total): the details win.
        (100, {"cache_read": 600}, Meters(cache_read=600)),
        (100, {"text": 100, "cache_read": 600}, Meters(text_in=100, cache_read=600)),
        # No total: the details alone.
        (None, {"text": 7, "audio": 3}, Meters(text_in=7, audio_in=3)),
        # Garbage counts are ignored rather than trusted.
        (10, {"cache_read": -5, "audio": True, "image": "3"}, Meters(text_in=10)),
    ],
)
def test_no_token_is_counted_twice_or_lost(
    input_tokens: int | None, details: dict[str, Any], expected: Meters
) -> None:
    assert meters(input_tokens, None, {"input": details}) == expected


def test_output_text_is_the_remainder() -> None:
    billed = meters(None, 1000, {"output": {"reasoning": 300, "audio": 200, "image": 100}})
    assert billed == Meters(text_out=400, reasoning=300, audio_out=200, image_out=100)
    assert meters(None, 10, {"output": {"text": 20}}) == Meters(text_out=20)
    assert meters(-1, None, "nonsense") == Meters()  # type: ignore[arg-type]


def span(**fields: Any) -> dict[str, Any]:
    row: dict[str, Any] = {
        "model": "claude-sonnet-4-5-20250929",
        "provider": "anthropic",
        "input_tokens": 1000,
        "output_tokens": 100,
        "usage_details": None,
        "cost_currency": None,
        "input_cost": None,
        "output_cost": None,
        "total_cost": None,
        "cost_price_book": None,
        "cost_is_estimated": None,
    }
    row.update(fields)
    return row


def test_apply_price_sets_an_estimated_cost_naming_the_book() -> None:
    row = span()
    apply_price(row, BOOK)
    assert row["input_cost"] == pytest.approx(0.003)
    assert row["output_cost"] == pytest.approx(0.0015)
    assert row["total_cost"] == pytest.approx(0.0045)
    assert row["cost_currency"] == "USD"
    assert row["cost_price_book"] == "mcpd-2026-11"
    assert row["cost_is_estimated"] is True
    overridden = span()
    apply_price(overridden, BOOK.with_overrides({"claude-sonnet-4-5": {"input": 1.0}}, name="p"))
    assert overridden["input_cost"] == pytest.approx(0.001)
    assert overridden["cost_price_book"] == "mcpd-2026-11+p"


def test_apply_price_keeps_a_producer_cost() -> None:
    row = span(total_cost=1.5, input_cost=1.0, output_cost=0.5, cost_is_estimated=False)
    before = dict(row)
    apply_price(row, BOOK)
    assert row == before


def test_apply_price_replaces_an_estimate() -> None:
    row = span(total_cost=9.0, cost_is_estimated=True, cost_price_book="old")
    apply_price(row, BOOK)
    assert row["total_cost"] == pytest.approx(0.0045)
    assert row["cost_price_book"] == "mcpd-2026-11"


@pytest.mark.parametrize(
    "fields",
    [
        {"input_tokens": None, "output_tokens": None},
        {"model": "unknown-model"},
        {"model": None},
    ],
)
def test_apply_price_leaves_rows_it_cannot_price(fields: dict[str, Any]) -> None:
    row = span(**fields)
    before = dict(row)
    apply_price(row, BOOK)
    assert row == before


def test_apply_price_on_a_score_without_usage_is_a_no_op() -> None:
    score: dict[str, Any] = {"score_id": "s", "value": 1.0, "total_cost": None}
    apply_price(score, BOOK)
    assert score == {"score_id": "s", "value": 1.0, "total_cost": None}


def test_usage_details_alone_are_usage() -> None:
    row = span(input_tokens=None, output_tokens=None, usage_details={"input": {"text": 1000}})
    apply_price(row, BOOK)
    assert row["total_cost"] == pytest.approx(0.003)


def test_float_noise_is_rounded_away() -> None:
    cost = price(1, 2, None, ModelPrice("p", "m", input=0.1, output=0.1))
    assert cost["total_cost"] == 3e-7
