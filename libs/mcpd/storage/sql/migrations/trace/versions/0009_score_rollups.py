"""Trace store: `score_rollups`, the count and value sum of each scorer's scores per hour and day,
kept as scores arrive (`mcpd.signals.rollups`), filled here from the scores already stored.

Revision ID: 0009_score_rollups
Revises: 0008_rollups
Create Date: 2026-12-06
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from mcpd.storage.sql.dialect import SqlDialect
from mcpd.storage.sql.signals.score_rollups import rebuild

revision = "0009_score_rollups"
down_revision = "0008_rollups"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "score_rollups",
        sa.Column("project", sa.Text(), nullable=False),
        sa.Column("scorer_id", sa.Text(), nullable=False),
        sa.Column("level", sa.BigInteger(), nullable=False),
        sa.Column("bucket_start", sa.BigInteger(), nullable=False),
        sa.Column("count", sa.BigInteger(), nullable=False),
        sa.Column("value_sum", sa.Double(), nullable=False),
        sa.PrimaryKeyConstraint(
            "project", "scorer_id", "level", "bucket_start", name=op.f("pk_score_rollups")
        ),
    )
    # What is already stored, rolled up as the writers would have (one pass over the scores).
    bind = op.get_bind()
    rebuild(bind, SqlDialect.of(bind.dialect))


def downgrade() -> None:
    op.drop_table("score_rollups")
