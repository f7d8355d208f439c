"""Snippets: a short window of an event's text around its best match, and score normalization.

The window is cut from the original text (not the folded one) around the first occurrence of
the best-matching query unit, found case- and diacritic-insensitively: the text is folded
character by character exactly as the analyzer folds tokens, and a match must be a whole token.
"Best" is the unit with the highest weight (the caller's IDF, when it has one); among equal
weights, the one that occurs first. Without any occurrence (possible only where a backend's
tokenization differs) the window starts at the beginning.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from mcpd.sessions.search.analysis import PY_CJK, Unit, fold_with_offsets, is_cjk

SNIPPET_CHARS = 200
ELLIPSIS = "…"
# How far a window edge may move to avoid cutting a word in half.
_SNAP = 24
# A character that continues a (non-CJK) token: a match must not touch one.
_WORD = re.compile(f"[^\\W_{PY_CJK}]")


def snippet(
    text: str, units: Sequence[Unit], weights: Sequence[float] | None = None
) -> tuple[str, bool]:
    """The snippet text and whether it leaves part of `text` out."""
    if len(text) <= SNIPPET_CHARS:
        return _collapse(text), False
    found = locate(text, units, weights)
    start, end = found if found is not None else (0, 0)
    budget = SNIPPET_CHARS
    lead = (budget - min(end - start, budget)) // 3
    low = max(0, start - lead)
    high = min(len(text), low + budget)
    low = max(0, high - budget)
    low = _snap_forward(text, low, limit=start)
    high = _snap_back(text, high, limit=end)
    body = _collapse(text[low:high])
    prefix = ELLIPSIS if low > 0 else ""
    suffix = ELLIPSIS if high < len(text) else ""
    return f"{prefix}{body}{suffix}", low > 0 or high < len(text)


def locate(
    text: str, units: Sequence[Unit], weights: Sequence[float] | None = None
) -> tuple[int, int] | None:
    """Where, in `text`, the best-matching unit first occurs: (start, end) offsets, or None."""
    if not units:
        return None
    folded, offsets = fold_with_offsets(text)
    ranked = weights if weights is not None else [1.0] * len(units)
    best: tuple[float, int, int] | None = None
    for unit, weight in sorted(zip(units, ranked, strict=True), key=lambda pair: -pair[1]):
        if best is not None and weight < best[0]:
            break  # every remaining unit weighs less than one already found
        span = _first(folded, unit)
        if span is not None and (best is None or span[0] < best[1]):
            best = (weight, span[0], span[1])
    if best is None:
        return None
    _, start, end = best
    if offsets is None:
        return start, end
    return offsets[start], offsets[end - 1] + 1


def normalize_scores(scores: Sequence[float]) -> list[float]:
    """Scores divided by the best one, so the top hit scores 1.0 and all lie in [0, 1]."""
    top = max(scores, default=0.0)
    if top <= 0:
        return [1.0 for _ in scores]
    return [min(1.0, max(0.0, score / top)) for score in scores]


def _first(folded: str, unit: Unit) -> tuple[int, int] | None:
    if all(is_cjk(token) for token in unit):
        needle = "".join(unit)
        at = folded.find(needle)
        return (at, at + len(needle)) if at >= 0 else None
    # A literal search with the token's edges checked by hand: a compiled pattern per token
    # (`token(?!word char)`) costs far more to compile than the search it serves.
    token = unit[0]
    at = folded.find(token)
    while at >= 0:
        end = at + len(token)
        if _WORD.match(folded, end) is None and (at == 0 or _WORD.match(folded, at - 1) is None):
            return at, end
        at = folded.find(token, at + 1)
    return None


def _snap_forward(text: str, low: int, *, limit: int) -> int:
    """Move the window's start past the word it cuts, unless that would skip the match."""
    if low == 0 or text[low - 1].isspace():
        return low
    for at in range(low, min(limit, low + _SNAP)):
        if text[at].isspace():
            return at + 1
    return low


def _snap_back(text: str, high: int, *, limit: int) -> int:
    """Move the window's end back before the word it cuts, unless that would cut the match."""
    if high >= len(text):
        return len(text)
    for at in range(high, max(limit, high - _SNAP) - 1, -1):
        if text[at].isspace():
            return at
    return high


def _collapse(text: str) -> str:
    return " ".join(text.split())
