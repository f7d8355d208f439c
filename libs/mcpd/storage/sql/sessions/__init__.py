"""The session read model on SQLite and PostgreSQL (`SqlSessionStore`).

`rows` maps records to rows, `writes` replaces a session in one transaction, `reads` answers
the lookups, and search is `tantivy_search` (SQLite) or `postgres_search` (PostgreSQL).
"""

from mcpd.storage.sql.sessions.store import SqlSessionStore

__all__ = ["SqlSessionStore"]
