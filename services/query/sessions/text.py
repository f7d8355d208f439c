"""Compact text for snippets and summaries: short enough to scan, never a full payload."""

from __future__ import annotations

# The display-label bound of the spec (list_sessions): 120 Unicode scalar values.
SUMMARY_CHARS = 120
# Search snippets come from the store; this caps one that came back too long.
SNIPPET_CHARS = 300
ELLIPSIS = "..."
ENCRYPTED_REASONING = "[encrypted reasoning omitted]"


def summarize(text: str, limit: int = SUMMARY_CHARS) -> tuple[str, bool]:
    """The first non-blank line, cut to `limit` characters at a word boundary when one is near,
    with an ellipsis; and whether anything was left out."""
    stripped = text.strip()
    first_line = stripped.split("\n", 1)[0].strip() if stripped else ""
    truncated = first_line != stripped
    if len(first_line) > limit:
        cut = first_line[:limit]
        # Back off to a word boundary within the last sixth, so words are not split mid-way.
        space = cut.rfind(" ", limit - limit // 6)
        first_line = cut[:space] if space > 0 else cut
        truncated = True
    if truncated:
        first_line = first_line.rstrip(" .,;:") + ELLIPSIS
    return first_line, truncated


def cap(text: str, limit: int = SNIPPET_CHARS) -> tuple[str, bool]:
    """`text` unchanged when short enough, else cut with an ellipsis."""
    if len(text) <= limit:
        return text, False
    return text[: limit - len(ELLIPSIS)].rstrip() + ELLIPSIS, True
