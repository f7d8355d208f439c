"""Envelopes (spec: Response Envelope, Error Envelope) and the wire forms of values in them."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from services.query.sessions.errors import ToolError

ERROR_SCHEMA_VERSION = "moraine.mcp.error.v1"


@dataclass(frozen=True, slots=True)
class ToolResult:
    """What a tool answered: the JSON envelope, and whether it is an error envelope."""

    envelope: dict[str, Any]
    is_error: bool


@dataclass(frozen=True, slots=True)
class Outcome:
    """A handled request: the canonical request, the tool's `data`, and any warnings."""

    request: dict[str, Any]
    data: dict[str, Any]
    warnings: list[dict[str, Any]]


def schema_version(tool: str) -> str:
    """`moraine.mcp.<tool>.v1`: the success schema of a tool (clients are built against it)."""
    return f"moraine.mcp.{tool}.v1"


def success(tool: str, outcome: Outcome, elapsed_ms: int) -> ToolResult:
    """The success envelope."""
    return ToolResult(
        envelope={
            "schema_version": schema_version(tool),
            "tool": tool,
            "request": outcome.request,
            "data": outcome.data,
            "warnings": outcome.warnings,
            "performance": {"elapsed_ms": elapsed_ms},
        },
        is_error=False,
    )


def failure(tool: str, arguments: object, error: ToolError, elapsed_ms: int) -> ToolResult:
    """The error envelope. `request` echoes the caller's arguments: a canonical request may not
    exist when the arguments were rejected."""
    return ToolResult(
        envelope={
            "schema_version": ERROR_SCHEMA_VERSION,
            "tool": tool,
            "request": echo(arguments) if isinstance(arguments, Mapping) else {},
            "error": {"code": error.code, "message": error.message, "details": error.details},
            "warnings": [],
            "performance": {"elapsed_ms": elapsed_ms},
        },
        is_error=True,
    )


def echo(value: Any) -> Any:
    """A JSON-safe copy of caller input (anything else becomes its repr, never an exception)."""
    if isinstance(value, Mapping):
        return {str(key): echo(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [echo(item) for item in value]
    if isinstance(value, float) and not math.isfinite(value):
        return repr(value)
    if value is None or isinstance(value, str | int | float | bool):
        return value
    return repr(value)


def elapsed_ms(started: float, now: float) -> int:
    """Whole milliseconds between two monotonic readings."""
    return max(0, round((now - started) * 1000))


def as_utc(value: datetime) -> datetime:
    """An aware UTC datetime; naive values are UTC already (the stores keep UTC)."""
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def timestamp(value: datetime) -> str:
    """RFC 3339 UTC with milliseconds: `2026-04-29T18:42:31.125Z`. Sub-millisecond digits are
    cut, never rounded up into the next second."""
    aware = as_utc(value)
    return aware.strftime("%Y-%m-%dT%H:%M:%S.") + f"{aware.microsecond // 1000:03d}Z"


def optional_timestamp(value: datetime | None) -> str | None:
    """`timestamp`, or None for an unknown time (never an epoch sentinel)."""
    return None if value is None else timestamp(value)


def request_timestamp(value: datetime) -> str:
    """A caller's datetime in the canonical request: UTC, milliseconds unless it has finer
    digits, which are kept rather than silently dropped."""
    aware = value.astimezone(UTC)
    if aware.microsecond % 1000 == 0:
        return timestamp(aware)
    return aware.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
