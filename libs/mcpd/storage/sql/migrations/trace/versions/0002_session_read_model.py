"""Trace store: the session read model (sessions, turns, events, file touches, search).

`event_search` carries a `tsvector` with a GIN index on PostgreSQL; on SQLite the column is TEXT
and the table stays empty (the embedded backend searches with tantivy).

Revision ID: 0002_session_read_model
Revises: 0001_initial
Create Date: 2026-11-30
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0002_session_read_model"
down_revision = "0001_initial"
branch_labels = None
depends_on = None

# Spelled out rather than imported, so this migration keeps creating what it created when it
# was written: a JSON document (JSONB on PostgreSQL; None is SQL NULL) and a search vector.
JSON_DOC = sa.JSON(none_as_null=True).with_variant(
    postgresql.JSONB(none_as_null=True), "postgresql"
)
SEARCH_VECTOR = sa.Text().with_variant(postgresql.TSVECTOR(), "postgresql")


def upgrade() -> None:
    op.create_table(
        "sessions",
        sa.Column("project", sa.Text(), nullable=False),
        sa.Column("id", sa.Text(), nullable=False),
        sa.Column("source", sa.Text(), nullable=False),
        sa.Column("harness", sa.Text(), nullable=False),
        sa.Column("session_key", sa.Text(), nullable=False),
        sa.Column("path", sa.Text(), nullable=False),
        sa.Column("title", sa.Text(), nullable=True),
        sa.Column("display_label", sa.Text(), nullable=False),
        sa.Column("started_at", sa.BigInteger(), nullable=False),
        sa.Column("updated_at", sa.BigInteger(), nullable=False),
        sa.Column("completed", sa.Boolean(), nullable=False),
        sa.Column("turn_count", sa.Integer(), nullable=False),
        sa.Column("event_count", sa.Integer(), nullable=False),
        sa.Column("mode", sa.Text(), nullable=True),
        sa.Column("slug", sa.Text(), nullable=True),
        sa.Column("summary", sa.Text(), nullable=True),
        sa.Column("cwd", sa.Text(), nullable=True),
        sa.Column("content_hash", sa.Text(), nullable=False),
        sa.Column("version", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("project", "id", name=op.f("pk_sessions")),
    )
    _indexes(
        "sessions",
        ["project", "updated_at", "id"],
        ["project", "source", "started_at", "id"],
        ["project", "source", "session_key"],
        ["project", "version"],
    )
    op.create_table(
        "turns",
        sa.Column("project", sa.Text(), nullable=False),
        sa.Column("id", sa.Text(), nullable=False),
        sa.Column("session_id", sa.Text(), nullable=False),
        sa.Column("ordinal", sa.Integer(), nullable=False),
        sa.Column("started_at", sa.BigInteger(), nullable=False),
        sa.Column("updated_at", sa.BigInteger(), nullable=False),
        sa.Column("completed", sa.Boolean(), nullable=False),
        sa.Column("event_count", sa.Integer(), nullable=False),
        sa.Column("terminal_event_id", sa.Text(), nullable=True),
        sa.Column("user_input_event_id", sa.Text(), nullable=True),
        sa.Column("final_response_event_id", sa.Text(), nullable=True),
        sa.Column("tools_called", JSON_DOC, nullable=False),
        sa.Column("event_types", JSON_DOC, nullable=False),
        sa.Column("row_hash", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("project", "id", name=op.f("pk_turns")),
    )
    _indexes("turns", ["project", "session_id", "ordinal"])
    op.create_table(
        "events",
        sa.Column("project", sa.Text(), nullable=False),
        sa.Column("id", sa.Text(), nullable=False),
        sa.Column("session_id", sa.Text(), nullable=False),
        sa.Column("turn_id", sa.Text(), nullable=False),
        sa.Column("ordinal", sa.Integer(), nullable=False),
        sa.Column("seq", sa.BigInteger(), nullable=False),
        sa.Column("type", sa.Text(), nullable=False),
        sa.Column("timestamp_ns", sa.BigInteger(), nullable=False),
        sa.Column("terminal", sa.Boolean(), nullable=False),
        sa.Column("text", sa.Text(), nullable=False),
        sa.Column("tool_name", sa.Text(), nullable=True),
        sa.Column("model", sa.Text(), nullable=True),
        sa.Column("originating_model", sa.Text(), nullable=True),
        sa.Column("call_id", sa.Text(), nullable=True),
        sa.Column("payload", JSON_DOC, nullable=True),
        sa.Column("line", sa.Integer(), nullable=False),
        sa.Column("harness", sa.Text(), nullable=False),
        sa.Column("source", sa.Text(), nullable=False),
        sa.Column("row_hash", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("project", "id", name=op.f("pk_events")),
    )
    _indexes("events", ["project", "turn_id", "ordinal"], ["project", "session_id", "seq"])
    op.create_table(
        "file_touches",
        sa.Column("project", sa.Text(), nullable=False),
        sa.Column("session_id", sa.Text(), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("event_id", sa.Text(), nullable=False),
        sa.Column("turn_id", sa.Text(), nullable=True),
        sa.Column("timestamp_ns", sa.BigInteger(), nullable=True),
        sa.Column("tool_name", sa.Text(), nullable=False),
        sa.Column("raw_path", sa.Text(), nullable=False),
        sa.Column("tail", sa.Text(), nullable=False),
        sa.Column("basename", sa.Text(), nullable=False),
        sa.Column("tail_is_absolute", sa.Boolean(), nullable=False),
        sa.Column("worktree_root", sa.Text(), nullable=True),
        sa.Column("git_common_dir", sa.Text(), nullable=True),
        sa.Column("mutation", sa.Boolean(), nullable=False),
        sa.Column("phase", sa.Text(), nullable=False),
        sa.Column("harness", sa.Text(), nullable=False),
        sa.Column("source", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("project", "session_id", "position", name=op.f("pk_file_touches")),
    )
    _indexes("file_touches", ["project", "basename", "timestamp_ns"])
    op.create_table(
        "event_search",
        sa.Column("project", sa.Text(), nullable=False),
        sa.Column("event_id", sa.Text(), nullable=False),
        sa.Column("session_id", sa.Text(), nullable=False),
        sa.Column("turn_id", sa.Text(), nullable=False),
        sa.Column("type", sa.Text(), nullable=False),
        sa.Column("harness", sa.Text(), nullable=False),
        sa.Column("source", sa.Text(), nullable=False),
        sa.Column("timestamp_ns", sa.BigInteger(), nullable=False),
        sa.Column("search_vector", SEARCH_VECTOR, nullable=False),
        sa.PrimaryKeyConstraint("project", "event_id", name=op.f("pk_event_search")),
    )
    _indexes("event_search", ["project", "session_id"])
    op.create_index(
        "ix_event_search_search_vector",
        "event_search",
        ["search_vector"],
        unique=False,
        postgresql_using="gin",
    )
    op.create_table(
        "session_versions",
        sa.Column("project", sa.Text(), nullable=False),
        sa.Column("version", sa.BigInteger(), nullable=False),
        sa.Column("generation", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("project", name=op.f("pk_session_versions")),
    )


def downgrade() -> None:
    for table in ("session_versions", "event_search", "file_touches", "events", "turns"):
        op.drop_table(table)
    op.drop_table("sessions")


def _indexes(table: str, *column_lists: list[str]) -> None:
    for columns in column_lists:
        op.create_index(f"ix_{table}_{'_'.join(columns)}", table, columns, unique=False)
