"""What the session store asks of a search backend (tantivy beside SQLite; PostgreSQL FTS)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from mcpd.sessions.search.analysis import Unit
from mcpd.sessions.store import SearchQuery
from mcpd.storage.sql.sessions.writes import SearchSide, Written


@dataclass(frozen=True, slots=True)
class Ranked:
    """Event ids with raw scores, best first (score desc, timestamp desc, id asc), cut to the
    limit; whether more matched; and per query unit a weight for picking snippets (None: the
    backend has none, the first occurrence of any unit is used)."""

    hits: list[tuple[str, float]]
    truncated: bool
    weights: list[float] | None


class SearchBackend(SearchSide, Protocol):
    """Ranks searchable events and keeps its index in step with the read model."""

    def after_commit(self, written: Written) -> None:
        """Bring an out-of-database index in step with a committed write."""
        ...

    def rank(self, units: Sequence[Unit], query: SearchQuery) -> Ranked:
        """The best `query.limit` matches of any unit, within the query's filters."""
        ...

    def reconcile(self) -> int:
        """Catch the index up with the read model; return how many sessions were re-indexed."""
        ...

    def nudge(self) -> None:
        """Catch an out-of-database index up soon (another process wrote). Never blocks."""
        ...

    def rebuild(self) -> int:
        """Rebuild the index from the read model; return how many events it now holds."""
        ...

    def close(self) -> None:
        """Release what the backend holds (a writer lock). Idempotent."""
        ...
