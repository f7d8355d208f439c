"""Trace store: what the intelligence pass needs beside the notes and theme tables of 0001: a
note's entity and wording sketch (with the index one entity's notes along one aspect are read
by), the traces' end times (derived outcome notes are written from them), a theme's history
links and wording, the notes each theme holds and the themes that ended.

Revision ID: 0010_themes
Revises: 0009_score_rollups
Create Date: 2026-12-06
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0010_themes"
down_revision = "0009_score_rollups"
branch_labels = None
depends_on = None

# Spelled out rather than imported, so this migration keeps creating what it created when it
# was written: a JSON document (JSONB on PostgreSQL; None is SQL NULL).
JSON_DOC = sa.JSON(none_as_null=True).with_variant(
    postgresql.JSONB(none_as_null=True), "postgresql"
)


def upgrade() -> None:
    with op.batch_alter_table("aspect_notes") as table:
        table.add_column(sa.Column("entity_kind", sa.Text(), nullable=True))
        table.add_column(sa.Column("entity_name", sa.Text(), nullable=True))
        table.add_column(sa.Column("sketch", sa.LargeBinary(), nullable=True))
    op.create_index(
        "ix_aspect_notes_entity_aspect_created_at",
        "aspect_notes",
        ["project", "entity_kind", "entity_name", "aspect", "created_at"],
    )
    op.create_index("ix_traces_project_end_time", "traces", ["project", "end_time"])
    with op.batch_alter_table("themes") as table:
        table.add_column(sa.Column("split_from", JSON_DOC, nullable=True))
        table.add_column(sa.Column("split_into", JSON_DOC, nullable=True))
        table.add_column(sa.Column("merged_from", JSON_DOC, nullable=True))
        table.add_column(sa.Column("wording", sa.LargeBinary(), nullable=True))
    op.create_table(
        "theme_members",
        sa.Column("project", sa.Text(), nullable=False),
        sa.Column("snapshot_id", sa.Text(), nullable=False),
        sa.Column("aspect", sa.Text(), nullable=False),
        sa.Column("theme_id", sa.Text(), nullable=False),
        sa.Column("note_id", sa.Text(), nullable=False),
        sa.Column("trace_id", sa.Text(), nullable=False),
        sa.Column("similarity", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint(
            "project",
            "snapshot_id",
            "aspect",
            "theme_id",
            "note_id",
            name=op.f("pk_theme_members"),
        ),
    )
    op.create_index("ix_theme_members_project_note_id", "theme_members", ["project", "note_id"])
    op.create_table(
        "theme_endings",
        sa.Column("project", sa.Text(), nullable=False),
        sa.Column("snapshot_id", sa.Text(), nullable=False),
        sa.Column("aspect", sa.Text(), nullable=False),
        sa.Column("theme_id", sa.Text(), nullable=False),
        sa.Column("state", sa.Text(), nullable=False),
        sa.Column("merged_into", JSON_DOC, nullable=True),
        sa.PrimaryKeyConstraint(
            "project", "snapshot_id", "aspect", "theme_id", name=op.f("pk_theme_endings")
        ),
    )
    op.create_index("ix_theme_endings_project_theme_id", "theme_endings", ["project", "theme_id"])


def downgrade() -> None:
    op.drop_table("theme_endings")
    op.drop_table("theme_members")
    op.drop_index("ix_traces_project_end_time", "traces")
    with op.batch_alter_table("themes") as table:
        for column in ("wording", "merged_from", "split_into", "split_from"):
            table.drop_column(column)
    op.drop_index("ix_aspect_notes_entity_aspect_created_at", "aspect_notes")
    with op.batch_alter_table("aspect_notes") as table:
        for column in ("sketch", "entity_name", "entity_kind"):
            table.drop_column(column)
