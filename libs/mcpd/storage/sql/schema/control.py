"""The control store's tables on SQLite and PostgreSQL.

Projects (the spec's Project), accounts, API keys, account sessions, the audit log (the spec's
AuditEvent, stored in `audit_log`), the price book, the monitors' latched conditions and the
aspects (the spec's Aspect). No secret is ever stored: API keys and session tokens are kept as
SHA-256 digests, passwords as argon2id hashes.
"""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    Boolean,
    Column,
    Double,
    ForeignKey,
    Integer,
    PrimaryKeyConstraint,
    Table,
    Text,
    text,
)

from mcpd.storage.sql.schema._common import index, new_metadata
from mcpd.storage.sql.types import Count, JsonDocument, TimestampNs

metadata = new_metadata()

projects = Table(
    "projects",
    metadata,
    Column("project_id", Text, nullable=False),
    Column("name", Text, nullable=False),
    Column("created_at", TimestampNs, nullable=False),
    Column("retention_days", Integer),
    Column("sampling", JsonDocument),
    Column("redaction", JsonDocument),
    Column("budget", JsonDocument),
    Column("metadata", JsonDocument),
    PrimaryKeyConstraint("project_id"),
)

accounts = Table(
    "accounts",
    metadata,
    Column("email", Text, nullable=False),
    Column("project", Text, ForeignKey("projects.project_id"), nullable=False),
    Column("password_hash", Text, nullable=False),
    Column("created_at", TimestampNs, nullable=False),
    PrimaryKeyConstraint("email"),
    index("accounts", "project"),
)

api_keys = Table(
    "api_keys",
    metadata,
    Column("id", Text, nullable=False),
    Column("project", Text, ForeignKey("projects.project_id"), nullable=False),
    # The account holding the key; NULL for a key an operator created for the deployment.
    Column("account_email", Text, ForeignKey("accounts.email", ondelete="CASCADE")),
    Column("scope", Text, nullable=False),
    Column("name", Text),
    Column("prefix", Text, nullable=False),
    # SHA-256 of the secret, hex. Every authenticated request looks a key up by this.
    Column("digest", Text, nullable=False),
    Column("created_at", TimestampNs, nullable=False),
    Column("revoked_at", TimestampNs),
    PrimaryKeyConstraint("id"),
    index("api_keys", "digest", unique=True),
    index("api_keys", "project"),
    # An account's keys (`list_keys`), and the cascade when an account goes.
    index("api_keys", "account_email"),
)

account_sessions = Table(
    "account_sessions",
    metadata,
    # SHA-256 of the session token, hex. The token itself is shown once and never stored.
    Column("token_digest", Text, nullable=False),
    Column("email", Text, ForeignKey("accounts.email", ondelete="CASCADE"), nullable=False),
    Column("project", Text, nullable=False),
    Column("created_at", TimestampNs, nullable=False),
    Column("expires_at", TimestampNs, nullable=False),
    PrimaryKeyConstraint("token_digest"),
    index("account_sessions", "expires_at"),
)

# No foreign key to projects: a refused request may name a project that does not exist, and
# the log outlives what it describes.
audit_log = Table(
    "audit_log",
    metadata,
    Column("audit_id", Text, nullable=False),
    Column("timestamp", TimestampNs, nullable=False),
    Column("principal", Text, nullable=False),
    Column("subject", Text, nullable=False),
    Column("action", Text, nullable=False),
    Column("project", Text, nullable=False),
    Column("resource", Text),
    Column("result", Text, nullable=False),
    Column("source", Text),
    # How many requests the row stands for; rows from before the column are single events.
    Column("count", Count, nullable=False, server_default=text("1")),
    Column("reason", Text),
    PrimaryKeyConstraint("audit_id"),
    # A project's log newest first, `audit_id` breaking timestamp ties: the keyset of
    # `list_audit`'s pages: one index range scan per page, no sort step.
    index("audit_log", "project", "timestamp", "audit_id"),
)

# One row per (book, provider, model, meter) price, effective from an instant. Rows are never
# updated: a price change is a new row, so a cost computed yesterday can still be explained.
price_book = Table(
    "price_book",
    metadata,
    Column("book_id", Text, nullable=False),
    Column("provider", Text, nullable=False),
    Column("model", Text, nullable=False),
    # input, output, cache_read, cache_write, cache_write_5m, cache_write_1h, reasoning, ...
    Column("meter", Text, nullable=False),
    Column("currency", Text, nullable=False),
    Column("price_per_million", Double, nullable=False),
    Column("effective_from", TimestampNs, nullable=False),
    PrimaryKeyConstraint("book_id", "provider", "model", "meter", "effective_from"),
)

# The latched condition of each monitor (and, as they land, each objective) across restarts:
# one row per configured watch, replaced by every reading.
watch_states = Table(
    "watch_states",
    metadata,
    # monitor or slo.
    Column("kind", Text, nullable=False),
    Column("watch_id", Text, nullable=False),
    # nominal, tripped, acknowledged or insufficient.
    Column("condition", Text, nullable=False),
    Column("tripped_at", TimestampNs),
    # The last reading, in the spec's JSON (MonitorReading); NULL before the first.
    Column("last", JsonDocument),
    Column("updated_at", TimestampNs, nullable=False),
    PrimaryKeyConstraint("kind", "watch_id"),
)

# Every stored version of every project's aspects. Rows are never updated: an edit is a new
# version, so a note still names the definition it was written against. No foreign key to
# projects: a project that writes notes has its aspects whether or not it was configured.
aspects = Table(
    "aspects",
    metadata,
    Column("project", Text, nullable=False),
    Column("name", Text, nullable=False),
    Column("label", Text, nullable=False),
    Column("description", Text, nullable=False),
    # NULL for a derived aspect, which no model writes.
    Column("instruction", Text),
    Column("derived", Boolean, nullable=False),
    Column("built_in", Boolean, nullable=False),
    Column("enabled", Boolean, nullable=False),
    # The spec's u32, which PostgreSQL's integer cannot hold whole.
    Column("sort_order", BigInteger, nullable=False),
    Column("version", Integer, nullable=False),
    Column("created_at", TimestampNs, nullable=False),
    PrimaryKeyConstraint("project", "name", "version"),
    # The catalogue, in the order it is shown.
    index("aspects", "project", "sort_order"),
)
