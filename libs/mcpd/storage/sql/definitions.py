"""Definitions in the run store: the versioning rule, atomically on SQLite and PostgreSQL.

A body is identified by the SHA-256 of its kind and canonical JSON (keys sorted, no spaces), kept
beside it (`body_digest`). Placing a body reads the definition's versions, decides, and inserts
with ON CONFLICT DO NOTHING on the primary key: when another writer took the version first
(PostgreSQL runs writers side by side; SQLite's BEGIN IMMEDIATE never lets one in), the insert
writes nothing and the decision is made again from what is stored now, so two simultaneous
posts of one new body land on one version and two different bodies on two.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

from sqlalchemy import Connection, func, select
from sqlalchemy.engine import RowMapping

from mcpd.runtime.errors import Conflict
from mcpd.storage.run_records import NewDefinition, PlacedDefinition, StoredDefinition
from mcpd.storage.sql.dialect import SqlDialect, insert_ignore
from mcpd.storage.sql.schema.run import definitions

__all__ = ["body_digest", "definition", "list_definitions", "put_definition"]

# How often a placement is decided again after losing the race for a version.
_ATTEMPTS = 8


def body_digest(kind: str, body: Mapping[str, Any]) -> str:
    """The identity of a definition body: lowercase hex SHA-256 of its kind and canonical JSON."""
    text = json.dumps([kind, body], sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def put_definition(
    conn: Connection,
    dialect: SqlDialect,
    project: str,
    document: NewDefinition,
    index: int,
    *,
    now: int,
) -> PlacedDefinition:
    """Place one document under the versioning rule (`DefinitionWrites.put_definitions`);
    `index` is its place in the request, named by a Conflict."""
    definition_id, kind, body, version = document.id, document.kind, document.body, document.version
    digest = body_digest(kind, body)
    for _ in range(_ATTEMPTS):
        held = _versions(conn, project, definition_id)
        same = [number for number, stored in held.items() if stored == digest]
        if version is None:
            if same:
                return PlacedDefinition(definition_id, max(same), assigned=False)
            chosen, assigned = max(held, default=0) + 1, True
        elif version in held:
            if held[version] == digest:
                return PlacedDefinition(definition_id, version, assigned=False)
            raise Conflict(
                f"definition {definition_id!r} version {version} holds a different body; "
                "a stored version never changes: post it as a new version",
                field="version",
                reason="DEFINITION_VERSION_HELD",
                metadata={"index": str(index)},
            )
        else:
            chosen, assigned = version, False
        row = {
            "project": project,
            "id": definition_id,
            "version": chosen,
            "kind": kind,
            "body": dict(body),
            "created_at": now,
            "body_digest": digest,
        }
        if _insert_new(conn, dialect, row):
            return PlacedDefinition(definition_id, chosen, assigned=assigned)
    raise Conflict(
        f"definition {definition_id!r} is being written by others; try again",
        reason="DEFINITION_CONTENDED",
    )


def _versions(conn: Connection, project: str, definition_id: str) -> dict[int, str]:
    """Each stored version of the definition and its body's digest (computed for a version
    stored without one)."""
    c = definitions.c
    statement = select(c.version, c.kind, c.body, c.body_digest).where(
        c.project == project, c.id == definition_id
    )
    return {
        int(row.version): row.body_digest or body_digest(row.kind, row.body)
        for row in conn.execute(statement)
    }


def _insert_new(conn: Connection, dialect: SqlDialect, row: dict[str, Any]) -> bool:
    """Insert the row unless its version is taken; whether it was inserted (RETURNING rather
    than rowcount, which psycopg leaves at -1 for this statement)."""
    statement = insert_ignore(definitions, dialect).values(row).returning(definitions.c.version)
    return conn.execute(statement).first() is not None


def definition(
    conn: Connection, project: str, definition_id: str, version: int | None
) -> StoredDefinition | None:
    """One version of a definition (the highest without `version`), or None."""
    c = definitions.c
    statement = select(definitions).where(c.project == project, c.id == definition_id)
    if version is not None:
        statement = statement.where(c.version == version)
    row = conn.execute(statement.order_by(c.version.desc()).limit(1)).mappings().first()
    return None if row is None else _stored(row)


def list_definitions(
    conn: Connection, project: str, *, after: str | None, limit: int
) -> list[StoredDefinition]:
    """The highest version of each of the project's definitions, in id order after `after`."""
    c = definitions.c
    latest = (
        select(c.id, func.max(c.version).label("version"))
        .where(c.project == project)
        .group_by(c.id)
    )
    if after is not None:
        latest = latest.where(c.id > after)
    top = latest.order_by(c.id).limit(limit).subquery()
    statement = (
        select(definitions)
        .join(top, (c.id == top.c.id) & (c.version == top.c.version))
        .where(c.project == project)
        .order_by(c.id)
    )
    return [_stored(row) for row in conn.execute(statement).mappings()]


def _stored(row: RowMapping) -> StoredDefinition:
    return StoredDefinition(
        project=row["project"],
        id=row["id"],
        version=int(row["version"]),
        kind=row["kind"],
        body=row["body"],
        created_at=int(row["created_at"]),
    )
