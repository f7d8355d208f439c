"""Trace store: ingest keys (batch idempotency) and held spans (tail sampling).

Revision ID: 0003_ingest_keys_held_spans
Revises: 0002_session_read_model
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0003_ingest_keys_held_spans"
down_revision = "0002_session_read_model"
branch_labels = None
depends_on = None

# A JSON document: JSONB on PostgreSQL, JSON text on SQLite; Python None is SQL NULL. Spelled out
# here rather than imported, so this migration keeps creating what it created when it was written.
JSON_DOC = sa.JSON(none_as_null=True).with_variant(
    postgresql.JSONB(none_as_null=True), "postgresql"
)


def upgrade() -> None:
    op.create_table(
        "ingest_keys",
        sa.Column("project", sa.Text(), nullable=False),
        sa.Column("ingest_key", sa.Text(), nullable=False),
        sa.Column("received_at", sa.BigInteger(), nullable=False),
        sa.Column("record_count", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("project", "ingest_key", name=op.f("pk_ingest_keys")),
    )
    op.create_index(
        "ix_ingest_keys_project_received_at",
        "ingest_keys",
        ["project", "received_at"],
        unique=False,
    )
    op.create_table(
        "held_spans",
        sa.Column("project", sa.Text(), nullable=False),
        sa.Column("trace_id", sa.Text(), nullable=False),
        sa.Column("span_id", sa.Text(), nullable=False),
        sa.Column("received_at", sa.BigInteger(), nullable=False),
        sa.Column("row", JSON_DOC, nullable=False),
        sa.PrimaryKeyConstraint("project", "trace_id", "span_id", name=op.f("pk_held_spans")),
    )


def downgrade() -> None:
    op.drop_table("held_spans")
    op.drop_table("ingest_keys")
