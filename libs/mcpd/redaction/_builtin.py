"""The server's built-in secret rules, and the one regex that says whether any of them can fire.

Every string of every payload passes through here at ingest (tens of thousands of spans a
second), and almost none of them holds a secret. So the rules are not tried one by one: each
rule declares *triggers*, short shapes that every match of the rule contains, and all triggers
compile into one alternation, the gate. A string the gate does not match is returned untouched
after a single `search`; otherwise only the rules whose triggers are present run.

A trigger is an anchor character, the literal words that may precede it and a regex for what
follows (`Trigger`). The gate is fast because every alternative starts with its literal anchor,
so `re` skips in C to the next position holding an anchor character (`-`, `_`, `:`, `=`, `~`,
a few capitals, `b`, `2`) and tries alternatives only there. At an anchor it first checks the
two preceding characters against character classes built from the trigger words, then the
words' last characters, then the words, so a hyphen in `2025-03-14` costs one class test.
Anchors are chosen to be rare in prose. When the gate matches, each hit position is checked
against every trigger of its anchor, which names exactly the rules worth running.

Adding a rule means giving it triggers that every one of its matches contains;
`tests/libs/redaction/test_builtin.py` checks that for each rule's examples.
"""

from __future__ import annotations

import re
import string
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

__all__ = [
    "BUILTIN_RULES",
    "MIN_SECRET_CHARS",
    "SECRET_KEY_RULE",
    "Gate",
    "Rule",
    "Trigger",
    "gate_for",
    "is_secret_key",
    "mask",
    "redact_builtin",
]

# The shortest string any built-in rule can match (`pwd=x;`); shorter strings skip the gate.
MIN_SECRET_CHARS = 5


def mask(rule: str) -> str:
    """The token that replaces a value matched by `rule`: `[REDACTED:<rule>]`."""
    return f"[REDACTED:{rule}]"


@dataclass(frozen=True, slots=True)
class Trigger:
    """A shape every match of a rule contains: `anchor` (one character), immediately preceded
    by one of the literal `before` words (any text when empty) and followed by text matching
    the regex `after` (anything when empty). `ignore_case` applies to `before`."""

    anchor: str
    before: tuple[str, ...] = ()
    after: str = ""
    ignore_case: bool = False

    def __post_init__(self) -> None:
        if len(self.anchor) != 1:
            raise ValueError(f"a trigger anchor is one character, not {self.anchor!r}")
        if not self.before and not self.after:
            raise ValueError("a trigger needs words before its anchor, a regex after it, or both")
        if any(not word for word in self.before):
            raise ValueError("a trigger's before words are not empty")

    def lookbehinds(self) -> list[str]:
        """One lookbehind per width of `before` (each ends with the anchor: `re` evaluates it
        after the anchor is consumed)."""
        return _lookbehinds(self.anchor, self.before, self.ignore_case)

    def rest(self) -> str:
        """The regex tried just after the anchor."""
        behind = self.lookbehinds()
        rest = f"(?:{'|'.join(behind)})" if behind else ""
        return rest + (f"(?={self.after})" if self.after else "")


def _lookbehinds(anchor: str, words: Sequence[str], ignore_case: bool) -> list[str]:
    by_width: defaultdict[int, list[str]] = defaultdict(list)
    for word in dict.fromkeys(words):
        by_width[len(word)].append(re.escape(word + anchor))
    flag = "?i:" if ignore_case else "?:"
    return [f"(?<=({flag}{'|'.join(alts)}))" for _, alts in sorted(by_width.items())]


def _behind(anchor: str, *words: str, ignore_case: bool = False) -> Trigger:
    return Trigger(anchor, tuple(words), "", ignore_case)


def _ahead(anchor: str, after: str) -> Trigger:
    return Trigger(anchor, (), after)


@dataclass(frozen=True, slots=True)
class Rule:
    """One kind of secret in text.

    The `secret` group, when the pattern has one and it took part in the match, is what gets
    masked (so `Authorization: Bearer` and the host of a URL stay readable); otherwise the whole
    match is. Every match of `pattern` contains at least one of `triggers`.
    """

    name: str
    pattern: re.Pattern[str]
    triggers: tuple[Trigger, ...]

    def apply(self, text: str) -> str:
        """`text` with every match of this rule masked."""
        return self.pattern.sub(self._replacement, text)

    def _replacement(self, match: re.Match[str]) -> str:
        if "secret" not in self.pattern.groupindex or match.group("secret") is None:
            return mask(self.name)
        start, end = match.span("secret")
        offset = match.start()
        whole = match.group(0)
        return whole[: start - offset] + mask(self.name) + whole[end - offset :]


