"""Cost from token usage: which meter each token is billed on, and at what rate.

Token arithmetic (spec: TokenUsage, InputTokenDetails, OutputTokenDetails). Totals include every
kind of token; the details say how some of them were billed, and the rest are text:

* input: `cache_read` at the cache-read rate; `cache_write_5m` and `cache_write_1h` at their
  rates and the rest of `cache_write` (which includes them) at the cache-write rate; `audio` and
  `image` at theirs; text is `text` when reported, else the total minus all of those.
* output: `reasoning` at the reasoning rate (the output rate unless priced apart), `audio` and
  `image` at theirs, text as for input.

No token is counted twice, and none is lost: when the details add up to more than the total
(a producer that reported a provider's uncached input as the total), the details win; when
`text` and the details add up to less, the unexplained remainder is billed as text. Costs are
rounded to 12 decimal places (a millionth of a millionth of a currency unit), which keeps float
noise out of stored figures without changing any real amount.
"""

from __future__ import annotations

from collections.abc import Mapping, MutableMapping
from dataclasses import dataclass
from typing import Any

from mcpd.pricing._book import ModelPrice, PriceBook
from mcpd.signals.rows import CostColumns

__all__ = ["Meters", "apply_price", "meters", "price"]

_PER = 1_000_000
_DIGITS = 12


@dataclass(frozen=True, slots=True)
class Meters:
    """Billed tokens per meter. `cache_write` is the part of the cache writes without a TTL."""

    text_in: int = 0
    cache_read: int = 0
    cache_write: int = 0
    cache_write_5m: int = 0
    cache_write_1h: int = 0
    audio_in: int = 0
    image_in: int = 0
    text_out: int = 0
    reasoning: int = 0
    audio_out: int = 0
    image_out: int = 0

    @property
    def billed_input(self) -> int:
        """Every input token billed."""
        return (
            self.text_in
            + self.cache_read
            + self.cache_write
            + self.cache_write_5m
            + self.cache_write_1h
            + self.audio_in
            + self.image_in
        )


def meters(
    input_tokens: int | None,
    output_tokens: int | None,
    usage_details: Mapping[str, Any] | None,
) -> Meters:
    """How the tokens of one call are billed (see the module docstring)."""
    details = usage_details if isinstance(usage_details, Mapping) else {}
    given_in = details.get("input")
    given_out = details.get("output")
    inp: Mapping[str, Any] = given_in if isinstance(given_in, Mapping) else {}
    out: Mapping[str, Any] = given_out if isinstance(given_out, Mapping) else {}
    cache_read = _count(inp, "cache_read")
    write_5m = _count(inp, "cache_write_5m")
    write_1h = _count(inp, "cache_write_1h")
    write_total = max(_count(inp, "cache_write"), write_5m + write_1h)
    audio_in = _count(inp, "audio")
    image_in = _count(inp, "image")
    known_in = cache_read + write_total + audio_in + image_in
    reasoning = _count(out, "reasoning")
    audio_out = _count(out, "audio")
    image_out = _count(out, "image")
    known_out = reasoning + audio_out + image_out
    return Meters(
        text_in=max(_count(inp, "text"), _total(input_tokens) - known_in),
        cache_read=cache_read,
        cache_write=write_total - write_5m - write_1h,
        cache_write_5m=write_5m,
        cache_write_1h=write_1h,
        audio_in=audio_in,
        image_in=image_in,
        text_out=max(_count(out, "text"), _total(output_tokens) - known_out),
        reasoning=reasoning,
        audio_out=audio_out,
        image_out=image_out,
    )


def price(
    input_tokens: int | None,
    output_tokens: int | None,
    usage_details: Mapping[str, Any] | None,
    model_price: ModelPrice,
    *,
    price_book: str | None = None,
) -> CostColumns:
    """The estimated cost of one call at `model_price` (its long-context tier when the billed
    input exceeds one), as the row columns; `price_book` names the book in `cost_price_book`."""
    billed = meters(input_tokens, output_tokens, usage_details)
    rates = model_price.for_input(billed.billed_input)
    input_cost = (
        billed.text_in * rates.input
        + billed.cache_read * rates.cache_read_rate
        + billed.cache_write * rates.cache_write_rate
        + billed.cache_write_5m * rates.cache_write_5m_rate
        + billed.cache_write_1h * rates.cache_write_1h_rate
        + billed.audio_in * rates.input_audio_rate
        + billed.image_in * rates.input_image_rate
    ) / _PER
    output_cost = (
        billed.text_out * rates.output
        + billed.reasoning * rates.reasoning_rate
        + billed.audio_out * rates.output_audio_rate
        + billed.image_out * rates.output_image_rate
    ) / _PER
    return CostColumns(
        cost_currency=model_price.currency,
        input_cost=round(input_cost, _DIGITS),
        output_cost=round(output_cost, _DIGITS),
        total_cost=round(input_cost + output_cost, _DIGITS),
        cost_price_book=price_book,
        cost_is_estimated=True,
    )


def apply_price(row: MutableMapping[str, Any], book: PriceBook) -> None:
    """Price a span- or score-like row in place from its usage, `model` and `provider`.

    A cost the producer reported (`total_cost` set and `cost_is_estimated` False) is kept. A
    row with no usage, or whose model the book cannot price, is left as it is. Otherwise the
    cost columns are set, estimated, naming the book.
    """
    if row.get("total_cost") is not None and row.get("cost_is_estimated") is False:
        return
    input_tokens = row.get("input_tokens")
    output_tokens = row.get("output_tokens")
    details = row.get("usage_details")
    if input_tokens is None and output_tokens is None and not details:
        return
    model_price = book.lookup(row.get("provider"), row.get("model"))
    if model_price is None:
        return
    row.update(price(input_tokens, output_tokens, details, model_price, price_book=book.id))


def _count(details: Mapping[str, Any], key: str) -> int:
    value = details.get(key)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        return 0
    return value


def _total(value: int | None) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0
