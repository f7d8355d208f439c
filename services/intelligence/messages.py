"""The spec messages of the intelligence service's rows (`mcpd.storage.theme_records`)."""

from __future__ import annotations

from typing import cast

from mcpd.codec import enum_names
from mcpd.model.v1 import enums_pb2, intelligence_pb2
from mcpd.runtime.errors import InvalidArgument
from mcpd.signals.messages import timestamp_of
from mcpd.storage.theme_records import Entity, SnapshotRow, ThemeRow

__all__ = [
    "entity_of",
    "kind_name",
    "kind_value",
    "snapshot_message",
    "state_value",
    "theme_message",
]

_KINDS = enum_names(enums_pb2.EntityKind.DESCRIPTOR)
_STATES = enum_names(enums_pb2.ThemeState.DESCRIPTOR)


def state_value(state: str) -> enums_pb2.ThemeState.ValueType:
    """The ThemeState of a stored state (`birth`, `continue`, ...)."""
    return cast(enums_pb2.ThemeState.ValueType, _STATES.by_name[state])


def kind_name(kind: enums_pb2.EntityKind.ValueType) -> str:
    """The stored name of an entity kind (`agent`, `workflow`, ...)."""
    return _KINDS.by_number[kind]


def kind_value(name: str) -> enums_pb2.EntityKind.ValueType:
    """The EntityKind of a stored name."""
    return cast(enums_pb2.EntityKind.ValueType, _KINDS.by_name[name])


def entity_of(kind: enums_pb2.EntityKind.ValueType, name: str) -> Entity:
    """The entity a request names; InvalidArgument when it names none."""
    if kind == enums_pb2.ENTITY_KIND_UNSPECIFIED:
        raise InvalidArgument("entity_kind is required", field="entity_kind")
    if not name:
        raise InvalidArgument("entity_name is required", field="entity_name")
    return Entity(kind_name(kind), name)


def snapshot_message(project: str, row: SnapshotRow) -> intelligence_pb2.ThemeSnapshot:
    return intelligence_pb2.ThemeSnapshot(
        snapshot_id=row.snapshot_id,
        project=project,
        entity_kind=kind_value(row.entity.kind),
        entity_name=row.entity.name,
        aspects=row.aspects,
        ordinal=row.ordinal,
        cutoff_at=timestamp_of(row.cutoff_at),
        window_from=timestamp_of(row.window_from),
        window_to=timestamp_of(row.window_to),
        trace_count=row.trace_count,
        note_count=row.note_count,
        capped=row.capped,
    )


def theme_message(row: ThemeRow) -> intelligence_pb2.Theme:
    return intelligence_pb2.Theme(
        theme_id=row.theme_id,
        snapshot_id=row.snapshot_id,
        aspect=row.aspect,
        entity_kind=kind_value(row.entity.kind),
        entity_name=row.entity.name,
        label=row.label,
        label_note_id=row.label_note_id,
        label_trace_id=row.label_trace_id,
        state=state_value(row.state),
        note_count=row.note_count,
        trace_count=row.trace_count,
        coverage=row.coverage,
    )
