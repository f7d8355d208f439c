"""Price books: what each model's tokens cost, by meter, in one currency per million tokens.

A book is a JSON document (the shipped one is `data/<id>.json`):

    {"id": "mcpd-2026-11", "currency": "USD", "unit": "per_million_tokens",
     "models": [
       {"provider": "anthropic", "model": "claude-sonnet-4-5",
        "aliases": ["claude-sonnet-4-5-20250929"],
        "input": 3.0, "output": 15.0, "cache_read": 0.3, "cache_write": 3.75,
        "cache_write_5m": 3.75, "cache_write_1h": 6.0,
        "tiers": [{"above_input_tokens": 200000, "input": 6.0, "output": 22.5, ...}]},
       ...]}

Rates (`RATE_FIELDS`) are `input` and `output` (required) and, where the provider prices them
separately, `cache_read`, `cache_write`, `cache_write_5m`, `cache_write_1h`, `reasoning`,
`input_audio`, `output_audio`, `input_image`, `output_image`. An absent rate falls back to the
one it refines: `reasoning` to `output`; `cache_write_5m` and `cache_write_1h` to `cache_write`,
which falls back to `input`, as do `cache_read`, `input_audio` and `input_image`;
`output_audio` and `output_image` to `output`. A tier replaces the rates it names for a request
whose billed input exceeds `above_input_tokens` (the whole request, as Anthropic and Google
bill long prompts).

Lookup goes through `model_candidates`: the name as sent, then without its version, date or
preview suffix. A model listed under several providers (an open-weight model on two hosts) is
found only when the provider says which; otherwise mcpd would be guessing.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from typing import Any, Final

from mcpd.pricing._names import model_candidates, normalize_provider
from mcpd.runtime.errors import InvalidArgument

__all__ = [
    "RATE_FIELDS",
    "SHIPPED_PRICE_BOOK",
    "ModelPrice",
    "PriceBook",
    "PriceTier",
    "load_price_book",
]

SHIPPED_PRICE_BOOK: Final = "mcpd-2026-11"
RATE_FIELDS: Final = (
    "input",
    "output",
    "cache_read",
    "cache_write",
    "cache_write_5m",
    "cache_write_1h",
    "reasoning",
    "input_audio",
    "output_audio",
    "input_image",
    "output_image",
)
_CACHE_SIZE = 4096
# No model costs a million dollars per million tokens; a bigger number is a typo.
_MAX_RATE = 1_000_000.0
_ENTRY_FIELDS = frozenset({"provider", "model", "aliases", "tiers", "note", *RATE_FIELDS})


@dataclass(frozen=True, slots=True)
class PriceTier:
    """Rates that replace the base ones when a request's billed input exceeds the threshold."""

    above_input_tokens: int
    rates: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class ModelPrice:
    """One model's rates, per million tokens, in `currency`. Absent rates are None; the
    `*_rate` properties apply the fallbacks (see the module docstring)."""

    provider: str
    model: str
    input: float
    output: float
    cache_read: float | None = None
    cache_write: float | None = None
    cache_write_5m: float | None = None
    cache_write_1h: float | None = None
    reasoning: float | None = None
    input_audio: float | None = None
    output_audio: float | None = None
    input_image: float | None = None
    output_image: float | None = None
    tiers: tuple[PriceTier, ...] = ()
    currency: str = "USD"
    aliases: tuple[str, ...] = ()

    def for_input(self, billed_input_tokens: int) -> ModelPrice:
        """The rates that apply to a request with this much billed input (its tier, if any)."""
        chosen: PriceTier | None = None
        for tier in self.tiers:
            if billed_input_tokens > tier.above_input_tokens and (
                chosen is None or tier.above_input_tokens > chosen.above_input_tokens
            ):
                chosen = tier
        if chosen is None:
            return self
        return dataclasses.replace(self, tiers=(), **dict(chosen.rates))

    @property
    def cache_read_rate(self) -> float:
        """Tokens served from a prompt cache."""
        return self.input if self.cache_read is None else self.cache_read

    @property
    def cache_write_rate(self) -> float:
        """Tokens written to a prompt cache, when no TTL is reported."""
        return self.input if self.cache_write is None else self.cache_write

    @property
    def cache_write_5m_rate(self) -> float:
        """Tokens written to a five-minute cache."""
        return self.cache_write_rate if self.cache_write_5m is None else self.cache_write_5m

    @property
    def cache_write_1h_rate(self) -> float:
        """Tokens written to a one-hour cache."""
        return self.cache_write_rate if self.cache_write_1h is None else self.cache_write_1h

    @property
    def reasoning_rate(self) -> float:
        """Hidden reasoning tokens (billed as output unless priced apart)."""
        return self.output if self.reasoning is None else self.reasoning

    @property
    def input_audio_rate(self) -> float:
        """Audio input tokens."""
        return self.input if self.input_audio is None else self.input_audio

    @property
    def output_audio_rate(self) -> float:
        """Audio output tokens."""
        return self.output if self.output_audio is None else self.output_audio

    @property
    def input_image_rate(self) -> float:
        """Image input tokens."""
        return self.input if self.input_image is None else self.input_image

    @property
    def output_image_rate(self) -> float:
        """Image output tokens."""
        return self.output if self.output_image is None else self.output_image


