"""The SQLite/PostgreSQL trace and run stores. The control store is in `control_store`."""

from __future__ import annotations

from collections.abc import Sequence

from mcpd.model.v1 import query_pb2
from mcpd.signals.batch import HeldTrace, SignalBatch, TraceRecords
from mcpd.signals.rows import SpanRow
from mcpd.storage import capabilities
from mcpd.storage.sql import signals
from mcpd.storage.sql.base import SqlStore
from mcpd.storage.sql.engine import read_connection
from mcpd.storage.sql.schema import StoreName


class SqlTraceStore(SqlStore):
    """The trace store on SQLite or PostgreSQL."""

    _store = StoreName.TRACE

    def capabilities(self) -> query_pb2.StoreCapabilities:
        """This backend's row of `mcpd.storage.capabilities`."""
        return capabilities.BY_BACKEND[self.backend].to_proto()

    def write_batches(self, batches: Sequence[SignalBatch]) -> list[bool]:
        """Write several batches as one transaction (see `TraceStore.write_batches`)."""
        if not batches:
            return []
        with self._engine.begin() as conn:
            return signals.write_batches(conn, self._dialect, batches)

    def held_traces(self) -> list[HeldTrace]:
        """A summary of every trace with held spans, oldest first arrival first."""
        with read_connection(self._engine) as conn:
            return signals.held_traces(conn)

    def release_held(self, project: str, keep: Sequence[str], drop: Sequence[str]) -> int:
        """Move the `keep` traces' held spans into `spans`, delete the `drop` traces' ones."""
        if not keep and not drop:
            return 0
        with self._engine.begin() as conn:
            return signals.release_held(conn, self._dialect, project, keep, drop)

    def trace_records(
        self, project: str, trace_id: str, *, logs: bool, scores: bool, feedback: bool
    ) -> TraceRecords | None:
        """One trace with its spans (and, as asked, logs, scores and feedback)."""
        with read_connection(self._engine) as conn:
            return signals.trace_records(
                conn, project, trace_id, logs=logs, scores=scores, feedback=feedback
            )

    def facet_value_count(self, project: str, facet: str, key: str) -> int:
        """Distinct values the facet table holds for (project, facet, key)."""
        with read_connection(self._engine) as conn:
            return signals.facet_value_count(conn, project, facet, key)

    def session_spans(self, project: str, session_id: str, *, limit: int) -> list[SpanRow]:
        """The newest `limit` spans of one session, oldest first."""
        with read_connection(self._engine) as conn:
            return signals.session_spans(conn, project, session_id, limit=limit)


class SqlRunStore(SqlStore):
    """The run store on SQLite or PostgreSQL."""

    _store = StoreName.RUN
