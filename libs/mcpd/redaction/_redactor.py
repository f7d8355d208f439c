"""`Redactor`: the built-in secret rules, a project's rules and the server's key, applied.

What each mode does to what a rule acts on (see `RedactionPolicy` for what that is):

* `drop`: the key is removed from its object, as if it was never sent. A pattern-only rule
  removes the string holding the match (from its object, or from its list). Where nothing can
  be removed (a required field such as a log message, or `redact_text`) the value becomes the
  mask token; an optional top-level field becomes None.
* `mask`: the value, or the match, becomes `[REDACTED:<rule>]`.
* `partial`: the first `keep_prefix` and last `keep_suffix` characters stay and every character
  between becomes `*` (`4111********1111`). When fewer characters would be masked than kept
  (a value shorter than twice `keep_prefix + keep_suffix`) every character becomes `*`.
  Numbers are treated as their JSON text; any other non-string value is masked.
* `hash`: the value, or the match, becomes `hmac-sha256:<64 lowercase hex>`, the HMAC-SHA256 of
  its UTF-8 bytes under the server's redaction key: equal inputs stay equal (so grouping and
  joins still work), the original cannot be recovered without the key, and rotating the key
  deliberately breaks every link. A non-string value is hashed as its canonical JSON (sorted
  keys, no spaces). `hash_identifier` is the same function, so a `user_id` filter hashes the
  same way as the stored column.

A null value stays null under `mask`, `partial` and `hash`: there is nothing to hide.

Built-in rules come first and always apply: secrets in every string are masked with the rule's
name (`[REDACTED:github_token]`), and the non-empty string value of a key whose name says secret
(`password`, `api_key`, `authorization`, `cookie`, ...) is masked as `[REDACTED:secret_field]`.
When several rules claim one key, the strongest mode wins (drop > mask > hash > partial), the
built-in secret-key mask included, so a project rule can make a secret key stricter but never
weaker.

Redaction is idempotent: redacting redacted data changes nothing, because mask tokens and
digests are never matched again and a digest is never re-hashed. A `Redactor` is immutable
apart from bounded caches (key decisions, recent digests), and safe to share between threads.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from itertools import islice
from typing import Any, Final

from mcpd.redaction._builtin import (
    BUILTIN_RULES,
    MIN_SECRET_CHARS,
    SECRET_KEY_RULE,
    Rule,
    gate_for,
    is_secret_key,
    mask,
    redact_builtin,
)
from mcpd.redaction._policy import RedactionMode, RedactionPolicy, RedactionRule

__all__ = ["HASH_PREFIX", "MIN_KEY_BYTES", "Dropped", "Redactor", "is_hashed", "partial"]

HASH_PREFIX: Final = "hmac-sha256:"
# A redaction key shorter than this is refused: it would be guessable.
MIN_KEY_BYTES: Final = 16

_HASHED = re.compile(r"hmac-sha256:[0-9a-f]{64}")
# Text a pattern rule must not touch again: earlier mask tokens and digests.
_PROTECTED = re.compile(r"\[REDACTED:[^\]]*\]|hmac-sha256:[0-9a-f]{64}")
_KEY_CACHE_SIZE = 4096
_DIGEST_CACHE_SIZE = 4096
# Only short values (identities, emails) are worth remembering.
_DIGEST_CACHE_TEXT = 256
_NO_KEYS: frozenset[str] = frozenset()


def is_hashed(value: str) -> bool:
    """Whether `value` is already a digest this module produced (`hmac-sha256:<64 hex>`)."""
    return _HASHED.fullmatch(value) is not None


def partial(value: str, keep_prefix: int, keep_suffix: int) -> str:
    """`value` with all but its first `keep_prefix` and last `keep_suffix` characters as `*`;
    entirely `*` when fewer characters would be masked than kept."""
    length = len(value)
    kept = keep_prefix + keep_suffix
    if kept == 0 or length < 2 * kept:
        return "*" * length
    return value[:keep_prefix] + "*" * (length - kept) + value[length - keep_suffix :]


class Dropped:
    """What `Redactor._redact_value` returns for a value a `drop` rule removed."""

    __slots__ = ("rule",)

    def __init__(self, rule: str) -> None:
        self.rule = rule


@dataclass(frozen=True, slots=True)
class _KeyAction:
    """What happens under one key name (cached per name)."""

    # The strongest project rule acting on the whole value, if any.
    whole: RedactionRule | None
    # Whether the built-in secret-key mask applies (and beats `whole`).
    secret: bool
    # Keys+pattern rules: `drop` ones test the value, the others join the walk below the key.
    scoped_drop: tuple[RedactionRule, ...]
    scoped: tuple[RedactionRule, ...]


class Redactor:
    """Redacts text and JSON-like payloads with built-in and project rules.

    `key` is the server's redaction key (`load_or_create_key`); without one, a value a `hash`
    rule matches and `hash_identifier` raise ValueError (the transcript importer masks secrets
    and hashes nothing; `for_project(document, key=None)` also serves to validate a document).
    Build one per project policy and reuse it: construction compiles the rules.
    """

    __slots__ = (
        "_builtin",
        "_digest_cache",
        "_gate",
        "_gate_search",
        "_key",
        "_key_cache",
        "_policy",
        "_quiet_keys",
        "_secret_keys",
        "_value_rules",
    )

    def __init__(
        self,
        policy: RedactionPolicy | None = None,
        *,
        key: bytes | None = None,
        builtin_rules: Iterable[Rule] = BUILTIN_RULES,
        secret_keys: bool = True,
    ) -> None:
        self._policy = policy or RedactionPolicy()
        if key is not None and len(key) < MIN_KEY_BYTES:
            raise ValueError(f"the redaction key must be at least {MIN_KEY_BYTES} bytes")
        self._key = key
        self._builtin = tuple(builtin_rules)
        self._gate = gate_for(self._builtin)
        self._gate_search = self._gate.search
        self._secret_keys = secret_keys
        self._value_rules = tuple(
            r for r in self._policy.rules if r.pattern is not None and not r.keys
        )
        self._key_cache: dict[str, _KeyAction | None] = {}
        # The cached keys whose action is None: no rule acts under them (see `_unchanged`).
        self._quiet_keys: set[str] = set()
        self._digest_cache: dict[str, str] = {}

    @classmethod
    def for_project(cls, redaction: Any, *, key: bytes | None) -> Redactor:
        """The redactor of a project whose `redaction` document is `redaction` (None: only the
        built-in rules). Raises InvalidArgument when the document is malformed."""
        return cls(RedactionPolicy.parse(redaction), key=key)

    @property
    def policy(self) -> RedactionPolicy:
        """The project rules applied on top of the built-in ones."""
        return self._policy

    @property
    def rules(self) -> tuple[Rule, ...]:
        """The built-in rules applied, in order."""
        return self._builtin

    # Text and payloads.

    def redact_text(self, text: str) -> str:
        """`text` with secrets and project pattern matches redacted (a `drop` match turns the
        whole text into the mask token). Key rules do not apply to plain text."""
        result = self._string(text, ())
        return mask(result.rule) if isinstance(result, Dropped) else result

    def redact_json(self, value: Any) -> Any:
        """`value` (dicts, lists, strings, scalars) with every rule applied at any depth.

        Returns `value` itself when nothing matched, else a new structure sharing the parts that
        did not change; the input is never modified. Tuples come back as lists and other
        mappings as dicts (JSON has no others). A top-level value dropped entirely comes back
        as None.
        """
        if not self._value_rules and self._unchanged(value):
            return value
        result = self._walk(value, ())
        return None if type(result) is Dropped else result

    def _redact_value(self, value: Any, *, required_keys: frozenset[str] = _NO_KEYS) -> Any:
        """`redact_json` for the row helpers (`_rows`): a dropped value comes back as
        `Dropped` naming its rule, and a key of `required_keys` in a top-level object that a
        `drop` rule matches is masked rather than removed."""
        if required_keys and isinstance(value, Mapping):
            return self._dict(value, (), required_keys)
        if not self._value_rules and self._unchanged(value):
            return value
        return self._walk(value, ())

    def hash_identifier(self, value: str) -> str:
        """`value` as `hmac-sha256:<hex>` under the redaction key; a digest is returned as is,
        so hashing twice is hashing once. Used for `user_id` at ingest and for a `user_id`
        filter at query time."""
        return self._digest(value)

    # The quick check. Almost every payload comes out of the walk unchanged, and the walk pays
    # for the bookkeeping that would let it copy what changed. Where no pattern rule applies
    # to every string (`_value_rules`), `_unchanged` answers first with less: an object whose
    # keys are all quiet (no rule acts under them: one C-level subset test instead of a cache
    # lookup per key), each string short or passed by the gate, the same at every depth. Any
    # doubt (a gate hit, a key with an action, a type the walk converts) says False, and the
    # walk then decides, so the outcome is always the walk's.

    def _unchanged(self, value: Any) -> bool:
        """Whether the walk would return `value` itself, for a redactor without value rules and
        a walk without scoped rules: True only when every key is quiet and every string is
        under MIN_SECRET_CHARS or missed by the gate."""
        kind = type(value)
        if kind is dict:
            if not value.keys() <= self._quiet_keys and not self._learn_keys(value):
                return False
            items: Iterable[Any] = value.values()
        elif kind is list:
            items = value
        elif kind is str:
            return len(value) < MIN_SECRET_CHARS or self._gate_search(value) is None
        else:
            return value is None or kind is int or kind is float or kind is bool
        gate = self._gate_search
        for item in items:
            kind = type(item)
            if kind is str:
                if len(item) >= MIN_SECRET_CHARS and gate(item) is not None:
                    return False
            elif item is None or kind is int or kind is float or kind is bool:
                continue
            elif kind is dict or kind is list:
                if not self._unchanged(item):
                    return False
            else:
                return False
        return True

    def _learn_keys(self, value: dict[Any, Any]) -> bool:
        """Decide the keys of `value` not decided yet; whether every key is now quiet."""
        cache = self._key_cache
        for key in value:
            if type(key) is not str:
                return False  # the walk looks these up as their str(): leave them to it
            if key not in cache:
                self._key_action(key)
        return value.keys() <= self._quiet_keys

    # The walk. Every function returns its input object when nothing changed, so callers can
    # test `is` and copy only what did change.

    def _walk(self, value: Any, scoped: tuple[RedactionRule, ...]) -> Any:
        kind = type(value)
        if kind is str:
            return self._string(value, scoped)
        if kind is dict:
            return self._dict(value, scoped, _NO_KEYS)
        if kind is list:
            return self._list(value, scoped)
        if value is None or kind is int or kind is float or kind is bool:
            return value
        if isinstance(value, str):
            return self._string(str(value), scoped)
        if isinstance(value, Mapping):
            return self._dict(value, scoped, _NO_KEYS)
        if isinstance(value, list | tuple):
            return self._list(value, scoped)
        return value

    def _string(self, text: str, scoped: tuple[RedactionRule, ...]) -> str | Dropped:
        if len(text) >= MIN_SECRET_CHARS and self._gate_search(text) is not None:
            result = redact_builtin(text, self._builtin, self._gate)
            out = text if result == text else result
        else:
            out = text
        for rules in (self._value_rules, scoped):
            for rule in rules:
                applied = self._apply_pattern(rule, out)
                if isinstance(applied, Dropped):
                    return applied
                out = applied
        return out

    def _dict(
        self, value: Mapping[Any, Any], scoped: tuple[RedactionRule, ...], required: frozenset[str]
    ) -> Any:
        new: dict[Any, Any] | None = None
        cache = self._key_cache
        gate = self._gate_search
        plain = not self._value_rules and not scoped
        for index, (key, item) in enumerate(value.items()):
            try:
                action = cache[key]
            except KeyError:
                action = self._key_action(key if type(key) is str else str(key))
            kind = type(item)
            # The common cases inline: a scalar, or a string with no project pattern to apply
            # and nothing the gate recognises.
            if action is not None:
                result = self._keyed(action, item, scoped)
            elif kind is str:
                if plain and (len(item) < MIN_SECRET_CHARS or gate(item) is None):
                    result = item
                else:
                    result = self._string(item, scoped)
            elif item is None or kind is int or kind is float or kind is bool:
                result = item
            else:
                result = self._walk(item, scoped)
            if result is item:
                if new is not None:
                    new[key] = item
                continue
            if new is None:
                new = dict(islice(value.items(), index))
            if type(result) is Dropped:
                if key in required:
                    new[key] = mask(result.rule)
            else:
                new[key] = result
        if new is None:
            return value if type(value) is dict else dict(value)
        return new

    def _list(self, value: list[Any] | tuple[Any, ...], scoped: tuple[RedactionRule, ...]) -> Any:
        new: list[Any] | None = None
        gate = self._gate_search
        plain = not self._value_rules and not scoped
        for index, item in enumerate(value):
            kind = type(item)
            if kind is str:
                if plain and (len(item) < MIN_SECRET_CHARS or gate(item) is None):
                    result = item
                else:
                    result = self._string(item, scoped)
            elif item is None or kind is int or kind is float or kind is bool:
                result = item
            else:
                result = self._walk(item, scoped)
            if result is item:
                if new is not None:
                    new.append(item)
                continue
            if new is None:
                new = list(value[:index])
            if type(result) is not Dropped:
                new.append(result)
        if new is None:
            return value if type(value) is list else list(value)
        return new

    def _keyed(self, action: _KeyAction, item: Any, scoped: tuple[RedactionRule, ...]) -> Any:
        whole = action.whole
        if (
            action.secret
            and isinstance(item, str)
            and item
            and (whole is None or whole.mode.strength <= RedactionMode.MASK.strength)
        ):
            return item if item == mask(SECRET_KEY_RULE) else mask(SECRET_KEY_RULE)
        if whole is not None:
            return self._whole(whole, item)
        for rule in action.scoped_drop:
            if self._contains_match(item, rule):
                return Dropped(rule.name)
        return self._walk(item, scoped + action.scoped if action.scoped else scoped)

    def _key_action(self, key: str) -> _KeyAction | None:
        lowered = key.lower()
        whole: RedactionRule | None = None
        scoped_drop: list[RedactionRule] = []
        scoped: list[RedactionRule] = []
        for rule in self._policy.rules:
            if not rule.keys or not rule.matches_key(lowered):
                continue
            if rule.pattern is None:
                if whole is None or rule.mode.strength > whole.mode.strength:
                    whole = rule
            elif rule.mode is RedactionMode.DROP:
                scoped_drop.append(rule)
            else:
                scoped.append(rule)
        secret = self._secret_keys and is_secret_key(key)
        action = (
            _KeyAction(whole, secret, tuple(scoped_drop), tuple(scoped))
            if whole is not None or secret or scoped_drop or scoped
            else None
        )
        if len(self._key_cache) >= _KEY_CACHE_SIZE:
            self._key_cache.clear()
            self._quiet_keys.clear()
        self._key_cache[key] = action
        if action is None:
            self._quiet_keys.add(key)
        return action

    # Modes.

    def _whole(self, rule: RedactionRule, value: Any) -> Any:
        mode = rule.mode
        if mode is RedactionMode.DROP:
            return Dropped(rule.name)
        if value is None:
            return value
        if mode is RedactionMode.MASK:
            token = mask(rule.name)
            return value if value == token else token
        if mode is RedactionMode.HASH:
            text = value if isinstance(value, str) else _canonical_json(value)
            digest = self._digest(text)
            return value if digest == value else digest
        if isinstance(value, str):
            masked = partial(value, rule.keep_prefix, rule.keep_suffix)
            return value if masked == value else masked
        if isinstance(value, int | float) and not isinstance(value, bool):
            return partial(_canonical_json(value), rule.keep_prefix, rule.keep_suffix)
        return mask(rule.name)

    def _apply_pattern(self, rule: RedactionRule, text: str) -> str | Dropped:
        pattern = rule.pattern
        assert pattern is not None
        if pattern.search(text) is None:
            return text
        protected = _protected_spans(text)
        if rule.mode is RedactionMode.DROP:
            for match in pattern.finditer(text):
                if match.end() > match.start() and not _overlaps(match, protected):
                    return Dropped(rule.name)
            return text

        def replace(match: re.Match[str]) -> str:
            found = match.group(0)
            if not found or _overlaps(match, protected):
                return found
            if rule.mode is RedactionMode.MASK:
                return mask(rule.name)
            if rule.mode is RedactionMode.HASH:
                return self._digest(found)
            return partial(found, rule.keep_prefix, rule.keep_suffix)

        result = pattern.sub(replace, text)
        return text if result == text else result

    def _contains_match(self, value: Any, rule: RedactionRule) -> bool:
        """Whether any string in `value` (at any depth) holds a match of `rule`'s pattern."""
        pattern = rule.pattern
        assert pattern is not None
        if isinstance(value, str):
            protected = _protected_spans(value)
            return any(
                match.end() > match.start() and not _overlaps(match, protected)
                for match in pattern.finditer(value)
            )
        if isinstance(value, Mapping):
            return any(self._contains_match(item, rule) for item in value.values())
        if isinstance(value, list | tuple):
            return any(self._contains_match(item, rule) for item in value)
        return False

    def _digest(self, text: str) -> str:
        # The same identities recur on span after span of a trace: remember recent digests.
        cache = self._digest_cache
        try:
            return cache[text]
        except KeyError:
            pass
        if self._key is None:
            raise ValueError("hashing needs the redaction key; this Redactor has none")
        if text.startswith(HASH_PREFIX) and _HASHED.fullmatch(text) is not None:
            return text
        data = text.encode("utf-8", "surrogatepass")
        digest = HASH_PREFIX + hmac.new(self._key, data, hashlib.sha256).hexdigest()
        if len(text) <= _DIGEST_CACHE_TEXT:
            if len(cache) >= _DIGEST_CACHE_SIZE:
                cache.clear()
            cache[text] = digest
        return digest


def _protected_spans(text: str) -> tuple[tuple[int, int], ...]:
    if "[REDACTED:" not in text and HASH_PREFIX not in text:
        return ()
    return tuple(match.span() for match in _PROTECTED.finditer(text))


def _overlaps(match: re.Match[str], spans: tuple[tuple[int, int], ...]) -> bool:
    start, end = match.span()
    return any(start < span_end and span_start < end for span_start, span_end in spans)


def _canonical_json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
