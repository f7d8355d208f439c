"""Strict argument checks shared by the four tools.

Nothing is coerced (spec: Error behavior) except where the spec normalizes: `null` means
omitted for optional fields, and a whole-number float counts as an integer because arguments
cross gRPC as a `google.protobuf.Struct`, where every number is a double (and JSON Schema's
`integer` accepts `10.0` too). Booleans are never numbers.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

from services.query.sessions.errors import invalid

_RFC3339 = re.compile(
    r"(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(?:\.(\d+))?"
    r"(?:([Zz])|([+-])(\d{2}):(\d{2}))"
)


def require_object(arguments: object) -> Mapping[str, Any]:
    """The arguments as a mapping, or invalid_request."""
    if not isinstance(arguments, Mapping) or not all(isinstance(k, str) for k in arguments):
        raise invalid("arguments", "arguments must be a JSON object")
    return arguments


def reject_unknown(arguments: Mapping[str, Any], allowed: Sequence[str]) -> None:
    """invalid_request naming the first unknown field (sorted, so the answer is stable)."""
    unknown = sorted(set(arguments) - set(allowed))
    if unknown:
        raise invalid(unknown[0], f"unknown field: {unknown[0]}", allowed=list(allowed))


def value(arguments: Mapping[str, Any], name: str) -> Any:
    """The argument, with null and absent both as None."""
    return arguments.get(name)


def required_text(arguments: Mapping[str, Any], name: str) -> str:
    """A string with at least one non-whitespace character (returned as sent)."""
    raw = value(arguments, name)
    if not isinstance(raw, str) or not raw.strip():
        raise invalid(name, f"{name} must be a non-empty string")
    return raw


def optional_text(arguments: Mapping[str, Any], name: str) -> str | None:
    """None when omitted; else a string that is not blank (kept exactly: filters are exact)."""
    raw = value(arguments, name)
    if raw is None:
        return None
    if not isinstance(raw, str) or not raw.strip():
        raise invalid(name, f"{name} must be a non-empty string when present")
    return raw


def optional_integer(
    arguments: Mapping[str, Any], name: str, *, default: int, minimum: int, maximum: int
) -> int:
    """An integer in [minimum, maximum], or the default when omitted."""
    raw = value(arguments, name)
    if raw is None:
        return default
    number: int | None = None
    if isinstance(raw, int) and not isinstance(raw, bool):
        number = raw
    elif isinstance(raw, float) and raw.is_integer():
        number = int(raw)
    if number is None or not minimum <= number <= maximum:
        raise invalid(
            name,
            f"{name} must be an integer from {minimum} to {maximum}",
            minimum=minimum,
            maximum=maximum,
        )
    return number


def optional_bool(arguments: Mapping[str, Any], name: str, *, default: bool) -> bool:
    """A JSON boolean, or the default when omitted."""
    raw = value(arguments, name)
    if raw is None:
        return default
    if not isinstance(raw, bool):
        raise invalid(name, f"{name} must be a boolean")
    return raw


def optional_choice(
    arguments: Mapping[str, Any], name: str, choices: Sequence[str], *, default: str | None
) -> str | None:
    """One of `choices` exactly (case-sensitive), or the default when omitted."""
    raw = value(arguments, name)
    if raw is None:
        return default
    if not isinstance(raw, str) or raw not in choices:
        raise invalid(name, f"{name} must be one of: {', '.join(choices)}", allowed=list(choices))
    return raw


def optional_datetime(
    arguments: Mapping[str, Any], name: str, *, millisecond_precision: bool
) -> datetime | None:
    """An RFC 3339 datetime with an explicit offset, as an aware datetime; None when omitted."""
    raw = value(arguments, name)
    if raw is None:
        return None
    return parse_datetime(raw, name, millisecond_precision=millisecond_precision)


def required_datetime(
    arguments: Mapping[str, Any], name: str, *, millisecond_precision: bool = False
) -> datetime:
    """As `optional_datetime`, but the argument must be there."""
    parsed = optional_datetime(arguments, name, millisecond_precision=millisecond_precision)
    if parsed is None:
        raise invalid(name, f"{name} is required (RFC 3339 with a timezone offset)")
    return parsed


def parse_datetime(raw: object, name: str, *, millisecond_precision: bool) -> datetime:
    """Parse RFC 3339 strictly: a date, `T`, a time, optional fraction, and `Z` or `±HH:MM`.

    Digits finer than the allowed precision (milliseconds for file_attention, microseconds,
    which is what Python can hold, elsewhere) are refused unless they are zeros.
    """
    shape = f"{name} must be an RFC 3339 datetime with a timezone offset or Z"
    match = _RFC3339.fullmatch(raw) if isinstance(raw, str) else None
    if match is None:
        raise invalid(name, shape)
    year, month, day, hour, minute, second, fraction, zulu, sign, off_h, off_m = match.groups()
    digits = fraction or ""
    allowed = 3 if millisecond_precision else 6
    if digits[allowed:].strip("0"):
        unit = "millisecond" if millisecond_precision else "microsecond"
        raise invalid(name, f"{name} must have at most {unit} precision")
    micros = int((digits[:6]).ljust(6, "0"))
    try:
        if zulu:
            zone = UTC
        else:
            if int(off_h) > 23 or int(off_m) > 59:
                raise ValueError("offset out of range")
            offset = timedelta(hours=int(off_h), minutes=int(off_m))
            zone = timezone(offset if sign == "+" else -offset)
        return datetime(
            int(year), int(month), int(day), int(hour), int(minute), int(second), micros, zone
        )
    except ValueError:
        raise invalid(name, shape) from None
