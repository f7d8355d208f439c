"""Run store: the digest of each definition version's body, so the versioning rule finds an
identical body by index.

Revision ID: 0002_definition_digest
Revises: 0001_initial
Create Date: 2026-12-03
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002_definition_digest"
down_revision = "0001_initial"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # Nullable: a version stored before the digest existed has none, and is compared by body.
    op.add_column("definitions", sa.Column("body_digest", sa.Text(), nullable=True))
    op.create_index(
        "ix_definitions_project_id_body_digest",
        "definitions",
        ["project", "id", "body_digest"],
        unique=False,
    )


def downgrade() -> None:
    op.drop_index("ix_definitions_project_id_body_digest", table_name="definitions")
    op.drop_column("definitions", "body_digest")
