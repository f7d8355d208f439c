"""The ClickHouse backend of the trace store: executors, SQL migrations, the store class."""

from mcpd.storage.clickhouse.executor import (
    ChdbExecutor,
    ClickHouseError,
    ClickHouseExecutor,
    HttpExecutor,
    HttpTarget,
    open_executor,
)
from mcpd.storage.clickhouse.store import ClickHouseTraceStore

__all__ = [
    "ChdbExecutor",
    "ClickHouseError",
    "ClickHouseExecutor",
    "ClickHouseTraceStore",
    "HttpExecutor",
    "HttpTarget",
    "open_executor",
]
