"""Text analysis for session search: one tokenizer for indexing, querying and snippets.

Every backend sees the same tokens: the tantivy index analyses with `analyzer()`, PostgreSQL
stores `" ".join(tokens(text))` in a `'simple'` tsvector, and queries go through `query_units`.

The pipeline:

1. `prepare` (Python, only for non-ASCII text): NFKD, drop the combining diacritical marks
   (U+0300-U+036F), NFC. So `Café` and `Cafe\u0301` both become `Cafe`, Greek and Cyrillic
   accents fold too (`ά` -> `α`, `ё` -> `е`), compatibility forms unfold (full-width `Ａ`,
   half-width katakana, ligatures), and Hangul and kana with (han)dakuten recompose intact.
2. A regex tokenizer (in tantivy, Rust): a token is a run of letters, digits and marks, except
   that each CJK ideograph, kana or Hangul syllable is a token of its own (those scripts put no
   spaces between words). Punctuation and `_` separate tokens, so `search_sessions` is `search`
   and `sessions`.
3. Filters: drop tokens over `MAX_TOKEN_BYTES` (base64 blobs, minified code), lowercase, and
   ASCII folding (`ß` -> `ss`, `ø` -> `o`, `æ` -> `ae`).

A query becomes *units*: a single token, or for a run of adjacent CJK characters the sequence of
them, matched as a phrase (`東京` finds `東京` but not `京東`). Units are OR-ed. Limitation: Thai,
Lao, Khmer and Myanmar (also written without spaces) are tokenized by whole runs.
"""

from __future__ import annotations

import functools
import re
import unicodedata

import tantivy

# Bump when the pipeline changes: an index built with another analysis is rebuilt.
ANALYSIS_VERSION = 1
MAX_TOKEN_BYTES = 100
# A query is cut to this many distinct units (a 4096-character paste would otherwise OR
# hundreds of terms).
MAX_QUERY_UNITS = 64

# Scripts whose characters are tokens of their own: CJK ideographs (and radicals, iteration
# marks), hiragana, katakana (with the half-width forms), Hangul jamo and syllables.
_CJK_RANGES = (
    (0x1100, 0x11FF),
    (0x2E80, 0x2FDF),
    (0x3005, 0x3007),
    (0x3021, 0x3029),
    (0x3038, 0x303B),
    (0x3040, 0x30FF),
    (0x3130, 0x318F),
    (0x31F0, 0x31FF),
    (0x3400, 0x4DBF),
    (0x4E00, 0x9FFF),
    (0xA960, 0xA97F),
    (0xAC00, 0xD7FF),
    (0xF900, 0xFAFF),
    (0xFF66, 0xFFDC),
    (0x20000, 0x3134F),
)
_RUST_CJK = "".join(f"\\x{{{lo:X}}}-\\x{{{hi:X}}}" for lo, hi in _CJK_RANGES)
PY_CJK = "".join(f"{chr(lo)}-{chr(hi)}" for lo, hi in _CJK_RANGES)
TOKEN_PATTERN = rf"[[{_RUST_CJK}]&&[\p{{L}}\p{{N}}]]|[[\p{{L}}\p{{N}}\p{{M}}]--[{_RUST_CJK}]]+"

_CJK_CHAR = re.compile(f"[{PY_CJK}]")
_DIACRITICS = re.compile("[\u0300-\u036f]+")

Unit = tuple[str, ...]


@functools.cache
def analyzer() -> tantivy.TextAnalyzer:
    """The tantivy analyzer of steps 2 and 3 (the caller applies `prepare` first)."""
    builder = tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.regex(TOKEN_PATTERN))
    builder = builder.filter(tantivy.Filter.remove_long(MAX_TOKEN_BYTES))
    builder = builder.filter(tantivy.Filter.lowercase())
    return builder.filter(tantivy.Filter.ascii_fold()).build()


def prepare(text: str) -> str:
    """Step 1: unfold compatibility forms and strip diacritics (ASCII text is returned as is)."""
    if text.isascii():
        return text
    decomposed = unicodedata.normalize("NFKD", text)
    return unicodedata.normalize("NFC", _DIACRITICS.sub("", decomposed))


def tokens(text: str) -> list[str]:
    """The tokens of `text`, folded, in order."""
    return analyzer().analyze(prepare(text))


def is_cjk(token: str) -> bool:
    """Whether `token` is one CJK character (a token of its own)."""
    return len(token) == 1 and _CJK_CHAR.match(token) is not None


def query_units(text: str) -> list[Unit]:
    """The distinct units of a user query, in order: never query syntax, always plain words."""
    units: list[Unit] = []
    run: list[str] = []
    run_end = -1
    for token in analyzer().pre_tokenize(prepare(text)).tokens:
        if not is_cjk(token.text):
            units.extend([tuple(run), (token.text,)] if run else [(token.text,)])
            run = []
            continue
        if run and token.char_offset_from != run_end:
            units.append(tuple(run))
            run = []
        run.append(token.text)
        run_end = token.char_offset_to
    if run:
        units.append(tuple(run))
    return list(dict.fromkeys(units))[:MAX_QUERY_UNITS]


@functools.cache
def fold_char(char: str) -> str:
    """What one character becomes in the token stream: its folded form, itself for a separator,
    or nothing for a stripped diacritic. Used to find a match in the original text."""
    prepared = prepare(char)
    if not prepared:
        return ""
    folded = analyzer().analyze(prepared)
    return "".join(folded) if folded else char


def fold_with_offsets(text: str) -> tuple[str, list[int] | None]:
    """`text` folded like the tokens, and for each folded character the offset in `text` it
    came from (None when the two line up one to one)."""
    if text.isascii():
        return text.lower(), None
    table: dict[int, str] = {}
    same_length = True
    for char in set(text):
        folded = char.lower() if char.isascii() else fold_char(char)
        table[ord(char)] = folded
        same_length = same_length and len(folded) == 1
    if same_length:
        return text.translate(table), None
    pieces: list[str] = []
    offsets: list[int] = []
    for index, char in enumerate(text):
        folded = table[ord(char)]
        pieces.append(folded)
        offsets.extend([index] * len(folded))
    return "".join(pieces), offsets
