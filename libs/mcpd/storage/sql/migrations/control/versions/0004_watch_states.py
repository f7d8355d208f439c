"""Control store: the latched condition of each monitor, with its last reading, kept across
restarts.

Revision ID: 0004_watch_states
Revises: 0003_audit_source_count
Create Date: 2026-12-06
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0004_watch_states"
down_revision = "0003_audit_source_count"
branch_labels = None
depends_on = None

# A JSON document: JSONB on PostgreSQL, JSON text on SQLite; Python None is SQL NULL. Spelled out
# here rather than imported, so this migration never changes with the code.
JSON_DOC = sa.JSON(none_as_null=True).with_variant(
    postgresql.JSONB(none_as_null=True), "postgresql"
)


def upgrade() -> None:
    op.create_table(
        "watch_states",
        sa.Column("kind", sa.Text(), nullable=False),
        sa.Column("watch_id", sa.Text(), nullable=False),
        sa.Column("condition", sa.Text(), nullable=False),
        sa.Column("tripped_at", sa.BigInteger(), nullable=True),
        sa.Column("last", JSON_DOC, nullable=True),
        sa.Column("updated_at", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("kind", "watch_id"),
    )


def downgrade() -> None:
    op.drop_table("watch_states")
