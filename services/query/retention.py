"""The retention sweeper: on a timer, delete what has aged out of each project's windows.

The SQL backends cannot hand a window to the engine (StoreCapabilities.declarative_retention
is false), and windows are per project while a ClickHouse TTL is per table, so the daemon runs
the deletes itself: every `interval_s`, for every project of the control store, it asks the
trace store to `apply_retention` with one cutoff per signal. Windows are measured against
`received_at`, the server's arrival stamp, so a producer's clock cannot keep a row alive.

A signal's window is the project's `retention_days` (the server's `default_days` when the
project sets none; 0 keeps forever), capped by the signal's own `<signal>_days` setting when
there is one: the shorter wins, so an operator's cap holds for every project. The audit log is
never swept (it lives in the control store, and the trace store's retention never reads it).

Each pass also forgets every project's ingest keys older than `ingest_keys_days` (7 by
default): the replay window of `IngestBatch.ingest_key`, beyond which a batch sent again is
written again. A producer retries within seconds or hours; remembering keys for ever would grow
the key table by a row per batch without end.

A failed sweep of one project is logged and the others still run; a failed sweep as a whole is
logged and retried at the next interval: the loop only ends when told to stop.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Mapping

from mcpd.model.v1 import account_pb2
from mcpd.runtime.clock import Clock, epoch_nanos
from mcpd.runtime.config import RetentionSettings
from mcpd.signals.queries import STAT_SIGNALS
from mcpd.storage.interfaces import ProjectCatalog, SignalRetention

log = logging.getLogger(__name__)

DAY_NS = 86_400 * 1_000_000_000
# What `sweep_once` reports the forgotten ingest keys under, beside the signals.
INGEST_KEYS = "ingest_keys"


def window_days(project_days: int, cap_days: int | None) -> int | None:
    """A signal's window in days, or None to keep forever: the shorter of the project's
    window (0 = forever) and the signal's cap."""
    windows = [days for days in (project_days, cap_days) if days]
    return min(windows) if windows else None


class RetentionSweeper:
    """Sweeps every project's aged signals (module docstring). `sweep_once` blocks; `run` is
    the async loop the daemon starts."""

    def __init__(
        self,
        trace_store: SignalRetention,
        control_store: ProjectCatalog,
        settings: RetentionSettings,
        clock: Clock,
    ) -> None:
        self._traces = trace_store
        self._control = control_store
        self._settings = settings
        self._clock = clock
        self._caps: dict[str, int | None] = {
            "spans": settings.spans_days,
            "logs": settings.logs_days,
            "metrics": settings.metrics_days,
            "scores": settings.scores_days,
            "feedback": settings.feedback_days,
        }

    def cutoffs(self, project: account_pb2.Project, now_ns: int) -> dict[str, int]:
        """The project's cutoff (ns) per signal that has a window; signals kept forever are
        left out."""
        project_days = (
            project.retention_days
            if project.HasField("retention_days")
            else self._settings.default_days
        )
        found: dict[str, int] = {}
        for signal in STAT_SIGNALS:
            days = window_days(project_days, self._caps[signal])
            if days is not None:
                found[signal] = now_ns - days * DAY_NS
        return found

    def sweep_once(self) -> dict[str, dict[str, int]]:
        """One pass over every project: rows removed per project and signal (projects with
        nothing to sweep, or whose sweep failed, are left out). Blocking."""
        now_ns = epoch_nanos(self._clock.now())
        keys_before = (
            now_ns - self._settings.ingest_keys_days * DAY_NS
            if self._settings.ingest_keys_days
            else None
        )
        removed: dict[str, dict[str, int]] = {}
        for project in self._control.list_projects():
            cutoffs = self.cutoffs(project, now_ns)
            if not cutoffs and keys_before is None:
                continue
            try:
                counts = (
                    self._traces.apply_retention(project.project_id, cutoffs) if cutoffs else {}
                )
                if keys_before is not None:
                    counts[INGEST_KEYS] = self._traces.expire_ingest_keys(
                        project.project_id, keys_before
                    )
            except Exception:
                log.exception(
                    "retention sweep of a project failed; retried at the next sweep",
                    extra={"project": project.project_id},
                )
                continue
            removed[project.project_id] = counts
        return removed

    async def run(self, stop: asyncio.Event) -> None:
        """Sweep now, then every `interval_s`, until `stop` is set. Never raises on a failed
        sweep: it is logged and the next one retries."""
        while not stop.is_set():
            try:
                removed = await asyncio.to_thread(self.sweep_once)
            except Exception:
                log.exception("retention sweep failed; retried at the next sweep")
            else:
                _log_removed(removed)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), timeout=self._settings.interval_s)


def _log_removed(removed: Mapping[str, Mapping[str, int]]) -> None:
    for project, counts in sorted(removed.items()):
        if any(counts.values()):
            log.info(
                "retention sweep removed aged records",
                extra={"project": project, "removed": dict(counts)},
            )
