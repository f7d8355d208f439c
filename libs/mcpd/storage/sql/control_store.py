"""The control store on SQLite and PostgreSQL: projects, accounts, sessions, keys, audit log,
price overrides, the monitors' conditions and the aspects.

Credentials arrive here as digests and hashes only, and no method logs, or puts in an error
message, a digest, a hash or an email. Each write is one transaction; conflicts are detected
with `INSERT ... ON CONFLICT DO NOTHING` and a row count, so no statement fails half-way and a
refused write leaves nothing behind.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, fields
from datetime import datetime
from typing import Any, TypeVar

from google.protobuf import json_format
from sqlalchemy import (
    ColumnElement,
    Connection,
    RowMapping,
    Select,
    Table,
    and_,
    bindparam,
    delete,
    exists,
    func,
    or_,
    select,
    update,
)
from sqlalchemy.engine import Engine
from sqlalchemy.sql.dml import Insert

from mcpd.model.v1 import account_pb2
from mcpd.runtime.clock import Clock, SystemClock, epoch_nanos
from mcpd.runtime.errors import AlreadyExists, InvalidArgument, NotFound, quoted
from mcpd.storage.aspect_records import AspectRecord
from mcpd.storage.records import (
    AuditPage,
    StoredAccount,
    StoredKey,
    StoredSession,
    WatchState,
)
from mcpd.storage.sql import audit, convert
from mcpd.storage.sql.base import SqlStore
from mcpd.storage.sql.dialect import insert_ignore, upsert
from mcpd.storage.sql.engine import read_connection
from mcpd.storage.sql.schema import StoreName
from mcpd.storage.sql.schema.control import (
    account_sessions,
    accounts,
    api_keys,
    aspects,
    audit_log,
    price_book,
    projects,
    watch_states,
)

# The price book rows of one project's overrides are filed under this book id.
PROJECT_BOOK_PREFIX = "project:"


class SqlControlStore(SqlStore):
    """The control store on SQLite or PostgreSQL."""

    _store = StoreName.CONTROL

    def __init__(self, engine: Engine, *, clock: Clock | None = None) -> None:
        super().__init__(engine)
        self._clock = clock or SystemClock()

    # Projects

    def ensure_project(self, project_id: str, name: str) -> None:
        """Create the project unless it exists; an existing one keeps its name and settings."""
        with self._engine.begin() as conn:
            self._ensure_project(conn, project_id, name, self._clock.now())

    def get_project(self, project_id: str) -> account_pb2.Project | None:
        """The project with this id, or None."""
        with read_connection(self._engine) as conn:
            row = self._one(conn, projects, projects.c.project_id == project_id)
        return None if row is None else _project(row)

    def list_projects(self) -> list[account_pb2.Project]:
        """Every project, ordered by id (the retention sweeper walks them all)."""
        with read_connection(self._engine) as conn:
            rows = conn.execute(select(projects).order_by(projects.c.project_id)).mappings().all()
        return [_project(row) for row in rows]

    def configure_project(self, project: account_pb2.Project) -> None:
        """Create or update a project from configuration: name, retention, sampling, redaction,
        budget and metadata are set as given (absent JSON fields cleared); created_at is kept."""
        values: dict[str, Any] = {
            "name": project.name or project.project_id,
            "retention_days": (
                project.retention_days if project.HasField("retention_days") else None
            ),
        }
        for field in ("sampling", "redaction", "budget", "metadata"):
            values[field] = (
                json_format.MessageToDict(getattr(project, field))
                if project.HasField(field)
                else None
            )
        with self._engine.begin() as conn:
            self._ensure_project(conn, project.project_id, values["name"], self._clock.now())
            conn.execute(
                update(projects).where(projects.c.project_id == project.project_id).values(values)
            )

    def set_price_overrides(
        self, project_id: str, prices: Mapping[str, Mapping[str, float]], currency: str = "USD"
    ) -> int:
        """Record a project's price overrides (model -> meter -> price per million tokens).

        Price rows are never updated: a meter whose latest price differs gets a new row
        effective now, so a cost computed earlier can still be explained. Returns how many rows
        were added.
        """
        current = self.price_overrides(project_id)
        now = convert.nanos(self._clock.now())
        book = PROJECT_BOOK_PREFIX + project_id
        rows = [
            {
                "book_id": book,
                "provider": "",
                "model": model,
                "meter": meter,
                "currency": currency,
                "price_per_million": float(price),
                "effective_from": now,
            }
            for model, meters in prices.items()
            for meter, price in meters.items()
            if current.get(model, {}).get(meter) != float(price)
        ]
        if rows:
            with self._engine.begin() as conn:
                conn.execute(insert_ignore(price_book, self._dialect), rows)
        return len(rows)

    def price_overrides(self, project_id: str) -> dict[str, dict[str, float]]:
        """The project's current override per model and meter (the latest row of each)."""
        now = convert.nanos(self._clock.now())
        query = (
            select(price_book.c.model, price_book.c.meter, price_book.c.price_per_million)
            .where(
                price_book.c.book_id == PROJECT_BOOK_PREFIX + project_id,
                price_book.c.effective_from <= now,
            )
            .order_by(price_book.c.effective_from)
        )
        overrides: dict[str, dict[str, float]] = {}
        with read_connection(self._engine) as conn:
            for model, meter, price in conn.execute(query):
                # Oldest first, so the latest price of each meter is the one left.
                overrides.setdefault(model, {})[meter] = price
        return overrides

    # Accounts and sessions

    def create_account(self, account: StoredAccount, project_name: str) -> None:
        """Create the account and (unless it exists) its project, both or neither."""
        with self._engine.begin() as conn:
            self._ensure_project(conn, account.project, project_name, account.created_at)
            inserted = _inserted(conn, insert_ignore(accounts, self._dialect).values(_row(account)))
            if not inserted:
                # Raising inside the transaction rolls the project row back as well.
                raise AlreadyExists(
                    "an account with this email exists already", field="email", reason="EMAIL_TAKEN"
                )

    def find_account(self, email: str) -> StoredAccount | None:
        """The account with exactly this (normalised) email, or None."""
        with read_connection(self._engine) as conn:
            row = self._one(conn, accounts, accounts.c.email == email)
        return None if row is None else _record(StoredAccount, row)

    def create_session(self, session: StoredSession) -> None:
        """Store a session of an existing account, for that account's project."""
        with self._engine.begin() as conn:
            self._require_account(conn, session.email, session.project, field="email")
            inserted = _inserted(
                conn, insert_ignore(account_sessions, self._dialect).values(_row(session))
            )
            if not inserted:
                raise AlreadyExists(
                    "a session with this token exists already",
                    field="token_digest",
                    reason="SESSION_EXISTS",
                )

    def find_session(self, token_digest: str) -> StoredSession | None:
        """The session with this token digest, expired or not (the caller checks), or None."""
        with read_connection(self._engine) as conn:
            row = self._one(conn, account_sessions, account_sessions.c.token_digest == token_digest)
        return None if row is None else _record(StoredSession, row)

    def delete_expired_sessions(self, now: datetime) -> int:
        """Delete the sessions whose `expires_at` is before `now`; return how many."""
        statement = delete(account_sessions).where(
            account_sessions.c.expires_at < convert.nanos(now)
        )
        with self._engine.begin() as conn:
            return conn.execute(statement).rowcount

    # API keys

    def create_key(self, key: StoredKey) -> None:
        """Store a key of an existing account (for its project) or, without one, of a project.

        NotFound when the account or project does not exist; InvalidArgument (PROJECT_MISMATCH)
        for a key on a project other than its account's; AlreadyExists when the digest
        (DIGEST_TAKEN) or the id (KEY_ID_TAKEN) is taken.
        """
        with self._engine.begin() as conn:
            if key.account_email is None:
                self._require_project(conn, key.project)
            else:
                self._require_account(conn, key.account_email, key.project, field="account_email")
            inserted = _inserted(conn, insert_ignore(api_keys, self._dialect).values(_row(key)))
            if not inserted:
                digest_taken = conn.execute(
                    select(exists().where(api_keys.c.digest == key.digest))
                ).scalar_one()
                if digest_taken:
                    raise AlreadyExists(
                        "an API key with this digest exists already",
                        field="digest",
                        reason="DIGEST_TAKEN",
                    )
                raise AlreadyExists(
                    "an API key with this id exists already", field="id", reason="KEY_ID_TAKEN"
                )

    def find_key(self, digest: str) -> StoredKey | None:
        """The key with this digest, revoked or not (`revoked_at` says), or None."""
        with read_connection(self._engine) as conn:
            row = self._one(conn, api_keys, api_keys.c.digest == digest)
        return None if row is None else _record(StoredKey, row)

    def list_keys(self, account_email: str) -> list[StoredKey]:
        """The account's unrevoked keys, newest first (ties by id, descending)."""
        statement = (
            select(api_keys)
            .where(api_keys.c.account_email == account_email, api_keys.c.revoked_at.is_(None))
            .order_by(api_keys.c.created_at.desc(), api_keys.c.id.desc())
        )
        with read_connection(self._engine) as conn:
            return [_record(StoredKey, row) for row in conn.execute(statement).mappings()]

    def revoke_key(self, account_email: str, key_id: str, now: datetime) -> StoredKey:
        """Revoke the account's unrevoked key `key_id` and return it as revoked.

        NotFound (field `id`, KEY_NOT_FOUND) for an unknown key, another account's key, and a
        key revoked already: revoking is not idempotent, as a revoked key is gone from
        `list_keys` too.
        """
        statement = (
            update(api_keys)
            .where(
                api_keys.c.id == key_id,
                api_keys.c.account_email == account_email,
                api_keys.c.revoked_at.is_(None),
            )
            .values(revoked_at=convert.nanos(now))
            .returning(*api_keys.c)
        )
        with self._engine.begin() as conn:
            row = conn.execute(statement).mappings().first()
        if row is None:
            raise NotFound(
                f"this account has no API key {quoted(key_id)}", field="id", reason="KEY_NOT_FOUND"
            )
        return _record(StoredKey, row)

    # The latched conditions of monitors and objectives

    def watch_states(self, kind: str, watch_ids: Sequence[str]) -> dict[str, WatchState]:
        """The stored state of each of `watch_ids` that has one, by id."""
        if not watch_ids:
            return {}
        w = watch_states.c
        statement = select(w.watch_id, w.condition, w.tripped_at, w.last).where(
            w.kind == kind, w.watch_id.in_(list(watch_ids))
        )
        with read_connection(self._engine) as conn:
            rows = conn.execute(statement).all()
        return {row.watch_id: WatchState(row.condition, row.tripped_at, row.last) for row in rows}

    def save_watch_state(self, kind: str, watch_id: str, state: WatchState) -> None:
        """Store `state` for the watch, replacing what was there."""
        row = {
            "kind": kind,
            "watch_id": watch_id,
            "condition": state.condition,
            "tripped_at": state.tripped_at,
            "last": state.last,
            "updated_at": epoch_nanos(self._clock.now()),
        }
        with self._engine.begin() as conn:
            conn.execute(upsert(watch_states, self._dialect, _WATCH_COLUMNS), [row])

    # Aspects: a row per version, never changed (an edit is the next version)

    def aspects(self, project: str) -> list[AspectRecord]:
        """The newest version of each of the project's aspects, by sort_order then name."""
        with read_connection(self._engine) as conn:
            rows = conn.execute(_NEWEST_ASPECTS, {"project": project}).mappings().all()
        return [AspectRecord(**row) for row in rows]

    def store_aspect_versions(self, records: Sequence[AspectRecord]) -> None:
        """Store the versions, in one transaction, skipping each whose (project, name, version)
        is stored already."""
        if not records:
            return
        with self._engine.begin() as conn:
            conn.execute(insert_ignore(aspects, self._dialect), [asdict(r) for r in records])

    def has_credentials(self) -> bool:
        """Whether an account or an unrevoked key exists: two EXISTS probes, one round trip."""
        with read_connection(self._engine) as conn:
            return bool(conn.execute(_HAS_CREDENTIALS).scalar_one())

    # The audit log

    def append_audit(self, events: Sequence[account_pb2.AuditEvent]) -> None:
        """Insert the events in one transaction, batched.

        Every event is checked before anything is written (InvalidArgument names the event).
        An event whose `audit_id` is stored already is skipped, so a writer may retry a batch
        whose commit it could not confirm.
        """
        rows = [audit.event_row(event, index) for index, event in enumerate(events)]
        if not rows:
            return
        with self._engine.begin() as conn:
            conn.execute(insert_ignore(audit_log, self._dialect), rows)

    def list_audit(self, project: str, *, cursor: str | None, limit: int) -> AuditPage:
        """The project's events newest first, `limit` (clamped to 1..1000) per page.

        `cursor` is a previous page's `next_cursor`; None or "" starts at the newest event.
        """
        after = audit.decode_cursor(project, cursor) if cursor else None
        size = audit.clamp_limit(limit)
        with read_connection(self._engine) as conn:
            rows = conn.execute(audit.page_query(project, after, size + 1)).mappings().all()
        return audit.page(project, rows, size)

    # Helpers

    def _ensure_project(
        self, conn: Connection, project_id: str, name: str, created_at: datetime
    ) -> None:
        conn.execute(
            insert_ignore(projects, self._dialect).values(
                project_id=project_id, name=name, created_at=convert.nanos(created_at)
            )
        )

    @staticmethod
    def _one(conn: Connection, table: Table, condition: ColumnElement[bool]) -> RowMapping | None:
        return conn.execute(select(table).where(condition)).mappings().first()

    @staticmethod
    def _require_project(conn: Connection, project_id: str) -> None:
        # FOR SHARE on PostgreSQL keeps the row until the insert that refers to it commits;
        # SQLite has no row locks and needs none (the write transaction holds the database).
        found = conn.execute(
            select(projects.c.project_id)
            .where(projects.c.project_id == project_id)
            .with_for_update(read=True)
        ).first()
        if found is None:
            raise NotFound(
                f"there is no project {quoted(project_id)}",
                field="project",
                reason="PROJECT_NOT_FOUND",
            )

    @staticmethod
    def _require_account(conn: Connection, email: str, project: str, *, field: str) -> None:
        owner = conn.execute(
            select(accounts.c.project).where(accounts.c.email == email).with_for_update(read=True)
        ).scalar_one_or_none()
        if owner is None:
            raise NotFound("there is no such account", field=field, reason="ACCOUNT_NOT_FOUND")
        if owner != project:
            raise InvalidArgument(
                "the project is not the account's project",
                field="project",
                reason="PROJECT_MISMATCH",
            )


