"""The trace store's signal write and read surface on ClickHouse.

`ClickHouseSignals` implements `TraceStore.write_batches`, `held_traces`, `release_held`,
`trace_records` and `facet_value_count` for `ClickHouseTraceStore`, on the tables of migrations 0001
to 0004 (`traces` laid out for the run list by 0004); the query service's lists are in `lists` and
deletes in `erasure`. The projection and the facet values are the shared pure-Python ones
(`mcpd.signals.projection`, `mcpd.signals.facets`), so the run list reads the same on every backend.
Row values move through `columns`, the one module that converts them.

ClickHouse has no transactions, so `write_batches` is not all-or-nothing. What it guarantees
instead (details in `writes`):

* Per call, each table is written with ONE INSERT (one part per partition month), rows first,
  then the re-projected trace rows and facet values, and the ingest keys LAST, as the commit
  marker. A batch whose key is stored is skipped (False) and writes nothing; a key repeated
  within a call is written once.
* A call that fails part-way has written some tables and no keys: the client's retry (same
  key) writes the batch again, and that is harmless because every table a batch writes is a
  ReplacingMergeTree keyed by the row's identity, so a second copy replaces the first (exactly
  under FINAL, physically after merges). What a failed call wrote stays readable until then:
  there is no rollback.
* Calls are serialised within a process (one process-wide lock around `write_batches` and
  `release_held`, whichever store they come through), so the key check and the writes are
  race-free there. Replicas writing the same key at the same instant may both write it; the
  replacing engines make that effectively-once (one row per identity under FINAL and after
  merges), and `ingest_keys` folds the key's two rows into one.
* Releasing held spans inserts them (with projection and facets) before it deletes the held
  rows (a lightweight DELETE), so a failure in between leaves them to be released again.
* A follower of the writes (`follow_writes`: the sessions of ingested traces) is told what a
  call wrote before its ingest keys (a release: before the delete), so a failure in between is
  followed again by the retry.
* A NUL character is stored as U+FFFD, as on the SQL backends.
* Reads use FINAL and are exact right after a write.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from typing import Any, cast

from mcpd.sessions.traces import FollowedWrite, TraceWriteFollower
from mcpd.signals.batch import HeldTrace, SignalBatch, TraceRecords
from mcpd.signals.rows import SpanRow, TraceRow
from mcpd.storage.clickhouse.executor import ClickHouseExecutor
from mcpd.storage.clickhouse.signals import reads, writes

# One lock for every store in the process: writes are serialised process-wide, whichever
# store (and executor) they come through, so two stores on one database cannot both pass the
# ingest-key check for one key.
_WRITE_LOCK = threading.Lock()


class ClickHouseSignals:
    """The signal surface on one executor (which it does not own)."""

    def __init__(self, executor: ClickHouseExecutor) -> None:
        self._executor = executor
        self._lock = _WRITE_LOCK
        self._state = writes.WriterState()
        self._follower: TraceWriteFollower[Any] | None = None

    def follow_writes(self, follower: TraceWriteFollower[Any]) -> None:
        """Have `follower` told every write of spans, within the write (no transaction)."""
        self._follower = follower

    def write_batches(self, batches: Sequence[SignalBatch]) -> list[bool]:
        """Write the batches (see the package docstring for what is guaranteed)."""
        if not batches:
            return []
        with self._lock:
            return writes.write_batches(self._executor, self._state, batches, self._follow())

    def held_traces(self) -> list[HeldTrace]:
        """Every trace with held spans, summarised."""
        return reads.held_traces(self._executor)

    def release_held(self, project: str, keep: Sequence[str], drop: Sequence[str]) -> int:
        """Move the kept traces' held spans into `spans`, delete the dropped ones."""
        with self._lock:
            return writes.release_held(
                self._executor, self._state, project, keep, drop, self._follow()
            )

    def _follow(self) -> writes.Follow | None:
        """The follower's prepare, follow and after-commit work in one step (ClickHouse has no
        transaction to wait for), or None without a follower."""
        follower = self._follower
        if follower is None:
            return None

        def follow(spans: Sequence[SpanRow], traces: Sequence[Mapping[str, Any]]) -> None:
            rows = cast(list[TraceRow], list(traces))
            write = FollowedWrite(None, spans, rows, follower.prepare(spans))
            follower.follow(write)()

        return follow

    def trace_records(
        self, project: str, trace_id: str, *, logs: bool, scores: bool, feedback: bool
    ) -> TraceRecords | None:
        """One trace and what hangs off it, or None."""
        return reads.trace_records(
            self._executor, project, trace_id, logs=logs, scores=scores, feedback=feedback
        )

    def facet_value_count(self, project: str, facet: str, key: str) -> int:
        """Distinct values of one facet (and key) in one project."""
        return reads.facet_value_count(self._executor, project, facet, key)


__all__ = ["ClickHouseSignals"]
