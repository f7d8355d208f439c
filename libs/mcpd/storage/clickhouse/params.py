"""Query parameters for chdb, in the text form ClickHouse parses `{name:Type}` values from.

ClickHouse binds server-side parameters from text: over HTTP each arrives as a `param_<name>`
string, and chdb's `Session.query(params=...)` passes each value through `str()`. The text is
parsed in ClickHouse's *escaped* format at the top level (no surrounding quotes; backslash
escapes for backslash, tab, newline...) and as SQL literals inside arrays and tuples (quoted
strings, `NULL`). This module renders Python values that way, so the SQL text never contains
a value and nothing can be injected. (clickhouse-connect does the same for `HttpExecutor`.)

Supported: None, bool, int, float, str, and lists/tuples of those (nested). Anything else is a
TypeError, rather than a guess at its text form.

`datetime64_text` spells a time for a DateTime64(9) column in data sent to an INSERT.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from functools import lru_cache

# Top level, escaped format: a backslash starts an escape, and tab/newline end a value.
# The backslash comes first: `_escape` replaces in this order, and every later replacement
# adds a backslash that must not be escaped again.
_ESCAPED = {
    "\\": "\\\\",
    "\t": "\\t",
    "\n": "\\n",
    "\r": "\\r",
    "\0": "\\0",
    "\b": "\\b",
    "\f": "\\f",
}
# Inside a container, a quoted SQL literal: the quote must be escaped as well.
_QUOTED = {**_ESCAPED, "'": "\\'"}


def format_params(params: Mapping[str, object]) -> dict[str, str]:
    """Render every parameter for a `{name:Type}` placeholder."""
    return {name: format_param(value) for name, value in params.items()}


def format_param(value: object) -> str:
    """Render one top-level parameter value."""
    if value is None:
        return "\\N"
    if isinstance(value, str):
        return _escape(value, _ESCAPED)
    return _literal(value)


def _literal(value: object) -> str:
    # bool before int: bool is an int subclass, and ClickHouse spells it true/false.
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return repr(value)
    if isinstance(value, str):
        return "'" + _escape(value, _QUOTED) + "'"
    if isinstance(value, list):
        return "[" + ", ".join(_literal(item) for item in value) + "]"
    if isinstance(value, tuple):
        # `(x)` is just x in parentheses; a one-element tuple has to be spelled tuple(x).
        items = ", ".join(_literal(item) for item in value)
        return f"tuple({items})" if len(value) == 1 else f"({items})"
    raise TypeError(f"unsupported ClickHouse parameter type {type(value).__name__}")


def _escape(text: str, table: Mapping[str, str]) -> str:
    # One `str.replace` per special character (each a scan in C, skipped when the character is
    # absent): far faster than a per-character loop or `str.translate` on long text.
    for char, replacement in table.items():
        if char in text:
            text = text.replace(char, replacement)
    return text


# The earliest time `datetime64_text` spells: ClickHouse parses a DateTime64(9) text through
# its whole seconds, and the seconds of anything earlier (the first 0.85 s of the Int64 range,
# on 1677-09-21) overflow Int64 as nanoseconds.
DATETIME64_MIN_NS = -9_223_372_036_000_000_000
DATETIME64_MAX_NS = 2**63 - 1


def datetime64_text(ns: int) -> str:
    """The text of a DateTime64(9) value, `YYYY-MM-DD hh:mm:ss.nnnnnnnnn` in UTC, from
    nanoseconds since the epoch: exact, and parsed alike by every `date_time_input_format`.

    Raises ValueError outside [DATETIME64_MIN_NS, DATETIME64_MAX_NS].
    """
    if not DATETIME64_MIN_NS <= ns <= DATETIME64_MAX_NS:
        raise ValueError(f"time {ns} ns is outside the range ClickHouse stores")
    seconds, fraction = divmod(ns, 1_000_000_000)
    return f"{_second_text(seconds)}.{fraction:09d}"


@lru_cache(maxsize=4096)
def _second_text(seconds: int) -> str:
    # Cached: the times of one write mostly fall in a few seconds.
    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(seconds))