def _project(row: RowMapping) -> account_pb2.Project:
    project = account_pb2.Project(
        project_id=row["project_id"],
        name=row["name"],
        created_at=convert.timestamp(row["created_at"]),
        retention_days=row["retention_days"],
    )
    for field in ("sampling", "redaction", "budget", "metadata"):
        if row[field] is not None:
            getattr(project, field).CopyFrom(convert.json_value(row[field]))
    return project


def _inserted(conn: Connection, statement: Insert) -> bool:
    """Whether an `INSERT ... ON CONFLICT DO NOTHING` of one row wrote it."""
    # SQLAlchemy keeps an INSERT's row count only when asked to (psycopg would report -1).
    return conn.execute(statement.execution_options(preserve_rowcount=True)).rowcount > 0


# The records' fields are their tables' columns, by name; datetimes are stored as nanoseconds.
_TIMES = frozenset({"created_at", "expires_at", "revoked_at"})
# Asked on every request while the daemon is in local mode: built once.
_HAS_CREDENTIALS = select(
    or_(exists().select_from(accounts), exists().where(api_keys.c.revoked_at.is_(None)))
)
_Record = TypeVar("_Record", StoredAccount, StoredSession, StoredKey)


def _row(record: StoredAccount | StoredSession | StoredKey) -> dict[str, Any]:
    row = {field.name: getattr(record, field.name) for field in fields(record)}
    for name in _TIMES & row.keys():
        row[name] = None if row[name] is None else convert.nanos(row[name])
    return row


def _record(record_type: type[_Record], row: RowMapping) -> _Record:
    values = {field.name: row[field.name] for field in fields(record_type)}
    for name in _TIMES & values.keys():
        values[name] = None if values[name] is None else convert.datetime_of(values[name])
    return record_type(**values)


_WATCH_COLUMNS = ("condition", "tripped_at", "last", "updated_at")


def _newest_aspects() -> Select[Any]:
    """The newest version of each of one project's aspects (`:project`), in catalogue order;
    the primary key finds each name's highest version."""
    a = aspects.c
    newest = (
        select(a.name, func.max(a.version).label("version"))
        .where(a.project == bindparam("project"))
        .group_by(a.name)
        .subquery()
    )
    return (
        select(aspects)
        .join(newest, and_(a.name == newest.c.name, a.version == newest.c.version))
        .where(a.project == bindparam("project"))
        .order_by(a.sort_order, a.name)
    )


# Read on every cache miss of every replica's catalogue: built once.
_NEWEST_ASPECTS = _newest_aspects()
