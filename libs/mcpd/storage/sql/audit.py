"""The audit log on SQL: AuditEvent to and from rows, pages, and the opaque paging cursor.

Pages are newest first, ordered by (timestamp DESC, audit_id DESC) and cut by keyset: a cursor
names the last event of the page before, and the next page starts strictly after it. A walk is
therefore stable while events are appended: an event stamped after the walk began sorts ahead
of every cursor and never shows up on a later page, and nothing is skipped or repeated. (An
event appended late with a timestamp older than the walk's position shows up where it sorts:
the order is by when requests were handled, not by when their events were written.)

The cursor is `urlsafe-base64(JSON [version, timestamp_ns, audit_id, check])` where `check` is a
truncated SHA-256 of the project and the position. It is not a secret and not signed: a
hand-made cursor can only move a walk inside a project the caller may read already (the query
always filters by project). The check catches a mangled cursor and a cursor from another
project's walk, which are refused as INVALID_CURSOR.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import RowMapping, Select, select, tuple_

from mcpd.codec import enum_names
from mcpd.model.v1 import account_pb2, enums_pb2
from mcpd.runtime.errors import Internal, InvalidArgument
from mcpd.storage.records import AuditPage
from mcpd.storage.sql import convert
from mcpd.storage.sql.schema.control import audit_log

MAX_PAGE = 1000
# A real cursor is about 100 characters; anything far longer is refused before decoding.
MAX_CURSOR_CHARS = 512
CURSOR_FIELD = "cursor"
INVALID_CURSOR = "INVALID_CURSOR"

_CURSOR_VERSION = 1
_INT64 = 1 << 63
_RESULTS = enum_names(enums_pb2.AuditResult.DESCRIPTOR)


@dataclass(frozen=True, slots=True)
class Position:
    """Where a page ended: the (timestamp, audit_id) of its last event."""

    timestamp: int
    audit_id: str


def clamp_limit(limit: int) -> int:
    """The page size actually served: `limit` brought into 1..MAX_PAGE."""
    return max(1, min(limit, MAX_PAGE))


def event_row(event: account_pb2.AuditEvent, index: int) -> dict[str, Any]:
    """The `audit_log` row of an event; InvalidArgument naming `events[i].<field>` if unfit."""
    # `project` may be empty: a refused request that named no project is still recorded.
    path = f"events[{index}]"
    if not event.audit_id:
        raise InvalidArgument(f"{path}.audit_id is required", field=f"{path}.audit_id")
    if not event.HasField("timestamp"):
        raise InvalidArgument(f"{path}.timestamp is required", field=f"{path}.timestamp")
    moment = convert.timestamp_nanos(event.timestamp)
    if not -_INT64 <= moment < _INT64:
        raise InvalidArgument(f"{path}.timestamp is out of range", field=f"{path}.timestamp")
    result = _RESULTS.by_number.get(event.result)
    if result is None:
        raise InvalidArgument(f"{path}.result is required", field=f"{path}.result")
    return {
        "audit_id": event.audit_id,
        "timestamp": moment,
        "principal": event.principal,
        "subject": event.subject,
        "action": event.action,
        "project": event.project,
        "resource": event.resource if event.HasField("resource") else None,
        "result": result,
        "source": event.source if event.HasField("source") else None,
        # Every row stands for at least one request; 0 is a writer that did not count.
        "count": max(event.count, 1),
        "reason": event.reason if event.HasField("reason") else None,
    }


def page_query(project: str, after: Position | None, limit: int) -> Select[Any]:
    """Up to `limit` of the project's events that sort after `after`, newest first."""
    statement = select(audit_log).where(audit_log.c.project == project)
    if after is not None:
        statement = statement.where(
            tuple_(audit_log.c.timestamp, audit_log.c.audit_id)
            < tuple_(after.timestamp, after.audit_id)
        )
    return statement.order_by(audit_log.c.timestamp.desc(), audit_log.c.audit_id.desc()).limit(
        limit
    )


def page(project: str, rows: Sequence[RowMapping], size: int) -> AuditPage:
    """A page of `size` events from `rows` (fetched with `size + 1`: one more means more)."""
    events = [_event(row) for row in rows[:size]]
    if len(rows) <= size:
        return AuditPage(events=events, next_cursor=None)
    last = rows[size - 1]
    return AuditPage(
        events=events,
        next_cursor=encode_cursor(project, Position(last["timestamp"], last["audit_id"])),
    )


def encode_cursor(project: str, position: Position) -> str:
    """The opaque cursor continuing `project`'s walk after `position`."""
    document = [
        _CURSOR_VERSION,
        position.timestamp,
        position.audit_id,
        _check(project, position),
    ]
    raw = json.dumps(document, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")


def decode_cursor(project: str, cursor: str) -> Position:
    """The position in `cursor`; InvalidArgument (INVALID_CURSOR) unless `encode_cursor` made
    it for this project."""
    try:
        if len(cursor) > MAX_CURSOR_CHARS:
            raise ValueError("too long")
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        document = json.loads(raw)
    except (ValueError, binascii.Error) as error:  # UnicodeDecodeError is a ValueError
        raise _invalid_cursor() from error
    match document:
        case [int(version), int(moment), str(audit_id), str(check)] if (
            version == _CURSOR_VERSION
            and type(version) is type(moment) is int  # JSON true is an int to Python
            and -_INT64 <= moment < _INT64
            and audit_id
        ):
            position = Position(moment, audit_id)
            if check == _check(project, position):
                return position
    raise _invalid_cursor()


def _check(project: str, position: Position) -> str:
    text = json.dumps([project, position.timestamp, position.audit_id], separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _invalid_cursor() -> InvalidArgument:
    return InvalidArgument(
        "cursor is not one this listing returned", field=CURSOR_FIELD, reason=INVALID_CURSOR
    )


def _event(row: RowMapping) -> account_pb2.AuditEvent:
    result = _RESULTS.by_name.get(row["result"])
    if result is None:
        # Only append_audit writes this table, and it writes known names only.
        raise Internal("the audit log holds an event with an unknown result")
    event = account_pb2.AuditEvent(
        audit_id=row["audit_id"],
        timestamp=convert.timestamp(row["timestamp"]),
        principal=row["principal"],
        subject=row["subject"],
        action=row["action"],
        project=row["project"],
        result=enums_pb2.AuditResult.ValueType(result),
        count=row["count"],
    )
    for optional in ("resource", "source", "reason"):
        if row[optional] is not None:
            setattr(event, optional, row[optional])
    return event
