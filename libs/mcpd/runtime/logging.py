"""Structured logging for mcpd processes, and secret redaction.

`configure_logging` installs one stderr handler on the root logger. The `json` format writes one
object per line: `ts` (RFC 3339, milliseconds, UTC), `level`, `logger`, `msg`, every field passed
with `extra=`, `trace_id`/`span_id` when an OpenTelemetry span is active, and `exc` for
exceptions. The `text` format carries the same facts for a human.

Passwords in URLs never reach the output: messages, extras and tracebacks pass through the same
redaction as `redact_url`, which `mcpd config show` uses too.
"""

from __future__ import annotations

import json
import logging
import re
import sys
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any, TextIO
from urllib.parse import parse_qsl, urlencode, urlsplit

from opentelemetry import trace

LOG_LEVELS: Mapping[str, int] = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "warning": logging.WARNING,
    "error": logging.ERROR,
    "critical": logging.CRITICAL,
}
LOG_FORMATS = ("json", "text")

MASK = "***"

# Query parameters that carry credentials in connection URLs (libpq accepts `password=`).
_SECRET_PARAMS = frozenset(
    {"password", "passwd", "pwd", "pass", "secret", "token", "api_key", "apikey", "access_token"}
)
# `scheme://user:password@` inside free text (a message, a traceback).
_USERINFO_IN_TEXT = re.compile(r"(?P<head>[A-Za-z][A-Za-z0-9+.\-]*://[^\s/@:]*:)[^\s/@]+(?=@)")
# `password=...` in libpq key/value DSNs and query strings inside free text.
_SECRET_PAIR_IN_TEXT = re.compile(
    r"(?P<head>\b(?:" + "|".join(sorted(_SECRET_PARAMS)) + r")=)[^\s&'\"]+", re.IGNORECASE
)

# Attributes every LogRecord has; anything else on a record came in through `extra=`.
_STANDARD_ATTRS = frozenset(vars(logging.LogRecord("", logging.INFO, "", 0, "", None, None))) | {
    "message",
    "asctime",
    "taskName",
}

# Marks the handler this module installed, so configuring again replaces it instead of adding.
_HANDLER_MARK = "_mcpd_handler"


def redact_url(url: str) -> str:
    """`url` with its password (and secret query parameters) replaced by `***`.

    `postgresql://app:s3cret@db:5432/mcpd` becomes `postgresql://app:***@db:5432/mcpd`. Text that
    is not a URL (a libpq `key=value` DSN) has its `password=` values masked.
    """
    if "://" not in url:
        return _redact_text(url)
    try:
        parts = urlsplit(url)
        password = parts.password
    except ValueError:
        # Unparseable (a malformed IPv6 host, a bad port): nothing in it can be trusted as safe.
        return MASK
    # Replace pieces in place rather than re-assembling with urlunsplit, which rewrites
    # `chdb:///path` as `chdb:/path`.
    result = url
    if password is not None:
        userinfo, _, hostport = parts.netloc.rpartition("@")
        user = userinfo.partition(":")[0]
        result = result.replace(f"//{parts.netloc}", f"//{user}:{MASK}@{hostport}", 1)
    if parts.query:
        pairs = parse_qsl(parts.query, keep_blank_values=True)
        if any(key.lower() in _SECRET_PARAMS for key, _ in pairs):
            masked = urlencode(
                [(k, MASK if k.lower() in _SECRET_PARAMS else v) for k, v in pairs], safe="*"
            )
            result = result.replace(f"?{parts.query}", f"?{masked}", 1)
    return result


def _redact_text(text: str) -> str:
    text = _USERINFO_IN_TEXT.sub(lambda m: m.group("head") + MASK, text)
    return _SECRET_PAIR_IN_TEXT.sub(lambda m: m.group("head") + MASK, text)


def _timestamp(record: logging.LogRecord) -> str:
    moment = datetime.fromtimestamp(record.created, UTC)
    return f"{moment:%Y-%m-%dT%H:%M:%S}.{moment.microsecond // 1000:03d}Z"


def _extras(record: logging.LogRecord) -> dict[str, Any]:
    return {
        key: _redact_text(value) if isinstance(value, str) else value
        for key, value in vars(record).items()
        if key not in _STANDARD_ATTRS and not key.startswith("_")
    }


def _trace_context() -> dict[str, str]:
    context = trace.get_current_span().get_span_context()
    if not context.is_valid:
        return {}
    return {"trace_id": f"{context.trace_id:032x}", "span_id": f"{context.span_id:016x}"}


class JsonFormatter(logging.Formatter):
    """One JSON object per record, on one line."""

    def format(self, record: logging.LogRecord) -> str:
        """The record as a JSON line (no trailing newline; the handler adds it)."""
        entry: dict[str, Any] = _extras(record)
        # The fixed keys are written last so an `extra=` field cannot impersonate them.
        entry.update(_trace_context())
        entry.update(
            ts=_timestamp(record),
            level=record.levelname.lower(),
            logger=record.name,
            msg=_redact_text(record.getMessage()),
        )
        if record.exc_info:
            entry["exc"] = _redact_text(self.formatException(record.exc_info))
        if record.stack_info:
            entry["stack"] = _redact_text(self.formatStack(record.stack_info))
        return json.dumps(entry, default=str, ensure_ascii=False, separators=(",", ":"))


class TextFormatter(logging.Formatter):
    """`ts LEVEL logger: msg key=value ...`, for a terminal."""

    def format(self, record: logging.LogRecord) -> str:
        """The record as one readable line (plus the traceback, if any)."""
        fields = {**_extras(record), **_trace_context()}
        pairs = " ".join(f"{key}={_text_value(value)}" for key, value in fields.items())
        line = (
            f"{_timestamp(record)} {record.levelname:<8} {record.name}: "
            f"{_redact_text(record.getMessage())}"
        )
        if pairs:
            line = f"{line} {pairs}"
        if record.exc_info:
            line = f"{line}\n{_redact_text(self.formatException(record.exc_info))}"
        if record.stack_info:
            line = f"{line}\n{_redact_text(self.formatStack(record.stack_info))}"
        return line


def _text_value(value: object) -> str:
    if not isinstance(value, str):
        return json.dumps(value, default=str, ensure_ascii=False)
    # Quote strings only when needed, so `key=value` stays easy to grep.
    if value and not any(c.isspace() or c in '"=' for c in value):
        return value
    return json.dumps(value, ensure_ascii=False)


def configure_logging(level: str, fmt: str, *, stream: TextIO | None = None) -> None:
    """Send every log record at `level` or above to `stream` (stderr) in format `fmt`.

    `level` is one of debug, info, warning, error, critical (any case); `fmt` is `json` or
    `text`. Calling it again replaces the handler it installed before.
    """
    numeric = LOG_LEVELS.get(level.lower())
    if numeric is None:
        raise ValueError(f"unknown log level {level!r}; expected one of {', '.join(LOG_LEVELS)}")
    formatter: logging.Formatter
    match fmt.lower():
        case "json":
            formatter = JsonFormatter()
        case "text":
            formatter = TextFormatter()
        case _:
            raise ValueError(f"unknown log format {fmt!r}; expected json or text")
    handler = logging.StreamHandler(stream if stream is not None else sys.stderr)
    handler.setFormatter(formatter)
    setattr(handler, _HANDLER_MARK, True)
    root = logging.getLogger()
    for old in [h for h in root.handlers if getattr(h, _HANDLER_MARK, False)]:
        root.removeHandler(old)
        old.close()
    root.addHandler(handler)
    root.setLevel(numeric)
