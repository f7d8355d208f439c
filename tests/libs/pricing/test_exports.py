"""The public surface of mcpd.pricing, pinned: changing it is a decision, not an accident."""

from __future__ import annotations

import mcpd.pricing

EXPECTED = [
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


def test_all_is_pinned() -> None:
    assert mcpd.pricing.__all__ == EXPECTED


def test_every_exported_name_resolves() -> None:
    for name in mcpd.pricing.__all__:
        assert getattr(mcpd.pricing, name) is not None
