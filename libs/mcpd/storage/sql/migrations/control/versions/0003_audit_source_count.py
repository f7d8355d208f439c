"""Control store: the audit log records where a request came from, how many requests a row
stands for, and why a refused one was refused.

Refusals that repeat within a window are written as one row with a count, so `count` is 1 for
every row written before it existed. `source` and `reason` stay NULL on those rows: what they
would have said was never recorded.

Revision ID: 0003_audit_source_count
Revises: 0002_key_owner_audit_order
Create Date: 2026-12-02
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003_audit_source_count"
down_revision = "0002_key_owner_audit_order"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("audit_log", sa.Column("source", sa.Text(), nullable=True))
    op.add_column(
        "audit_log",
        sa.Column("count", sa.BigInteger(), server_default=sa.text("1"), nullable=False),
    )
    op.add_column("audit_log", sa.Column("reason", sa.Text(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("audit_log") as batch:
        batch.drop_column("reason")
        batch.drop_column("count")
        batch.drop_column("source")
