"""A project's own redaction rules (spec: `Project.redaction`), parsed and checked.

The document is a JSON object with one key, `rules`, a list applied on top of the built-in
secret rules:

    {"rules": [
      {"name": "card", "pattern": "\\b\\d{16}\\b", "mode": "partial",
       "keep_prefix": 4, "keep_suffix": 4},
      {"name": "pw", "keys": ["password", "*_secret"], "mode": "drop"},
      {"name": "email", "pattern": "[\\w.+-]+@[\\w-]+\\.[\\w.-]+", "mode": "hash"},
      {"name": "ssn", "keys": ["notes"], "pattern": "\\d{3}-\\d{2}-\\d{4}", "mode": "mask"}
    ]}

A rule's fields:

* `name` (required): 1-64 of `A-Z a-z 0-9 _ . -`, unique in the document; it names the rule in
  the mask token `[REDACTED:<name>]`.
* `mode` (required): `drop`, `mask`, `partial` or `hash` (spec: RedactionMode).
* `keys`: key names, matched case-insensitively against the keys of JSON objects at any depth
  of a payload, exactly or as a glob (`*`, `?`, `[...]`, as in `fnmatch`). A key name, not a
  path: `"*_secret"` matches `db_secret` wherever it appears.
* `pattern`: a Python regular expression searched in every string of a payload (and in text
  fields such as a log message). It must not match the empty string. It runs on every string,
  so its shape is its cost: one that starts with a literal character (`@[\\w-]+\\.\\w+`) is
  found by a fast scan, one that starts with a class or `\\b` (`\\b\\d{16}\\b`) takes a regex
  step per character of every payload string.
* `keep_prefix`, `keep_suffix` (`partial` only, 0-64, default 4 each).

At least one of `keys` and `pattern` is required. What the rule acts on:

* `keys` alone: the whole value of each matching key.
* `pattern` alone: each match of the pattern, in every string.
* both: each match of the pattern in the strings under a matching key (at any depth below it);
  with `drop`, the matching key is removed when any string under it matches.

`Redactor` documents what each mode does to what it acts on. Every mistake raises
InvalidArgument with the dotted field (`redaction.rules[1].mode`).
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from mcpd.runtime.errors import InvalidArgument

__all__ = ["RedactionMode", "RedactionPolicy", "RedactionRule"]

MAX_RULES = 64
MAX_KEYS = 64
MAX_KEY_CHARS = 128
MAX_PATTERN_CHARS = 1024
MAX_KEEP = 64
DEFAULT_KEEP = 4

_NAME = re.compile(r"[A-Za-z0-9_.\-]{1,64}")
_RULE_FIELDS = frozenset({"name", "mode", "keys", "pattern", "keep_prefix", "keep_suffix"})


class RedactionMode(StrEnum):
    """What happens to a value a rule matched (spec: RedactionMode)."""

    DROP = "drop"
    MASK = "mask"
    PARTIAL = "partial"
    HASH = "hash"

    @property
    def strength(self) -> int:
        """How much of the value survives, inverted: when several rules claim one key, the
        strongest mode wins (drop > mask > hash > partial)."""
        return _STRENGTH[self]


_STRENGTH = {
    RedactionMode.PARTIAL: 0,
    RedactionMode.HASH: 1,
    RedactionMode.MASK: 2,
    RedactionMode.DROP: 3,
}


@dataclass(frozen=True, slots=True)
class RedactionRule:
    """One project rule. `keys` are lower-cased globs; `pattern` is compiled."""

    name: str
    mode: RedactionMode
    keys: tuple[str, ...] = ()
    pattern: re.Pattern[str] | None = None
    keep_prefix: int = DEFAULT_KEEP
    keep_suffix: int = DEFAULT_KEEP

    def matches_key(self, lowered_key: str) -> bool:
        """Whether this rule names `lowered_key` (already lower-cased)."""
        return any(fnmatch.fnmatchcase(lowered_key, glob) for glob in self.keys)

    def to_json(self) -> dict[str, Any]:
        """The rule as its document form (the canonical one: defaults written out)."""
        document: dict[str, Any] = {"name": self.name, "mode": self.mode.value}
        if self.keys:
            document["keys"] = list(self.keys)
        if self.pattern is not None:
            document["pattern"] = self.pattern.pattern
        if self.mode is RedactionMode.PARTIAL:
            document["keep_prefix"] = self.keep_prefix
            document["keep_suffix"] = self.keep_suffix
        return document


@dataclass(frozen=True, slots=True)
class RedactionPolicy:
    """A project's rules, in document order."""

    rules: tuple[RedactionRule, ...] = ()

    @classmethod
    def parse(cls, document: Any, *, field: str = "redaction") -> RedactionPolicy:
        """The policy a `redaction` document describes; None (absent) means no rules.

        `field` prefixes the dotted path in errors, for callers that nest the document.
        """
        if document is None:
            return cls()
        if not isinstance(document, Mapping):
            raise InvalidArgument(f"{field} must be an object with a rules list", field=field)
        for key in document:
            if key != "rules":
                raise InvalidArgument(
                    f"{field}: unknown field {key!r} (expected rules)", field=f"{field}.{key}"
                )
        rules_doc = document.get("rules")
        if rules_doc is None:
            return cls()
        if not isinstance(rules_doc, list):
            raise InvalidArgument(f"{field}.rules must be a list", field=f"{field}.rules")
        if len(rules_doc) > MAX_RULES:
            raise InvalidArgument(
                f"{field}.rules holds {len(rules_doc)} rules; at most {MAX_RULES} are allowed",
                field=f"{field}.rules",
            )
        rules: list[RedactionRule] = []
        names: set[str] = set()
        for index, rule_doc in enumerate(rules_doc):
            rule = _parse_rule(rule_doc, f"{field}.rules[{index}]")
            if rule.name in names:
                raise InvalidArgument(
                    f"{field}.rules[{index}].name: {rule.name!r} is already used by another rule",
                    field=f"{field}.rules[{index}].name",
                )
            names.add(rule.name)
            rules.append(rule)
        return cls(tuple(rules))

    def to_json(self) -> dict[str, Any]:
        """The policy as its document form."""
        return {"rules": [rule.to_json() for rule in self.rules]}


