"""SQLAlchemy Core schemas of the three SQL stores, one MetaData each.

`METADATA` maps a store name to its MetaData; the Alembic migrations under
`mcpd/storage/sql/migrations/<store>/` build exactly these tables (a test compares them).
"""

from __future__ import annotations

import enum

from sqlalchemy import MetaData

# `sessions` adds the session read model's tables to the trace store's MetaData, `rollups`
# the analytics rollups.
from mcpd.storage.sql.schema import control, rollups, run, sessions, trace


class StoreName(enum.StrEnum):
    """The three stores. The value names migration folders and Alembic version tables."""

    TRACE = "trace"
    RUN = "run"
    CONTROL = "control"

    @property
    def version_table(self) -> str:
        """The Alembic version table of this store, distinct so stores can share a database."""
        return f"alembic_version_{self.value}"


METADATA: dict[StoreName, MetaData] = {
    StoreName.TRACE: trace.metadata,
    StoreName.RUN: run.metadata,
    StoreName.CONTROL: control.metadata,
}

__all__ = ["METADATA", "StoreName", "control", "rollups", "run", "sessions", "trace"]
