"""Pricing: a shipped price book, per-project overrides, and the cost of token usage.

* `load_price_book` returns the book mcpd ships (`SHIPPED_PRICE_BOOK`, a JSON data file in
  this package); `PriceBook.with_overrides` layers a project's own prices on it.
* `PriceBook.lookup` finds a model's `ModelPrice` under any of the names producers use
  (`normalize_model`, `normalize_provider`).
* `price` turns usage into the cost columns of a row; `apply_price` prices a row in place
  unless the producer reported its own cost.

The names below are the public surface (pinned by `tests/libs/pricing/test_exports.py`).
"""

from __future__ import annotations

from mcpd.pricing._book import (
    RATE_FIELDS,
    SHIPPED_PRICE_BOOK,
    ModelPrice,
    PriceBook,
    PriceTier,
    load_price_book,
)
from mcpd.pricing._cost import Meters, apply_price, meters, price
from mcpd.pricing._names import model_candidates, normalize_model, normalize_provider

__all__ = [
    "RATE_FIELDS",
    "SHIPPED_PRICE_BOOK",
    "Meters",
    "ModelPrice",
    "PriceBook",
    "PriceTier",
    "apply_price",
    "load_price_book",
    "meters",
    "model_candidates",
    "normalize_model",
    "normalize_provider",
    "price",
]
