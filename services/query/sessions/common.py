"""What the four tools share: configuration, the event-type and filter arguments, warnings."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from mcpd.runtime.errors import quoted
from mcpd.sessions.model import EVENT_TYPE_ORDER, HARNESSES, EventType
from services.query.sessions.args import optional_text
from services.query.sessions.cursors import CursorCodec
from services.query.sessions.errors import UNSUPPORTED_EVENT_TYPE, ToolError, invalid

# Every type a search may ask for: the vocabulary without `unknown` (spec: Event Types).
SEARCHABLE_TYPES: tuple[str, ...] = tuple(
    t.value for t in EVENT_TYPE_ORDER if t is not EventType.UNKNOWN
)
# ARCHITECTURE 8: the request rules and every example agree on this default.
DEFAULT_EVENT_TYPES: tuple[str, ...] = (
    EventType.USER_INPUT.value,
    EventType.ASSISTANT_RESPONSE.value,
)


@dataclass(frozen=True, slots=True)
class ToolConfig:
    """Server configuration the tools read."""

    max_results: int
    sources: tuple[str, ...]
    cursors: CursorCodec


def event_types(arguments: Mapping[str, Any], name: str = "event_types") -> list[str]:
    """The canonical event-type filter: defaulted, de-duplicated, in the vocabulary's order."""
    raw = arguments.get(name)
    if raw is None:
        return list(DEFAULT_EVENT_TYPES)
    if not isinstance(raw, list) or not all(isinstance(item, str) for item in raw):
        raise invalid(name, f"{name} must be an array of event type names")
    if not raw:
        raise invalid(name, f"{name} must contain at least one event type")
    for item in raw:
        if item not in SEARCHABLE_TYPES:
            raise ToolError(
                UNSUPPORTED_EVENT_TYPE,
                f"unsupported event type: {item}",
                field=name,
                supported=list(SEARCHABLE_TYPES),
            )
    wanted = set(raw)
    return [t for t in SEARCHABLE_TYPES if t in wanted]


def harness_and_source(arguments: Mapping[str, Any]) -> tuple[str | None, str | None]:
    """The exact, case-sensitive harness and source filters (blank is invalid_request)."""
    return optional_text(arguments, "harness"), optional_text(arguments, "source")


def filter_warnings(
    harness: str | None, source: str | None, sources: Sequence[str]
) -> list[dict[str, Any]]:
    """Warnings for filter values that match no known harness or configured source, so an
    empty answer is not mistaken for "no history". Only a warning for sources: sessions from
    ingested traces carry their service name as source, which the configuration does not list."""
    warnings: list[dict[str, Any]] = []
    if harness is not None and harness not in HARNESSES:
        warnings.append(
            {
                "code": "unknown_harness",
                "message": f"harness {quoted(harness)} is not a known harness; filters are exact",
                "known": list(HARNESSES),
            }
        )
    if source is not None and sources and source not in sources:
        warnings.append(
            {
                "code": "unconfigured_source",
                "message": f"source {quoted(source)} is not a configured transcript source; "
                "filters are exact (trace sessions use their service name)",
                "configured": list(sources),
            }
        )
    return warnings
