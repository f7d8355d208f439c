"""Rows of the control store that never leave mcpd as spec entities.

Credentials are internal: the store holds digests and hashes only, and these records are what
authentication reads. Spec entities (Project, AuditEvent, Account...) are built from them where a
caller sees them. Hashes and digests are left out of the records' `repr`, so a record that lands
in a log line or a traceback does not carry them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from mcpd.model.v1 import account_pb2


@dataclass(frozen=True, slots=True)
class StoredAccount:
    """An account. `email` is normalised (trimmed, case-folded); `password_hash` is argon2id."""

    email: str
    project: str
    password_hash: str = field(repr=False)
    created_at: datetime


@dataclass(frozen=True, slots=True)
class StoredSession:
    """An account session, found by the SHA-256 digest of its token."""

    token_digest: str = field(repr=False)
    email: str
    project: str
    created_at: datetime
    expires_at: datetime


@dataclass(frozen=True, slots=True)
class StoredKey:
    """An API key an account created. `scope` is the spec's lowercase KeyScope name."""

    id: str
    project: str
    account_email: str | None
    scope: str
    name: str | None
    prefix: str
    digest: str = field(repr=False)
    created_at: datetime
    revoked_at: datetime | None = None


@dataclass(frozen=True, slots=True)
class AuditPage:
    """One page of the audit log, newest first; `next_cursor` is None on the last page."""

    events: list[account_pb2.AuditEvent]
    next_cursor: str | None


@dataclass(frozen=True, slots=True)
class WatchState:
    """The latched condition of a monitor or an objective: `condition` as the spec names it
    (nominal, tripped, acknowledged, insufficient), since when it is tripped (ns) and its last
    reading in the spec's JSON (MonitorReading or SloReading)."""

    condition: str
    tripped_at: int | None = None
    last: dict[str, Any] | None = None