def _rule(name: str, pattern: str, *triggers: Trigger, flags: int = 0) -> Rule:
    return Rule(name, re.compile(pattern, flags), triggers)


def _quoted(*names: str) -> tuple[str, ...]:
    """`names` as they end before a `:` or `=`: bare, or closing a quoted key."""
    return tuple(name + quote for name in names for quote in ("", '"', "'"))


# Names that say a field holds a secret, as their last characters before `:` or `=`.
_FIELD_SUFFIXES = ("password", "passwd", "secret", "token", "_key", "-key", "apikey", "privatekey")
_URL_PARAMS = (
    "password",
    "passwd",
    "pwd",
    "pass",
    "secret",
    "client_secret",
    "token",
    "access_token",
    "refresh_token",
    "id_token",
    "auth_token",
    "api_key",
    "apikey",
    "api-key",
)
# What follows the `-` or `_` of every prefixed token (and of `aws_secret_access_key`): a cheap
# first test at two characters that are common in identifiers and dates.
_BODY = r"[A-Za-z0-9_\-]{10}"


def _token(anchor: str, *prefixes: str, ignore_case: bool = False) -> Trigger:
    """A token prefix such as `ghp_` or `sk-`: the words before the anchor, then a long body."""
    return Trigger(anchor, prefixes, _BODY, ignore_case)


_AWS = (_token("_", "aws", ignore_case=True), _token("-", "aws", ignore_case=True))
_AWS_CAMEL = _behind("S", "aws", ignore_case=True)
_SK = _token("-", "sk")
# `scheme://user:password@`: only a URL with a password in it.
_URL_PASSWORD = _ahead(":", r"//[^\s:/@]*:[^\s/@]+@")

