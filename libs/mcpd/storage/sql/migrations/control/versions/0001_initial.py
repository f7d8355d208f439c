"""Control store: projects, accounts, API keys, account sessions, audit log, price book.

Revision ID: 0001_initial
Revises:
Create Date: 2026-11-29
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0001_initial"
down_revision = None
branch_labels = None
depends_on = None

# A JSON document: JSONB on PostgreSQL, JSON text on SQLite; Python None is SQL NULL. Spelled out
# here rather than imported, so this migration keeps creating what it created when it was written.
JSON_DOC = sa.JSON(none_as_null=True).with_variant(
    postgresql.JSONB(none_as_null=True), "postgresql"
)


def upgrade() -> None:
    op.create_table(
        "audit_log",
        sa.Column("audit_id", sa.Text(), nullable=False),
        sa.Column("timestamp", sa.BigInteger(), nullable=False),
        sa.Column("principal", sa.Text(), nullable=False),
        sa.Column("subject", sa.Text(), nullable=False),
        sa.Column("action", sa.Text(), nullable=False),
        sa.Column("project", sa.Text(), nullable=False),
        sa.Column("resource", sa.Text(), nullable=True),
        sa.Column("result", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("audit_id", name=op.f("pk_audit_log")),
    )
    op.create_index(
        "ix_audit_log_project_timestamp", "audit_log", ["project", "timestamp"], unique=False
    )
    op.create_table(
        "price_book",
        sa.Column("book_id", sa.Text(), nullable=False),
        sa.Column("provider", sa.Text(), nullable=False),
        sa.Column("model", sa.Text(), nullable=False),
        sa.Column("meter", sa.Text(), nullable=False),
        sa.Column("currency", sa.Text(), nullable=False),
        sa.Column("price_per_million", sa.Double(), nullable=False),
        sa.Column("effective_from", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint(
            "book_id", "provider", "model", "meter", "effective_from", name=op.f("pk_price_book")
        ),
    )
    op.create_table(
        "projects",
        sa.Column("project_id", sa.Text(), nullable=False),
        sa.Column("name", sa.Text(), nullable=False),
        sa.Column("created_at", sa.BigInteger(), nullable=False),
        sa.Column("retention_days", sa.Integer(), nullable=True),
        sa.Column("sampling", JSON_DOC, nullable=True),
        sa.Column("redaction", JSON_DOC, nullable=True),
        sa.Column("budget", JSON_DOC, nullable=True),
        sa.Column("metadata", JSON_DOC, nullable=True),
        sa.PrimaryKeyConstraint("project_id", name=op.f("pk_projects")),
    )
    op.create_table(
        "accounts",
        sa.Column("email", sa.Text(), nullable=False),
        sa.Column("project", sa.Text(), nullable=False),
        sa.Column("password_hash", sa.Text(), nullable=False),
        sa.Column("created_at", sa.BigInteger(), nullable=False),
        sa.ForeignKeyConstraint(
            ["project"], ["projects.project_id"], name=op.f("fk_accounts_project_projects")
        ),
        sa.PrimaryKeyConstraint("email", name=op.f("pk_accounts")),
    )
    op.create_index("ix_accounts_project", "accounts", ["project"], unique=False)
    op.create_table(
        "account_sessions",
        sa.Column("token_digest", sa.Text(), nullable=False),
        sa.Column("email", sa.Text(), nullable=False),
        sa.Column("project", sa.Text(), nullable=False),
        sa.Column("created_at", sa.BigInteger(), nullable=False),
        sa.Column("expires_at", sa.BigInteger(), nullable=False),
        sa.ForeignKeyConstraint(
            ["email"],
            ["accounts.email"],
            name=op.f("fk_account_sessions_email_accounts"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("token_digest", name=op.f("pk_account_sessions")),
    )
    op.create_index(
        "ix_account_sessions_expires_at", "account_sessions", ["expires_at"], unique=False
    )
    op.create_table(
        "api_keys",
        sa.Column("id", sa.Text(), nullable=False),
        sa.Column("project", sa.Text(), nullable=False),
        sa.Column("account_email", sa.Text(), nullable=True),
        sa.Column("scope", sa.Text(), nullable=False),
        sa.Column("name", sa.Text(), nullable=True),
        sa.Column("prefix", sa.Text(), nullable=False),
        sa.Column("digest", sa.Text(), nullable=False),
        sa.Column("created_at", sa.BigInteger(), nullable=False),
        sa.Column("revoked_at", sa.BigInteger(), nullable=True),
        sa.ForeignKeyConstraint(
            ["account_email"],
            ["accounts.email"],
            name=op.f("fk_api_keys_account_email_accounts"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["project"], ["projects.project_id"], name=op.f("fk_api_keys_project_projects")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_api_keys")),
    )
    op.create_index("ix_api_keys_project", "api_keys", ["project"], unique=False)
    op.create_index("uq_api_keys_digest", "api_keys", ["digest"], unique=True)


def downgrade() -> None:
    op.drop_table("api_keys")
    op.drop_table("account_sessions")
    op.drop_table("accounts")
    op.drop_table("projects")
    op.drop_table("price_book")
    op.drop_table("audit_log")
