"""Correlation (and the project selector) from OTLP resource and record attributes.

Per field, the first of these that is set wins:

1. an explicit `mcpd.*` attribute on the record (span, log record);
2. an explicit `mcpd.*` attribute on the resource;
3. the OpenTelemetry convention on the resource (`service.name`, `session.id`, ...);
4. the OpenTelemetry convention on the record.

A record attribute that supplied a value is removed from the record's attributes (its value now
lives in a column); resource attributes are never stored.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from opentelemetry.proto.resource.v1.resource_pb2 import Resource

from services.ingest.otlp._values import as_strings, attributes

PROJECT_KEY = "mcpd.project"
UNKNOWN_SERVICE = "unknown_service"
TAGS_KEY = "mcpd.tags"

# Correlation column -> (explicit mcpd key, OpenTelemetry convention keys in precedence order).
FIELDS: tuple[tuple[str, str | None, tuple[str, ...]], ...] = (
    ("environment", "mcpd.environment", ("deployment.environment.name", "deployment.environment")),
    ("service_name", None, ("service.name",)),
    ("service_version", None, ("service.version",)),
    ("session_id", "mcpd.session_id", ("session.id", "gen_ai.conversation.id")),
    ("thread_id", "mcpd.thread_id", ()),
    ("user_id", "mcpd.user_id", ("user.id", "enduser.id")),
    ("resource_id", "mcpd.resource_id", ()),
    ("run_id", "mcpd.run_id", ()),
    ("request_id", "mcpd.request_id", ()),
    ("experiment_id", "mcpd.experiment_id", ()),
    ("release", "mcpd.release", ()),
)

RECORD_KEYS = frozenset(
    key
    for _, explicit, conventions in FIELDS
    for key in ((explicit,) if explicit else ()) + conventions
)


def _text(value: Any) -> str | None:
    """An identifier as text: non-empty strings, and integers (a numeric user id, say)."""
    if isinstance(value, str):
        return value or None
    if type(value) is int:
        return str(value)
    return None


@dataclass(frozen=True, slots=True)
class ResourceContext:
    """What one OTLP resource contributes to every record under it.

    `columns` holds every correlation column except `project` (None where unset), ready to be
    unpacked into a row.
    """

    project: str
    columns: dict[str, str | None]
    tags: list[str] | None


def resource_context(resource: Resource) -> ResourceContext:
    """The correlation a resource carries (computed once per resource, not per record)."""
    attrs = attributes(resource.attributes)
    columns: dict[str, str | None] = {}
    for column, explicit_key, conventions in FIELDS:
        value = _text(attrs.get(explicit_key)) if explicit_key else None
        if value is None:
            for key in conventions:
                value = _text(attrs.get(key))
                if value is not None:
                    break
        columns[column] = value
    service = columns["service_name"]
    if service is not None and service.startswith(UNKNOWN_SERVICE):
        # The SDKs' placeholder for "the producer never named its service" (the spec default
        # is `unknown_service:<process name>`): not a name to group or filter by.
        columns["service_name"] = None
    project = attrs.get(PROJECT_KEY)
    return ResourceContext(
        project=project if isinstance(project, str) else "",
        columns=columns,
        tags=as_strings(attrs.get(TAGS_KEY)),
    )


def record_columns(attrs: dict[str, Any], context: ResourceContext) -> dict[str, str | None]:
    """The correlation columns of one record: the resource's, refined by the record's attributes.

    Consumes (pops) the record attributes it used. Returns the resource's own dict, unchanged,
    when the record carries no correlation attribute (the common case), so callers must copy it
    into the row rather than mutate it.
    """
    if attrs.keys().isdisjoint(RECORD_KEYS):
        return context.columns
    columns = dict(context.columns)
    for column, explicit_key, conventions in FIELDS:
        if explicit_key is not None and explicit_key in attrs:
            value = _text(attrs[explicit_key])
            if value is not None:
                del attrs[explicit_key]
                columns[column] = value
                continue
        if columns[column] is not None:
            continue  # the resource said, and a record's convention does not override it
        for key in conventions:
            if key in attrs:
                value = _text(attrs[key])
                if value is not None:
                    del attrs[key]
                    columns[column] = value
                    break
    return columns
