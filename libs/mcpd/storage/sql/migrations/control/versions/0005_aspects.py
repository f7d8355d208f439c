"""Control store: every stored version of every project's aspects (the spec's Aspect).

Revision ID: 0005_aspects
Revises: 0004_watch_states
Create Date: 2026-12-06
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005_aspects"
down_revision = "0004_watch_states"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "aspects",
        sa.Column("project", sa.Text(), nullable=False),
        sa.Column("name", sa.Text(), nullable=False),
        sa.Column("label", sa.Text(), nullable=False),
        sa.Column("description", sa.Text(), nullable=False),
        sa.Column("instruction", sa.Text(), nullable=True),
        sa.Column("derived", sa.Boolean(), nullable=False),
        sa.Column("built_in", sa.Boolean(), nullable=False),
        sa.Column("enabled", sa.Boolean(), nullable=False),
        sa.Column("sort_order", sa.BigInteger(), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("project", "name", "version", name=op.f("pk_aspects")),
    )
    op.create_index("ix_aspects_project_sort_order", "aspects", ["project", "sort_order"])


def downgrade() -> None:
    op.drop_index("ix_aspects_project_sort_order", table_name="aspects")
    op.drop_table("aspects")