# Order matters: whole blocks first (a private key may contain anything), then prefixed
# tokens, then the looser shapes (bearer values, `name: "value"`, KEY=value) that could
# otherwise claim a token's text under a vaguer name.
BUILTIN_RULES: tuple[Rule, ...] = (
    _rule(
        "private_key",
        r"-----BEGIN (?P<kind>[A-Z0-9 ]*)PRIVATE KEY(?: BLOCK)?-----"
        # Up to the matching END line, or to the end of the text when the output was cut.
        r"(?:.*?-----END (?P=kind)PRIVATE KEY(?: BLOCK)?-----|.*\Z)",
        Trigger("B", ("-----",), "EGIN "),
        flags=re.DOTALL,
    ),
    # Cloud credentials.
    _rule(
        "aws_access_key", r"\b(?:AKIA|ASIA|ABIA|ACCA)[0-9A-Z]{16}\b", _ahead("A", "KIA|SIA|BIA|CCA")
    ),
    _rule(
        "aws_secret_key",
        # `aws_secret_access_key`, `AWS-SECRET-KEY`, `awsSecretAccessKey`: a separator or a
        # capital after `aws`, which is what the triggers look for.
        r"(?i:aws)(?:[_\-]|(?=S))(?i:secret[_\-]?(?:access[_\-]?)?key)[\"']?\s*[:=]\s*"
        r"[\"']?(?P<secret>[A-Za-z0-9/+=]{40})(?![A-Za-z0-9/+=])",
        *_AWS,
        _AWS_CAMEL,
    ),
    _rule(
        "aws_session_token",
        r"(?i:aws)(?:[_\-]|(?=S))(?i:session[_\-]?token)[\"']?\s*[:=]\s*[\"']?"
        r"(?P<secret>[A-Za-z0-9/+=]{100,})",
        *_AWS,
        _AWS_CAMEL,
    ),
    _rule("google_api_key", r"\bAIza[0-9A-Za-z_\-]{35}(?![0-9A-Za-z_\-])", _ahead("A", "Iza")),
    _rule("google_oauth_secret", r"\bGOCSPX-[A-Za-z0-9_\-]{28}", _token("-", "GOCSPX")),
    _rule("google_oauth_token", r"\bya29\.[0-9A-Za-z_\-]{20,}", Trigger("2", ("ya",), r"9\.")),
    _rule(
        "azure_storage_key",
        r"\b(?:AccountKey|SharedAccessKey)\s*=\s*(?P<secret>[A-Za-z0-9+/]{20,}={0,2})",
        _ahead("A", "ccountKey"),
        _ahead("S", "haredAccessKey"),
    ),
    _rule(
        "azure_sas_signature",
        r"[?&]sig=(?P<secret>[A-Za-z0-9%+/=]{16,})",
        _behind("=", "?sig", "&sig"),
    ),
    _rule(
        "azure_client_secret",
        r"(?<![A-Za-z0-9_~.\-])[A-Za-z0-9_~.]{3}\dQ~[A-Za-z0-9_~.\-]{31,34}(?![A-Za-z0-9_~.\-])",
        _behind("~", *(f"{digit}Q" for digit in string.digits)),
    ),
    # Source forges, chat, payments, package registries.
    _rule(
        "github_token",
        r"\b(?:gh[pousr]_[A-Za-z0-9]{36,255}|github_pat_[A-Za-z0-9_]{22,255})\b",
        _token("_", *(f"gh{kind}" for kind in "pousr"), "github_pat"),
    ),
    _rule(
        "gitlab_token",
        r"\bgl(?:pat|ptt|dt|rt|ft|cbt|oas|imt|soat|agent)-[A-Za-z0-9_\-]{20,}",
        _token(
            "-",
            "glpat",
            "glptt",
            "gldt",
            "glrt",
            "glft",
            "glcbt",
            "gloas",
            "glimt",
            "glsoat",
            "glagent",
        ),
    ),
    _rule(
        "slack_token",
        r"\b(?:xox[abposre]-[A-Za-z0-9\-]{10,}|xapp-\d-[A-Za-z0-9\-]{10,})",
        _token("-", *(f"xox{kind}" for kind in "abposre"), "xapp"),
    ),
    _rule(
        "slack_webhook",
        r"https?://hooks\.slack\.com/(?:services|workflows|triggers)/"
        r"(?P<secret>[A-Za-z0-9_/+\-]{20,})",
        _ahead(":", r"//hooks\.slack\.com/"),
    ),
    _rule(
        "stripe_key",
        r"\b(?:[rs]k_(?:live|test)_[A-Za-z0-9]{16,}|whsec_[A-Za-z0-9]{24,})\b",
        _token("_", "sk", "rk"),
        _token("_", "whsec"),
    ),
    _rule("npm_token", r"\bnpm_[A-Za-z0-9]{36}\b", _token("_", "npm")),
    _rule("pypi_token", r"\bpypi-AgEIcHlwaS5vcmc[A-Za-z0-9_\-]{50,}", _token("-", "pypi")),
    # Model providers. Anthropic and OpenAI first, then any other `sk-` key under a plain name.
    _rule("anthropic_api_key", r"\bsk-ant-[A-Za-z0-9_\-]{20,}", _SK),
    _rule(
        "openai_api_key",
        r"\bsk-(?:proj|svcacct|admin|None)-[A-Za-z0-9_\-]{20,}"
        r"|\bsk-[A-Za-z0-9]{20}T3BlbkFJ[A-Za-z0-9]{20}\b",
        _SK,
    ),
    _rule("api_key", r"\bsk-[A-Za-z0-9_\-]{20,}", _SK),
    _rule("huggingface_token", r"\bhf_[A-Za-z0-9]{30,}\b", _token("_", "hf")),
    _rule("groq_api_key", r"\bgsk_[A-Za-z0-9]{48,}\b", _token("_", "gsk")),
    _rule("xai_api_key", r"\bxai-[A-Za-z0-9]{70,}\b", _token("-", "xai")),
    _rule("replicate_token", r"\br8_[A-Za-z0-9]{30,}\b", _token("_", "r8")),
    _rule("perplexity_api_key", r"\bpplx-[A-Za-z0-9]{40,}\b", _token("-", "pplx")),
    _rule(
        "jwt",
        r"\beyJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}",
        _behind("J", "ey"),
    ),
    # Credentials in HTTP headers, URLs and connection strings.
    _rule(
        "bearer_token",
        r"\b(?:[Bb]earer|BEARER)\s+(?P<secret>[A-Za-z0-9\-._~+/]{16,}=*)",
        _ahead("B", "earer|EARER"),
        _ahead("b", "earer"),
    ),
    _rule(
        "authorization_header",
        r"(?i:\b(?:proxy-)?authorization[\"']?[:=]\s*[\"']?"
        r"(?:basic|token|digest|apikey|api-key|key|sso-key|bot|negotiate|ntlm)\s+)"
        r"(?P<secret>[A-Za-z0-9\-._~+/:=]{6,})",
        _behind(":", *_quoted("authorization"), ignore_case=True),
        _behind("=", *_quoted("authorization"), ignore_case=True),
    ),
    _rule(
        "api_key_header",
        r"(?i:\b(?:x-|x-goog-)?api-key[\"']?:\s*[\"']?)(?P<secret>[A-Za-z0-9\-._~+/=]{16,})",
        _behind(":", *_quoted("api-key"), ignore_case=True),
    ),
    # scheme://user:password@host: the password only, so the host stays searchable. Anchored
    # at `://` rather than the scheme so `re` can find candidates with a literal search.
    _rule(
        "connection_password", r"://[^\s:/@'\"\[\]]*:(?P<secret>[^\s@/'\"\[\]]+)@", _URL_PASSWORD
    ),
    # `Server=db;User Id=app;Password=...;` (ADO.NET, ODBC, JDBC property strings): after a
    # `;`, or before one. A lone `PWD=/home/ann` or `password=form["password"]` is not one.
    _rule(
        "connection_password",
        r";[ \t]*(?i:password|pwd)=(?!\[REDACTED:)(?P<secret>[^;\r\n\"']+)",
        _behind("=", "password", "pwd", ignore_case=True),
    ),
    _rule(
        "connection_password",
        r"(?<![A-Za-z0-9_])(?i:password|pwd)=(?!\[REDACTED:)(?P<secret>[^;\s\"']+)(?=;)",
        _behind("=", "password", "pwd", ignore_case=True),
    ),
    _rule(
        "url_credential",
        r"[?&](?i:" + "|".join(re.escape(p) for p in _URL_PARAMS) + r")="
        r"(?!\[REDACTED:)(?P<secret>[^&\s#\"'<>]+)",
        _behind("=", *(q + p for p in _URL_PARAMS for q in "?&"), ignore_case=True),
    ),
    # `"password": "..."`, `api_key: '...'`, `client_secret="..."` in text: a quoted value after
    # a name that says secret. Unquoted values are left alone: `password = form["password"]`
    # in code is not a secret.
    _rule(
        "secret_field",
        r"(?<![A-Za-z0-9])(?i:(?:[a-z0-9]+[_\-.])*"
        r"(?:password|passwd|secret|api[_\-]?key|access[_\-]?token|refresh[_\-]?token|"
        r"auth[_\-]?token|id[_\-]?token|api[_\-]?token|session[_\-]?token|"
        r"private[_\-]?key))[\"']?[:=]\s*[\"'](?!\$|\[REDACTED:)(?P<secret>[^\"'\\\s][^\"'\\]*)",
        _behind(":", *_quoted(*_FIELD_SUFFIXES), ignore_case=True),
        _behind("=", *_quoted(*_FIELD_SUFFIXES), ignore_case=True),
    ),
    # Shell and .env assignments to variables whose name says they hold a secret. Upper case
    # only: `password = form["password"]` in code is not a secret, `DB_PASSWORD=...` is.
    # `...TOKEN` must end the name (`MAX_TOKENS=4096` is a setting).
    _rule(
        "secret_assignment",
        r"\b(?:[A-Z0-9_]*(?:PASSWORD|PASSWD|SECRET|API_KEY|APIKEY|PRIVATE_KEY)[A-Z0-9_]*"
        r"|[A-Z0-9_]*TOKEN)\s*=\s*[\"']?(?!\[REDACTED:)(?P<secret>[^\s\"'$][^\s\"']{3,})",
        _ahead("P", "ASSWORD|ASSWD|RIVATE_KEY"),
        _ahead("S", "ECRET"),
        _ahead("A", "PI_?KEY"),
        _ahead("T", "OKEN"),
    ),
)


