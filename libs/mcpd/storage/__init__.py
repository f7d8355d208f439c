"""mcpd's storage: the trace, run and control stores and their backends.

Open all three with `open_stores`; each store is a Protocol in `interfaces` with one
implementation per backend (`sql` for SQLite and PostgreSQL, `clickhouse` for the trace store
at scale). What each backend can do is in `capabilities`. Every store is synchronous: async
callers run it in a thread.
"""

from mcpd.storage.capabilities import BackendCapabilities
from mcpd.storage.clickhouse import (
    ChdbExecutor,
    ClickHouseError,
    ClickHouseExecutor,
    ClickHouseTraceStore,
    HttpExecutor,
    open_executor,
)
from mcpd.storage.factory import Stores, open_stores
from mcpd.storage.interfaces import ControlStore, RunStore, TraceStore
from mcpd.storage.sql import SqlControlStore, SqlRunStore, SqlTraceStore

__all__ = [
    "BackendCapabilities",
    "ChdbExecutor",
    "ClickHouseError",
    "ClickHouseExecutor",
    "ClickHouseTraceStore",
    "ControlStore",
    "HttpExecutor",
    "RunStore",
    "SqlControlStore",
    "SqlRunStore",
    "SqlTraceStore",
    "Stores",
    "TraceStore",
    "open_executor",
    "open_stores",
]
