"""The session read model's tables, on the trace store's MetaData (SQLite and PostgreSQL).

Sessions > turns > events (spec/mcp-search-interface.md), the file touches file_attention reads,
the per-project read-model version `SessionStore.snapshot` returns, and `event_search`, the
PostgreSQL full-text side table. Every key is led by `project`, like the rest of the trace store.

* Timestamps are int64 nanoseconds (`TimestampNs`).
* `events` and `turns` carry `row_hash`, a digest of the row, so re-writing a session touches
  only the rows that changed; `sessions.content_hash` digests the whole assembled session, so an
  identical re-write changes nothing at all. `sessions.version` is the project version at which
  the session was last written: the SQLite search index catches up from it after a crash.
* `events.harness`/`source` and `file_touches.harness`/`source` repeat the session's values so
  the filters need no join.
* `event_search` holds one row per searchable event with a `tsvector` on PostgreSQL (GIN
  indexed, ranked with `ts_rank_cd`). On SQLite it exists but stays empty: the embedded backend
  ranks with a tantivy index beside the database (`mcpd.sessions.search`).
* `trace_turns` holds one row per trace of a session built from traces (`mcpd.sessions.traces`):
  its session, its turn's place and the facts its spans left, so each write of spans updates
  the turns of its own traces without reading the session's spans back.
* `search_log` holds, per read-model version written on SQLite, the events whose documents the
  write removed or replaced and those it added, so the process that holds the tantivy writer
  applies other processes' writes by their difference; it trims what its index has committed.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Boolean, Column, Index, Integer, PrimaryKeyConstraint, Table, Text
from sqlalchemy.dialects.postgresql import TSVECTOR
from sqlalchemy.engine import Dialect
from sqlalchemy.types import TypeDecorator, TypeEngine

from mcpd.storage.sql.schema._common import index
from mcpd.storage.sql.schema.trace import metadata
from mcpd.storage.sql.types import Count, JsonDocument, TimestampNs


class SearchVector(TypeDecorator[Any]):
    """A full-text vector: `tsvector` on PostgreSQL; a never-written TEXT column on SQLite."""

    impl = Text
    cache_ok = True

    def load_dialect_impl(self, dialect: Dialect) -> TypeEngine[Any]:
        if dialect.name == "postgresql":
            return dialect.type_descriptor(TSVECTOR())
        return dialect.type_descriptor(Text())


sessions = Table(
    "sessions",
    metadata,
    Column("project", Text, nullable=False),
    Column("id", Text, nullable=False),
    Column("source", Text, nullable=False),
    Column("harness", Text, nullable=False),
    Column("session_key", Text, nullable=False),
    Column("path", Text, nullable=False),
    Column("title", Text),
    Column("display_label", Text, nullable=False),
    Column("started_at", TimestampNs, nullable=False),
    Column("updated_at", TimestampNs, nullable=False),
    Column("completed", Boolean, nullable=False),
    Column("turn_count", Integer, nullable=False),
    Column("event_count", Integer, nullable=False),
    Column("mode", Text),
    Column("slug", Text),
    Column("summary", Text),
    Column("cwd", Text),
    Column("content_hash", Text, nullable=False),
    Column("version", Count, nullable=False),
    PrimaryKeyConstraint("project", "id"),
    # list_sessions: a range of updated_at, paged by (updated_at, id).
    index("sessions", "project", "updated_at", "id"),
    # neighbour_sessions: (started_at, id) order within one source.
    index("sessions", "project", "source", "started_at", "id"),
    index("sessions", "project", "source", "session_key"),
    # Search-index catch-up: sessions written after the version the index has.
    index("sessions", "project", "version"),
)

turns = Table(
    "turns",
    metadata,
    Column("project", Text, nullable=False),
    Column("id", Text, nullable=False),
    Column("session_id", Text, nullable=False),
    Column("ordinal", Integer, nullable=False),
    Column("started_at", TimestampNs, nullable=False),
    Column("updated_at", TimestampNs, nullable=False),
    Column("completed", Boolean, nullable=False),
    Column("event_count", Integer, nullable=False),
    Column("terminal_event_id", Text),
    Column("user_input_event_id", Text),
    Column("final_response_event_id", Text),
    Column("tools_called", JsonDocument, nullable=False),
    Column("event_types", JsonDocument, nullable=False),
    Column("row_hash", Text, nullable=False),
    PrimaryKeyConstraint("project", "id"),
    # list_turns, edge_turns, neighbour_turns, and replacing a session's turns.
    index("turns", "project", "session_id", "ordinal"),
)

events = Table(
    "events",
    metadata,
    Column("project", Text, nullable=False),
    Column("id", Text, nullable=False),
    Column("session_id", Text, nullable=False),
    Column("turn_id", Text, nullable=False),
    Column("ordinal", Integer, nullable=False),
    Column("seq", Count, nullable=False),
    Column("type", Text, nullable=False),
    Column("timestamp_ns", TimestampNs, nullable=False),
    Column("terminal", Boolean, nullable=False),
    Column("text", Text, nullable=False),
    Column("tool_name", Text),
    Column("model", Text),
    Column("originating_model", Text),
    Column("call_id", Text),
    Column("payload", JsonDocument),
    Column("line", Integer, nullable=False),
    Column("harness", Text, nullable=False),
    Column("source", Text, nullable=False),
    Column("row_hash", Text, nullable=False),
    PrimaryKeyConstraint("project", "id"),
    # list_events and edge_events.
    index("events", "project", "turn_id", "ordinal"),
    # neighbour_events (session order), replacing a session's events, index rebuilds.
    index("events", "project", "session_id", "seq"),
)

file_touches = Table(
    "file_touches",
    metadata,
    Column("project", Text, nullable=False),
    Column("session_id", Text, nullable=False),
    # The touch's place in the assembled session's list: touches have no id of their own.
    Column("position", Integer, nullable=False),
    Column("event_id", Text, nullable=False),
    Column("turn_id", Text),
    Column("timestamp_ns", TimestampNs),
    Column("tool_name", Text, nullable=False),
    Column("raw_path", Text, nullable=False),
    Column("tail", Text, nullable=False),
    # The tail's last component: the indexed key of a tail or path-suffix lookup.
    Column("basename", Text, nullable=False),
    Column("tail_is_absolute", Boolean, nullable=False),
    Column("worktree_root", Text),
    Column("git_common_dir", Text),
    Column("mutation", Boolean, nullable=False),
    Column("phase", Text, nullable=False),
    Column("harness", Text, nullable=False),
    Column("source", Text, nullable=False),
    PrimaryKeyConstraint("project", "session_id", "position"),
    index("file_touches", "project", "basename", "timestamp_ns"),
)

event_search = Table(
    "event_search",
    metadata,
    Column("project", Text, nullable=False),
    Column("event_id", Text, nullable=False),
    Column("session_id", Text, nullable=False),
    Column("turn_id", Text, nullable=False),
    Column("type", Text, nullable=False),
    Column("harness", Text, nullable=False),
    Column("source", Text, nullable=False),
    Column("timestamp_ns", TimestampNs, nullable=False),
    Column("search_vector", SearchVector, nullable=False),
    PrimaryKeyConstraint("project", "event_id"),
    index("event_search", "project", "session_id"),
    Index("ix_event_search_search_vector", "search_vector", postgresql_using="gin"),
)

session_versions = Table(
    "session_versions",
    metadata,
    Column("project", Text, nullable=False),
    # Incremented by every write that changes the project's read model.
    Column("version", Count, nullable=False),
    # Random, set when the row is created: a search index built from another database (one
    # deleted and re-imported, say) is told apart even where the version numbers coincide.
    Column("generation", Text, nullable=False),
    PrimaryKeyConstraint("project"),
)

trace_turns = Table(
    "trace_turns",
    metadata,
    Column("project", Text, nullable=False),
    Column("trace_id", Text, nullable=False),
    Column("session_id", Text, nullable=False),
    Column("session_key", Text, nullable=False),
    Column("source", Text, nullable=False),
    Column("turn_id", Text, nullable=False),
    # The turn's place in its session: ordered by (start_ns, trace_id).
    Column("start_ns", TimestampNs, nullable=False),
    Column("prompt", Text),
    Column("touches", Integer, nullable=False),
    Column("facts", JsonDocument, nullable=False),
    PrimaryKeyConstraint("project", "trace_id"),
    # A session's source (by key), its turns in place (by id), and erasing it.
    index("trace_turns", "project", "session_key"),
    index("trace_turns", "project", "session_id"),
)

search_log = Table(
    "search_log",
    metadata,
    Column("project", Text, nullable=False),
    Column("version", Count, nullable=False),
    # Event ids, as JSON arrays: documents that go (events removed or changed), and documents
    # that come (searchable events written).
    Column("stale", JsonDocument, nullable=False),
    Column("fresh", JsonDocument, nullable=False),
    PrimaryKeyConstraint("project", "version"),
)