class Gate:
    """The combined pre-check of a set of rules (see the module docstring)."""

    __slots__ = ("_at", "_pattern", "search")

    def __init__(self, rules: Sequence[Rule]) -> None:
        # Per anchor, each distinct trigger with the rules declaring it.
        at: dict[str, dict[Trigger, set[int]]] = {}
        for index, rule in enumerate(rules):
            for trigger in rule.triggers:
                at.setdefault(trigger.anchor, {}).setdefault(trigger, set()).add(index)
        source = "|".join(
            re.escape(anchor) + _anchor_alternatives(anchor, list(triggers))
            for anchor, triggers in at.items()
        )
        self._pattern = re.compile(source or r"(?!)")
        self._at = {
            anchor: tuple(
                (re.compile(trigger.rest()), frozenset(indices))
                for trigger, indices in triggers.items()
            )
            for anchor, triggers in at.items()
        }
        self.search = self._pattern.search

    def rules_in(self, text: str) -> frozenset[int]:
        """The indices of the rules whose triggers occur in `text`.

        The gate's alternation stops at the first trigger that matches at a position, so every
        trigger of that anchor is tried again there: two rules whose triggers share an anchor
        position (the `S` of `AWSSECRET`) are both found.
        """
        found: set[int] = set()
        at = self._at
        for match in self._pattern.finditer(text):
            start = match.start()
            for pattern, indices in at[text[start]]:
                if pattern.match(text, start + 1) is not None:
                    found |= indices
        return frozenset(found)


