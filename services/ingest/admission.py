"""Admission: how much ingest work one process takes on at once.

Under a flood the work waiting in a process is what costs memory: requests decoded and mapped
into rows, waiting for a thread to validate them, then for the writer. The writer's bound
(`ingest.max_pending_records`) sees only the last of these, and a process whose CPU is the
limit never fills it while requests pile up before it. So every ingest request is admitted
before any work is done on it, by its size as received, and released once it is answered;
past `ingest.max_pending_bytes` of admitted requests a new one is refused at once, with
ResourceExhausted and a retry delay (HTTP 429 with `Retry-After`, gRPC RESOURCE_EXHAUSTED with a
`google.rpc.RetryInfo`), so refusing costs next to nothing and memory stays bounded by
configuration. A request larger than the whole bound is admitted when nothing else is in
progress, or it could never be served.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from mcpd.runtime.errors import ResourceExhausted

# The retry delay of every ingest refusal for load. A fixed second: refusing is cheap, so
# clients coming back soon cost little, and ingest frees up within a group commit or two.
RETRY_AFTER_S = 1.0
BUSY = "INGEST_BUSY"


def busy(message: str) -> ResourceExhausted:
    """The refusal of an ingest request this process has no room for now."""
    return ResourceExhausted(message, reason=BUSY, retry_after_s=RETRY_AFTER_S)


class Admission:
    """Counts the bytes of the requests in progress against `max_pending_bytes`."""

    def __init__(self, max_pending_bytes: int) -> None:
        if max_pending_bytes < 1:
            raise ValueError("max_pending_bytes must be positive")
        self._max = max_pending_bytes
        self._pending = 0

    @property
    def pending_bytes(self) -> int:
        return self._pending

    @contextlib.contextmanager
    def admit(self, size: int) -> Iterator[None]:
        """Hold `size` bytes of the bound while the block runs; ResourceExhausted when they do
        not fit beside what is in progress."""
        if self._pending and self._pending + size > self._max:
            raise busy(
                f"ingest is at its bound ({self._pending} bytes of requests in progress, "
                f"ingest.max_pending_bytes {self._max}); retry later"
            )
        self._pending += size
        try:
            yield
        finally:
            self._pending -= size
