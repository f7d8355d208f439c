"""Trace store: `trace_turns`, the per-trace state of the sessions built from traces, and
`search_log`, the read model's changes the SQLite search index follows.

Sessions written from traces before this revision have no trace states; the first write of
spans that touches such a session rebuilds it whole from the trace store
(`services.ingest.trace_sessions`), so nothing is rewritten here. An index that lags behind
a version with no log row catches up session by session, as before.

Revision ID: 0006_trace_sessions
Revises: 0005_span_head_json
Create Date: 2026-12-03
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0006_trace_sessions"
down_revision = "0005_span_head_json"
branch_labels = None
depends_on = None

# Spelled out rather than imported, so this migration keeps creating what it created when it
# was written: a JSON document (JSONB on PostgreSQL; None is SQL NULL).
JSON_DOC = sa.JSON(none_as_null=True).with_variant(
    postgresql.JSONB(none_as_null=True), "postgresql"
)


def upgrade() -> None:
    op.create_table(
        "trace_turns",
        sa.Column("project", sa.Text(), nullable=False),
        sa.Column("trace_id", sa.Text(), nullable=False),
        sa.Column("session_id", sa.Text(), nullable=False),
        sa.Column("session_key", sa.Text(), nullable=False),
        sa.Column("source", sa.Text(), nullable=False),
        sa.Column("turn_id", sa.Text(), nullable=False),
        sa.Column("start_ns", sa.BigInteger(), nullable=False),
        sa.Column("prompt", sa.Text(), nullable=True),
        sa.Column("touches", sa.Integer(), nullable=False),
        sa.Column("facts", JSON_DOC, nullable=False),
        sa.PrimaryKeyConstraint("project", "trace_id", name=op.f("pk_trace_turns")),
    )
    for columns in (["project", "session_key"], ["project", "session_id"]):
        op.create_index(f"ix_trace_turns_{'_'.join(columns)}", "trace_turns", columns)
    op.create_table(
        "search_log",
        sa.Column("project", sa.Text(), nullable=False),
        sa.Column("version", sa.BigInteger(), nullable=False),
        sa.Column("stale", JSON_DOC, nullable=False),
        sa.Column("fresh", JSON_DOC, nullable=False),
        sa.PrimaryKeyConstraint("project", "version", name=op.f("pk_search_log")),
    )


def downgrade() -> None:
    op.drop_table("search_log")
    op.drop_table("trace_turns")
