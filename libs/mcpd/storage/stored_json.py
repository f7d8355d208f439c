"""JSON documents as every store keeps them: one text for SQLite, PostgreSQL and ClickHouse.

`json_text` is compact JSON with non-ASCII characters as they are, a non-finite number as null
(JSON has no spelling for one, and the `NaN` token fails every JSON function of SQLite and
PostgreSQL: one in a PostgreSQL recordset refused a whole group commit) and a NUL character as
U+FFFD (`scrub_nul`: PostgreSQL refuses NUL in text and in JSONB), so every backend reads back
the same document. orjson writes it (faster than the standard encoder on span payloads);
what orjson refuses (an integer past 64 bits, a string holding a lone surrogate)
the standard encoder writes, by the same rules.
"""

from __future__ import annotations

import json
import json.encoder
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import orjson


def json_text(document: Any) -> str:
    """`document` as stored (see the module docstring)."""
    text = _dumps(document)
    if "\\u0000" in text:  # a NUL somewhere, or text that merely looks like one
        text = _dumps(scrub_nul(document))
    return text


def json_size(document: Any) -> int:
    """The size in UTF-8 bytes of `document`'s `json_text`, or a little more when it holds a NUL
    (escaped as six bytes, stored as three), without building the text when orjson can write
    it. A tuple counts as a JSON array, so several documents can be sized in one call."""
    try:
        return len(orjson.dumps(document, option=orjson.OPT_NON_STR_KEYS))
    except TypeError:
        return len(json_text(document).encode("utf-8", "surrogatepass"))


def scrub_nul(value: Any) -> Any:
    """`value` with every NUL character, in a string or a key at any depth, replaced by
    U+FFFD."""
    if isinstance(value, str):
        return value.replace("\x00", "\ufffd") if "\x00" in value else value
    if isinstance(value, Mapping):
        return {scrub_nul(key): scrub_nul(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [scrub_nul(item) for item in value]
    return value


def _dumps(document: Any) -> str:
    try:
        return orjson.dumps(document, option=orjson.OPT_NON_STR_KEYS).decode()
    except TypeError:
        return "".join(_encode_chunks(_finite(document), 0))


def _finite(value: Any) -> Any:
    """`value` with every non-finite float replaced by None (what orjson writes for them)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, Mapping):
        return {key: _finite(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(item) for item in value]
    return value


def _compact_chunks() -> Callable[[Any, int], Sequence[str]]:
    """What `json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode` joins, from a C
    encoder built once (`encode` builds a new one, and a dict to detect cycles, on every call).
    The documents come from decoded JSON and protobuf, so they have no cycles to detect (a
    cycle would raise RecursionError rather than ValueError)."""
    reference = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False)
    make = getattr(json.encoder, "c_make_encoder", None)
    if make is None:  # pragma: no cover - CPython has its C accelerator
        return lambda document, _level: (reference.encode(document),)
    chunks: Callable[[Any, int], Sequence[str]] = make(
        None,  # markers: no cycle detection (check_circular=False)
        reference.default,
        json.encoder.encode_basestring,
        None,  # indent
        reference.key_separator,
        reference.item_separator,
        reference.sort_keys,
        reference.skipkeys,
        reference.allow_nan,
    )
    return chunks


_encode_chunks = _compact_chunks()
