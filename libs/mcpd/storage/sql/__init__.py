"""The SQL backends (SQLite, PostgreSQL) of the three stores, through SQLAlchemy 2 Core.

Schemas in `schema`, Alembic migrations in `migrations/<store>/` run by `migrate`, engines
configured in `engine`, the trace and run stores in `stores` and the control store in
`control_store`.
"""

from mcpd.storage.sql.control_store import SqlControlStore
from mcpd.storage.sql.dialect import SqlDialect
from mcpd.storage.sql.engine import Synchronous, create_postgres_engine, create_sqlite_engine
from mcpd.storage.sql.schema import StoreName
from mcpd.storage.sql.stores import SqlRunStore, SqlTraceStore

__all__ = [
    "SqlControlStore",
    "SqlDialect",
    "SqlRunStore",
    "SqlTraceStore",
    "StoreName",
    "Synchronous",
    "create_postgres_engine",
    "create_sqlite_engine",
]