# How many final characters of the trigger words the gate compares before the whole words.
_TAIL = 4


def _anchor_alternatives(anchor: str, triggers: list[Trigger]) -> str:
    """What the gate tries after one anchor.

    Triggers with words before the anchor are merged per `after`: the lookahead first, then
    class tests of the two characters before the anchor, then lookbehinds on the last four
    characters of the words, then the full words (one lookbehind per width and case).
    Each step rejects most positions more cheaply than the next. Triggers with only a
    lookahead are merged into one.
    """
    parts: list[str] = []
    by_after: dict[str, list[Trigger]] = {}
    for trigger in triggers:
        if trigger.before:
            by_after.setdefault(trigger.after, []).append(trigger)
    for after, group in by_after.items():
        classes = _classes([w for t in group for w in t.before], any(t.ignore_case for t in group))
        checks: list[str] = []
        for ignore_case in (False, True):
            words = [w for t in group if t.ignore_case is ignore_case for w in t.before]
            if not words:
                continue
            tails = [word[-_TAIL:] for word in words]
            tail_looks = _lookbehinds(anchor, tails, ignore_case)
            full_looks = _lookbehinds(anchor, words, ignore_case)
            check = f"(?:{'|'.join(tail_looks)})"
            if full_looks != tail_looks:
                check += f"(?:{'|'.join(full_looks)})"
            checks.append(check)
        lookahead = f"(?={after})" if after else ""
        parts.append(f"{lookahead}(?<={classes}{re.escape(anchor)})(?:{'|'.join(checks)})")
    ahead = [t for t in triggers if not t.before]
    if ahead:
        parts.append("(?=" + "|".join(f"(?:{t.after})" for t in ahead) + ")")
    return f"(?:{'|'.join(parts)})"


def _classes(words: list[str], ignore_case: bool) -> str:
    """Two character classes: what the second-to-last and the last characters of `words` can
    be (every trigger word has at least two characters)."""
    columns = []
    for offset in (-2, -1):
        chars = {word[offset] for word in words}
        if ignore_case:
            chars |= {c.swapcase() for c in chars}
        columns.append("[" + "".join(re.escape(c) for c in sorted(chars)) + "]")
    return "".join(columns)


@lru_cache(maxsize=8)
def gate_for(rules: tuple[Rule, ...]) -> Gate:
    """The gate of `rules`, compiled once per distinct rule set."""
    return Gate(rules)


def redact_builtin(text: str, rules: tuple[Rule, ...], gate: Gate) -> str:
    """`text` with every match of `rules` masked; `text` itself when nothing matched."""
    if len(text) < MIN_SECRET_CHARS or gate.search(text) is None:
        return text
    present = gate.rules_in(text)
    result = text
    for index, rule in enumerate(rules):
        if index in present:
            result = rule.apply(result)
    return text if result == text else result


# Payload keys whose string values are secrets whatever they look like: the name, after an
# optional prefix ending in `_`, `-`, `.` or a camelCase boundary (`db_password`,
# `http.request.header.authorization`, `OPENAI_API_KEY`, `dbPassword`).
_SECRET_KEY = re.compile(
    r"(?:.*[_\-.]|.*[a-z0-9](?=[A-Z]))?(?i:"
    r"password|passwd|secret|client[_\-]?secret|secret[_\-]?key|secret[_\-]?access[_\-]?key|"
    r"api[_\-]?key|x[_\-]api[_\-]key|access[_\-]?token|refresh[_\-]?token|auth[_\-]?token|"
    r"id[_\-]?token|api[_\-]?token|session[_\-]?token|private[_\-]?key|authorization|"
    r"proxy[_\-]authorization|cookie|set[_\-]cookie)",
    re.DOTALL,
)

# The name of the built-in rule that masks values of secret-named keys.
SECRET_KEY_RULE = "secret_field"


def is_secret_key(key: str) -> bool:
    """Whether a payload key's name says its value is a secret (`password`, `x-api-key`,
    `OPENAI_API_KEY`, `authorization`, `cookie`, ...)."""
    return _SECRET_KEY.fullmatch(key) is not None