def _parse_rule(document: Any, at: str) -> RedactionRule:
    if not isinstance(document, Mapping):
        raise InvalidArgument(f"{at} must be an object", field=at)
    for key in document:
        if key not in _RULE_FIELDS:
            expected = ", ".join(sorted(_RULE_FIELDS))
            raise InvalidArgument(
                f"{at}: unknown field {key!r} (expected {expected})", field=f"{at}.{key}"
            )
    name = document.get("name")
    if not isinstance(name, str) or _NAME.fullmatch(name) is None:
        raise InvalidArgument(
            f"{at}.name is required: 1 to 64 letters, digits, '_', '.' or '-'", field=f"{at}.name"
        )
    mode_doc = document.get("mode")
    modes = {m.value: m for m in RedactionMode}
    mode = modes.get(mode_doc) if isinstance(mode_doc, str) else None
    if mode is None:
        raise InvalidArgument(
            f"{at}.mode is required: one of {', '.join(modes)} (got {mode_doc!r})",
            field=f"{at}.mode",
        )
    keys = _parse_keys(document.get("keys"), f"{at}.keys")
    pattern = _parse_pattern(document.get("pattern"), f"{at}.pattern")
    if not keys and pattern is None:
        raise InvalidArgument(f"{at} needs keys, a pattern, or both", field=f"{at}.keys")
    keep = [DEFAULT_KEEP, DEFAULT_KEEP]
    for slot, key in enumerate(("keep_prefix", "keep_suffix")):
        value = document.get(key)
        if value is None:
            continue
        if mode is not RedactionMode.PARTIAL:
            raise InvalidArgument(
                f"{at}.{key} only applies to mode partial (this rule's mode is {mode.value})",
                field=f"{at}.{key}",
            )
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_KEEP:
            raise InvalidArgument(
                f"{at}.{key} must be an integer from 0 to {MAX_KEEP} (got {value!r})",
                field=f"{at}.{key}",
            )
        keep[slot] = value
    return RedactionRule(name, mode, keys, pattern, keep[0], keep[1])


def _parse_keys(document: Any, at: str) -> tuple[str, ...]:
    if document is None:
        return ()
    if not isinstance(document, list) or not document:
        raise InvalidArgument(f"{at} must be a non-empty list of key names", field=at)
    if len(document) > MAX_KEYS:
        raise InvalidArgument(f"{at} holds more than {MAX_KEYS} key names", field=at)
    keys: list[str] = []
    for index, key in enumerate(document):
        if not isinstance(key, str) or not key or len(key) > MAX_KEY_CHARS:
            raise InvalidArgument(
                f"{at}[{index}] must be a key name or glob of 1 to {MAX_KEY_CHARS} characters",
                field=f"{at}[{index}]",
            )
        keys.append(key.lower())
    return tuple(dict.fromkeys(keys))


def _parse_pattern(document: Any, at: str) -> re.Pattern[str] | None:
    if document is None:
        return None
    if not isinstance(document, str) or not document or len(document) > MAX_PATTERN_CHARS:
        raise InvalidArgument(
            f"{at} must be a regular expression of 1 to {MAX_PATTERN_CHARS} characters",
            field=at,
        )
    try:
        pattern = re.compile(document)
    except re.error as exc:
        raise InvalidArgument(f"{at} is not a valid regular expression: {exc}", field=at) from None
    if pattern.fullmatch("") is not None:
        raise InvalidArgument(
            f"{at} matches the empty string, so it would match everywhere", field=at
        )
    return pattern
