"""The text a span or a log record is searched by, the same on every backend.

`q` matches a span's name and the string values inside its input and output (not JSON keys or
punctuation, which would make `role` or `content` match every chat), and a log record's
message. Stores that keep a search index (SQLite FTS5, PostgreSQL tsvector) index exactly this
text; ClickHouse matches the same fields in place.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from mcpd.signals.rows import LogRow, SpanRow


def span_search_text(row: SpanRow) -> str:
    """The span's name, then every string inside its input and output, one per line."""
    parts = [row["name"]]
    parts.extend(_strings(row.get("input")))
    parts.extend(_strings(row.get("output")))
    return "\n".join(parts)


def log_search_text(row: LogRow) -> str:
    """A log record is searched by its message."""
    return row["message"]


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)