class PriceBook:
    """An immutable set of model prices with an id that names it in every cost it produced."""

    __slots__ = ("_by_model", "_cache", "_overrides", "currency", "id", "models")

    def __init__(
        self,
        book_id: str,
        models: tuple[ModelPrice, ...],
        *,
        currency: str = "USD",
        overrides: Mapping[str, ModelPrice] | None = None,
    ) -> None:
        self.id = book_id
        self.currency = currency
        self.models = models
        by_model: dict[str, list[ModelPrice]] = {}
        for price in models:
            for name in dict.fromkeys((price.model, *price.aliases)):
                by_model.setdefault(name, []).append(price)
        self._by_model = {name: tuple(entries) for name, entries in by_model.items()}
        self._overrides = dict(overrides or {})
        # Model names repeat on every span; normalising one takes several regex passes.
        self._cache: dict[tuple[str | None, str], ModelPrice | None] = {}

    @classmethod
    def from_json(cls, document: Any, *, field: str = "price_book") -> PriceBook:
        """A book from its JSON document (see the module docstring). Raises InvalidArgument
        naming the bad field."""
        if not isinstance(document, Mapping):
            raise InvalidArgument(f"{field} must be an object", field=field)
        book_id = document.get("id")
        if not isinstance(book_id, str) or not book_id:
            raise InvalidArgument(f"{field}.id must be a non-empty string", field=f"{field}.id")
        currency = document.get("currency", "USD")
        if not isinstance(currency, str) or len(currency) != 3 or not currency.isupper():
            raise InvalidArgument(
                f"{field}.currency must be an ISO 4217 code", field=f"{field}.currency"
            )
        entries = document.get("models")
        if not isinstance(entries, list):
            raise InvalidArgument(f"{field}.models must be a list", field=f"{field}.models")
        models = tuple(
            _entry(entry, f"{field}.models[{index}]", currency)
            for index, entry in enumerate(entries)
        )
        return cls(book_id, models, currency=currency)

    def lookup(self, provider: str | None, model: str | None) -> ModelPrice | None:
        """The price of `model` as `provider` sells it, or None when this book cannot say."""
        if not model:
            return None
        key = (provider, model)
        try:
            return self._cache[key]
        except KeyError:
            pass
        found = self._find(provider, model)
        if len(self._cache) >= _CACHE_SIZE:
            self._cache.clear()
        self._cache[key] = found
        return found

    def _find(self, provider: str | None, model: str) -> ModelPrice | None:
        hint, candidates = model_candidates(model)
        wanted = normalize_provider(provider) or hint
        for name in candidates:
            override = self._overrides.get(name)
            if override is not None:
                return override
        for name in candidates:
            entries = self._by_model.get(name)
            if not entries:
                continue
            if len(entries) == 1:
                return entries[0]
            for entry in entries:
                if entry.provider == wanted:
                    return entry
            return None
        return None

    def with_overrides(
        self,
        overrides: Mapping[str, Mapping[str, float]],
        *,
        name: str = "project",
        field: str = "price_overrides",
    ) -> PriceBook:
        """This book with a project's own prices on top, keyed by model (any name `lookup`
        accepts; an override for `gpt-4o` covers its dated snapshots). An override of a model
        the book knows replaces the rates it names and applies at every request size (the
        book's long-context tiers are dropped); a model the book does not know needs `input`
        and `output`. The result's id is `<this id>+<name>`, so a cost says which prices made
        it. Raises InvalidArgument naming the bad field."""
        if not isinstance(overrides, Mapping):
            raise InvalidArgument(f"{field} must be an object keyed by model", field=field)
        if not overrides:
            return self
        priced: dict[str, ModelPrice] = dict(self._overrides)
        for model, rates in overrides.items():
            at = f"{field}.{model}"
            _, candidates = model_candidates(model) if isinstance(model, str) else (None, [])
            if not candidates:
                raise InvalidArgument(f"{at}: not a model name that can be priced", field=at)
            checked = _rates(rates, at, required=False)
            base = self.lookup(None, model)
            if base is None:
                for key in ("input", "output"):
                    if key not in checked:
                        raise InvalidArgument(
                            f"{at}.{key} is required for a model the price book does not list",
                            field=f"{at}.{key}",
                        )
                base = ModelPrice("project", candidates[0], 0.0, 0.0, currency=self.currency)
            priced[candidates[0]] = dataclasses.replace(base, tiers=(), **checked)
        return PriceBook(f"{self.id}+{name}", self.models, currency=self.currency, overrides=priced)


