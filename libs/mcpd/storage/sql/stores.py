"""The SQLite/PostgreSQL trace and run stores. The control store is in `control_store`."""

from __future__ import annotations

from mcpd.model.v1 import query_pb2
from mcpd.storage import capabilities
from mcpd.storage.sql.base import SqlStore
from mcpd.storage.sql.schema import StoreName


class SqlTraceStore(SqlStore):
    """The trace store on SQLite or PostgreSQL."""

    _store = StoreName.TRACE

    def capabilities(self) -> query_pb2.StoreCapabilities:
        """This backend's row of `mcpd.storage.capabilities`."""
        return capabilities.BY_BACKEND[self.backend].to_proto()


class SqlRunStore(SqlStore):
    """The run store on SQLite or PostgreSQL."""

    _store = StoreName.RUN
