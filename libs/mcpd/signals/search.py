"""The text a span or a log record is searched by, the same on every backend.

`q` matches a span's name and the string values inside its input and output (not JSON keys or
punctuation, which would make `role` or `content` match every chat), and a log record's
message. Stores that keep a search index (SQLite FTS5, PostgreSQL tsvector) index exactly this
text; ClickHouse matches the same fields in place.
"""

from __future__ import annotations

from typing import Any

from mcpd.signals.rows import LogRow, SpanRow


def span_search_text(row: SpanRow) -> str:
    """The span's name, then every string inside its input and output, one per line."""
    parts = [row["name"]]
    _collect_strings(row.get("input"), parts)
    _collect_strings(row.get("output"), parts)
    return "\n".join(parts)


def log_search_text(row: LogRow) -> str:
    """A log record is searched by its message."""
    return row["message"]


def _collect_strings(value: Any, into: list[str]) -> None:
    """Append every string inside `value` (dict values and list items, depth first) to `into`.

    Appends to one list instead of yielding, and asks for the exact built-in types first (the
    documents come from JSON and protobuf): this runs for every span written, and a generator
    per nesting level costs noticeably more."""
    kind = type(value)
    if kind is str:
        into.append(value)
    elif kind is dict or kind is list:
        for item in value.values() if kind is dict else value:
            if type(item) is str:
                into.append(item)
            else:
                _collect_strings(item, into)
    elif isinstance(value, str):
        into.append(value)
    elif isinstance(value, dict):
        for item in value.values():
            _collect_strings(item, into)
    elif isinstance(value, list):
        for item in value:
            _collect_strings(item, into)
