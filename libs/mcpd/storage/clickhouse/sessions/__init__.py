"""The session read model on ClickHouse: versioned rows and BM25 search inside the engine."""

from mcpd.storage.clickhouse.sessions.store import ClickHouseSessionStore

__all__ = ["ClickHouseSessionStore"]
