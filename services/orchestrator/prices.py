"""Pricing the usage a worker reports on complete, from the shipped price book with the
project's own overrides (the control store's), as ingest prices spans.

A usage whose model the book cannot price costs nothing here and keeps its tokens; the
overrides of a project are read again after `ttl_s`, so a price change reaches runs within it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from mcpd.pricing import PriceBook, price
from mcpd.runtime.ttl_cache import TtlCache
from mcpd.storage.interfaces import PriceOverrides

__all__ = ["Prices"]


class Prices:
    """What a step's usage cost, per project. Safe across threads."""

    def __init__(
        self,
        control: PriceOverrides,
        book: PriceBook,
        *,
        monotonic: Callable[[], float],
        ttl_s: float = 5.0,
    ) -> None:
        self._control = control
        self._book = book
        self._books = TtlCache(self._book_of, monotonic=monotonic, ttl_s=ttl_s)

    def cost(self, project: str, usage: Mapping[str, Any]) -> float:
        """The estimated cost of a StepUsage (in the spec's JSON shape) in USD; 0 when its model
        has no price."""
        model_price = self._books.get(project).lookup(usage.get("provider"), usage.get("model"))
        if model_price is None:
            return 0.0
        details = {
            "input": usage.get("input_details", {}),
            "output": usage.get("output_details", {}),
        }
        columns = price(usage.get("input_tokens"), usage.get("output_tokens"), details, model_price)
        return float(columns.get("total_cost") or 0.0)

    def _book_of(self, project: str) -> PriceBook:
        overrides = self._control.price_overrides(project)
        return self._book.with_overrides(overrides, name=project) if overrides else self._book
