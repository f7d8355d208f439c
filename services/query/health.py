"""What GET /healthz reports: HealthStatus of the process serving the query role."""

from __future__ import annotations

from collections.abc import Callable

from mcpd.model.v1 import query_pb2
from mcpd.runtime.clock import Clock
from mcpd.signals.batch import IngestLag
from mcpd.version import SPEC_VERSION, mcpd_version

# Health turns degraded when a record has waited this long for storage.
DEGRADED_AFTER_S = 10.0


class HealthReporter:
    """Builds HealthStatus; uptime counts from construction, which is process start."""

    def __init__(
        self,
        *,
        storage: str,
        clock: Clock,
        signup: bool = False,
        ingest_lag: Callable[[], IngestLag] | None = None,
        lag_tolerance_s: float = DEGRADED_AFTER_S,
    ) -> None:
        self._ingest_lag = ingest_lag
        self._lag_tolerance_s = lag_tolerance_s
        self._storage = storage
        self._clock = clock
        self._started = clock.monotonic()
        self._signup = signup
        self._version = mcpd_version()

    def report(self) -> query_pb2.HealthStatus:
        """The current health: degraded while ingest's oldest unwritten record is older than
        the tolerance; `detail` always reports the ingest queue when ingest runs here."""
        status, detail = "ok", None
        if self._ingest_lag is not None:
            lag = self._ingest_lag()
            detail = (
                f"ingest queue: {lag.pending_records} records waiting,"
                f" oldest {lag.oldest_age_s:.1f} s"
            )
            if lag.oldest_age_s > self._lag_tolerance_s:
                status = "degraded"
        return query_pb2.HealthStatus(
            status=status,
            detail=detail,
            version=self._version,
            spec_version=SPEC_VERSION,
            uptime_seconds=int(self._clock.monotonic() - self._started),
            storage=self._storage,
            signup=self._signup,
        )
