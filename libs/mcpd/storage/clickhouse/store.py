"""The trace store on ClickHouse."""

from __future__ import annotations

from collections.abc import Sequence

from mcpd.model.v1 import query_pb2
from mcpd.signals.batch import HeldTrace, SignalBatch, TraceRecords
from mcpd.signals.rows import SpanRow
from mcpd.storage import capabilities
from mcpd.storage.clickhouse import migrate as clickhouse_migrate
from mcpd.storage.clickhouse.executor import ClickHouseExecutor
from mcpd.storage.clickhouse.signals import ClickHouseSignals
from mcpd.storage.clickhouse.signals import reads as signal_reads


class ClickHouseTraceStore:
    """The trace store on ClickHouse, behind a `ClickHouseExecutor` (server or chdb)."""

    def __init__(self, executor: ClickHouseExecutor) -> None:
        self._executor = executor
        self._signals = ClickHouseSignals(executor)

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

    def write_batches(self, batches: Sequence[SignalBatch]) -> list[bool]:
        """Write the batches; per batch, False for a replayed ingest key.

        Not one transaction on ClickHouse: see `mcpd.storage.clickhouse.signals` for what is
        guaranteed instead (one INSERT per table, ingest keys last, replacing engines).
        """
        return self._signals.write_batches(batches)

    def held_traces(self) -> list[HeldTrace]:
        """A summary of every trace with spans in the holding table."""
        return self._signals.held_traces()

    def release_held(self, project: str, keep: Sequence[str], drop: Sequence[str]) -> int:
        """Move the kept traces' held spans into `spans`, delete the dropped traces' ones;
        return how many spans moved."""
        return self._signals.release_held(project, keep, drop)

    def trace_records(
        self, project: str, trace_id: str, *, logs: bool, scores: bool, feedback: bool
    ) -> TraceRecords | None:
        """One trace of one project with its spans and, as asked, logs, scores, feedback."""
        return self._signals.trace_records(
            project, trace_id, logs=logs, scores=scores, feedback=feedback
        )

    def facet_value_count(self, project: str, facet: str, key: str) -> int:
        """How many distinct values the facet table holds for (project, facet, key)."""
        return self._signals.facet_value_count(project, facet, key)

    def session_spans(self, project: str, session_id: str, *, limit: int) -> list[SpanRow]:
        """The newest `limit` spans of one session, oldest first."""
        return signal_reads.session_spans(self._executor, project, session_id, limit=limit)

    def close(self) -> None:
        """Close the executor. Idempotent."""
        self._executor.close()