def _entry(entry: Any, at: str, currency: str) -> ModelPrice:
    if not isinstance(entry, Mapping):
        raise InvalidArgument(f"{at} must be an object", field=at)
    unknown = sorted(set(entry) - _ENTRY_FIELDS)
    if unknown:
        raise InvalidArgument(f"{at}: unknown field {unknown[0]!r}", field=f"{at}.{unknown[0]}")
    provider, model = entry.get("provider"), entry.get("model")
    if not isinstance(provider, str) or not provider:
        raise InvalidArgument(f"{at}.provider must be a non-empty string", field=f"{at}.provider")
    if not isinstance(model, str) or model != model.strip().lower() or not model:
        raise InvalidArgument(f"{at}.model must be a lower-case model id", field=f"{at}.model")
    aliases = entry.get("aliases", [])
    if not isinstance(aliases, list) or not all(
        isinstance(a, str) and a and a == a.strip().lower() for a in aliases
    ):
        raise InvalidArgument(
            f"{at}.aliases must be a list of lower-case model ids", field=f"{at}.aliases"
        )
    rates = _rates({k: v for k, v in entry.items() if k in RATE_FIELDS}, at, required=True)
    tiers_doc = entry.get("tiers", [])
    if not isinstance(tiers_doc, list):
        raise InvalidArgument(f"{at}.tiers must be a list", field=f"{at}.tiers")
    tiers: list[PriceTier] = []
    for index, tier in enumerate(tiers_doc):
        tier_at = f"{at}.tiers[{index}]"
        if not isinstance(tier, Mapping):
            raise InvalidArgument(f"{tier_at} must be an object", field=tier_at)
        threshold = tier.get("above_input_tokens")
        if isinstance(threshold, bool) or not isinstance(threshold, int) or threshold < 0:
            raise InvalidArgument(
                f"{tier_at}.above_input_tokens must be a non-negative integer",
                field=f"{tier_at}.above_input_tokens",
            )
        tier_rates = {k: v for k, v in tier.items() if k != "above_input_tokens"}
        tiers.append(PriceTier(threshold, _rates(tier_rates, tier_at, required=False)))
    return ModelPrice(
        provider=provider,
        model=model,
        tiers=tuple(tiers),
        currency=currency,
        aliases=tuple(aliases),
        **rates,
    )


def _rates(document: Any, at: str, *, required: bool) -> dict[str, Any]:
    if not isinstance(document, Mapping):
        raise InvalidArgument(f"{at} must be an object of rates", field=at)
    rates: dict[str, Any] = {}
    for key, value in document.items():
        if key not in RATE_FIELDS:
            raise InvalidArgument(
                f"{at}: unknown rate {key!r} (expected one of {', '.join(RATE_FIELDS)})",
                field=f"{at}.{key}",
            )
        if (
            isinstance(value, bool)
            or not isinstance(value, int | float)
            or not math.isfinite(value)
            or not 0 <= value <= _MAX_RATE
        ):
            raise InvalidArgument(
                f"{at}.{key} must be a price per million tokens from 0 to {_MAX_RATE:g}",
                field=f"{at}.{key}",
            )
        rates[key] = float(value)
    if required:
        for key in ("input", "output"):
            if key not in rates:
                raise InvalidArgument(f"{at}.{key} is required", field=f"{at}.{key}")
    return rates


@lru_cache(maxsize=1)
def load_price_book() -> PriceBook:
    """The price book mcpd ships (`SHIPPED_PRICE_BOOK`), loaded once."""
    data = resources.files("mcpd.pricing").joinpath("data", f"{SHIPPED_PRICE_BOOK}.json")
    return PriceBook.from_json(json.loads(data.read_text(encoding="utf-8")))
