"""Secrets redacted before anything is stored.

Agent transcripts are full of secrets: a `cat .env`, an `export OPENAI_API_KEY=...`, a tool
output with a connection string. `Redactor` masks the common kinds in text and in every string
of a JSON-like payload, with a token that names the rule (`[REDACTED:github_token]`), so a
reader knows something was there and what kind it was. Masking is deterministic: re-importing
the same transcript stores the same text.

The built-in rules are the server defaults; per-project rules (spec: `Project.redaction`) will
be added on top of them by the ingest service.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["DEFAULT_RULES", "Redactor", "Rule", "mask"]


def mask(rule: str) -> str:
    """The token that replaces a secret matched by `rule`."""
    return f"[REDACTED:{rule}]"


@dataclass(frozen=True, slots=True)
class Rule:
    """One kind of secret.

    `needles` are literal substrings at least one of which any match contains (checked first,
    because most text has no secret and a substring test is much cheaper than a regex). The
    `secret` group, when the pattern has one, is what gets masked; otherwise the whole match.
    """

    name: str
    pattern: re.Pattern[str]
    needles: tuple[str, ...] = ()

    def apply(self, text: str) -> str:
        """`text` with every match of this rule masked."""
        if self.needles and not any(needle in text for needle in self.needles):
            return text
        return self.pattern.sub(self._replacement, text)

    def _replacement(self, match: re.Match[str]) -> str:
        if "secret" not in self.pattern.groupindex or match.group("secret") is None:
            return mask(self.name)
        start, end = match.span("secret")
        whole_start = match.start()
        text = match.group(0)
        return text[: start - whole_start] + mask(self.name) + text[end - whole_start :]


def _rule(name: str, pattern: str, *needles: str, flags: int = 0) -> Rule:
    return Rule(name, re.compile(pattern, flags), needles)


# Order matters: whole blocks first (a private key may contain anything), then prefixed
# tokens, then the looser shapes (bearer values, KEY=value pairs) that could otherwise claim a
# token's text under a vaguer name.
DEFAULT_RULES: tuple[Rule, ...] = (
    _rule(
        "private_key",
        r"-----BEGIN (?P<kind>[A-Z0-9 ]*)PRIVATE KEY(?: BLOCK)?-----"
        # Up to the matching END line, or to the end of the text when the output was cut.
        r"(?:.*?-----END (?P=kind)PRIVATE KEY(?: BLOCK)?-----|.*\Z)",
        "PRIVATE KEY",
        flags=re.DOTALL,
    ),
    _rule(
        "aws_access_key",
        r"\bA(?:KIA|SIA|GPA|IDA|ROA|NPA)[0-9A-Z]{16}\b",
        *("AKIA", "ASIA", "AGPA", "AIDA", "AROA", "ANPA"),
    ),
    _rule(
        "aws_secret_key",
        r"(?i)aws_?secret_?access_?key[\"']?\s*[:=]\s*[\"']?(?P<secret>[A-Za-z0-9/+=]{40})",
        "ecret",
        "ECRET",
    ),
    _rule("github_token", r"\bgh[pousr]_[A-Za-z0-9]{36,255}\b", "gh"),
    _rule("github_token", r"\bgithub_pat_[A-Za-z0-9_]{22,255}\b", "github_pat_"),
    _rule("slack_token", r"\bxox[abposr]-[A-Za-z0-9-]{10,}", "xox"),
    _rule("google_api_key", r"\bAIza[0-9A-Za-z_\-]{35}\b", "AIza"),
    _rule("stripe_key", r"\b[rs]k_(?:live|test)_[A-Za-z0-9]{16,}\b", "k_live_", "k_test_"),
    # OpenAI (sk-..., sk-proj-...) and Anthropic (sk-ant-...) keys.
    _rule("api_key", r"\bsk-(?:[A-Za-z]+-)?[A-Za-z0-9_\-]{20,}", "sk-"),
    _rule("jwt", r"\beyJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}", "eyJ"),
    _rule(
        "bearer_token",
        r"(?i)\bbearer\s+(?P<secret>[A-Za-z0-9\-._~+/]{16,}=*)",
        "earer",
        "EARER",
    ),
    # scheme://user:password@host: the password only, so the host stays searchable.
    _rule(
        "connection_password",
        r"\b[a-zA-Z][a-zA-Z0-9+.\-]*://[^\s:/@'\"\[\]]+:(?P<secret>[^\s@/'\"\[\]]+)@",
        "://",
    ),
    # Shell and .env assignments to variables whose name says they hold a secret. Upper case
    # only: `password = form["password"]` in code is not a secret, `DB_PASSWORD=...` is.
    _rule(
        "secret_assignment",
        r"\b[A-Z0-9_]*(?:PASSWORD|PASSWD|SECRET|API_KEY|APIKEY|ACCESS_TOKEN|AUTH_TOKEN|"
        r"PRIVATE_KEY)[A-Z0-9_]*\s*=\s*[\"']?(?!\[REDACTED:)(?P<secret>[^\s\"'$][^\s\"']{3,})",
        "PASSWORD",
        "PASSWD",
        "SECRET",
        "API_KEY",
        "APIKEY",
        "TOKEN",
        "PRIVATE_KEY",
    ),
)

# Payload keys whose string values are secrets whatever they look like.
_SECRET_KEY = re.compile(
    r"(?i)^(?:password|passwd|pwd|secret|client_secret|api[_\-]?key|x-api-key|"
    r"access[_\-]?token|refresh[_\-]?token|auth[_\-]?token|id[_\-]?token|authorization|"
    r"private[_\-]?key|cookie|set-cookie)$"
)


class Redactor:
    """Masks secrets in text and in JSON-like payloads (dicts, lists, strings, scalars)."""

    def __init__(self, rules: Iterable[Rule] = DEFAULT_RULES) -> None:
        self._rules = tuple(rules)

    @property
    def rules(self) -> tuple[Rule, ...]:
        """The rules applied, in order."""
        return self._rules

    def redact_text(self, text: str) -> str:
        """`text` with every secret masked."""
        for rule in self._rules:
            text = rule.apply(text)
        return text

    def redact_payload(self, value: Any) -> Any:
        """A copy of `value` with secrets masked in every string, and the whole value of keys
        named like secrets (`password`, `api_key`, `authorization`, ...) masked."""
        if isinstance(value, str):
            return self.redact_text(value)
        if isinstance(value, Mapping):
            return {key: self._entry(key, item) for key, item in value.items()}
        if isinstance(value, list | tuple):
            return [self.redact_payload(item) for item in value]
        return value

    def _entry(self, key: object, item: Any) -> Any:
        if isinstance(key, str) and isinstance(item, str) and item and _SECRET_KEY.match(key):
            return mask("secret_field")
        return self.redact_payload(item)
