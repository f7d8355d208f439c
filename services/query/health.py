"""What GET /healthz reports: HealthStatus of the process serving the query role."""

from __future__ import annotations

from mcpd.model.v1 import query_pb2
from mcpd.runtime.clock import Clock
from mcpd.version import SPEC_VERSION, mcpd_version


class HealthReporter:
    """Builds HealthStatus; uptime counts from construction, which is process start."""

    def __init__(self, *, storage: str, clock: Clock, signup: bool = False) -> None:
        self._storage = storage
        self._clock = clock
        self._started = clock.monotonic()
        self._signup = signup
        self._version = mcpd_version()

    def report(self) -> query_pb2.HealthStatus:
        """The current health. Storage problems surface as degraded once probes exist."""
        return query_pb2.HealthStatus(
            status="ok",
            version=self._version,
            spec_version=SPEC_VERSION,
            uptime_seconds=int(self._clock.monotonic() - self._started),
            storage=self._storage,
            signup=self._signup,
        )
