"""The trace store on ClickHouse."""

from __future__ import annotations

from mcpd.model.v1 import query_pb2
from mcpd.storage import capabilities
from mcpd.storage.clickhouse import migrate as clickhouse_migrate
from mcpd.storage.clickhouse.executor import ClickHouseExecutor


class ClickHouseTraceStore:
    """The trace store on ClickHouse, behind a `ClickHouseExecutor` (server or chdb)."""

    def __init__(self, executor: ClickHouseExecutor) -> None:
        self._executor = executor

    @property
    def backend(self) -> str:
        """Always `clickhouse`."""
        return capabilities.CLICKHOUSE.backend

    @property
    def executor(self) -> ClickHouseExecutor:
        """The executor, for the feature code built on this store."""
        return self._executor

    def capabilities(self) -> query_pb2.StoreCapabilities:
        """ClickHouse's row of `mcpd.storage.capabilities`."""
        return capabilities.CLICKHOUSE.to_proto()

    def migrate(self) -> list[str]:
        """Apply pending SQL migrations; return the versions applied."""
        return clickhouse_migrate.migrate(self._executor)

    def pending_migrations(self) -> list[str]:
        """Versions not yet applied; nothing is changed."""
        return clickhouse_migrate.pending(self._executor)

    def close(self) -> None:
        """Close the executor. Idempotent."""
        self._executor.close()
