"""Small text helpers shared by the parsers and the assembler."""

from __future__ import annotations

import json
from typing import Any

__all__ = ["PREVIEW_CHARS", "canonical_json", "preview"]

# Titles and display labels: the first line, at most this many Unicode scalar values.
PREVIEW_CHARS = 120
ELLIPSIS = "…"


def preview(text: str, limit: int = PREVIEW_CHARS) -> str:
    """The first non-blank line of `text`, stripped; cut to `limit` characters plus "…" when
    longer (a short first line gets no ellipsis even when more lines follow)."""
    for line in text.splitlines():
        line = line.strip()
        if line:
            return line if len(line) <= limit else line[:limit] + ELLIPSIS
    return ""


def canonical_json(value: Any) -> str:
    """Deterministic JSON for hashing (sorted keys, no whitespace, Unicode kept)."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
