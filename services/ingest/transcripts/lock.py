"""The one-writer lock of a data directory's session read model.

The embedded search index has a single writer, so two processes must not import transcripts
into the same data directory at once. The ingest role of `mcpd serve` holds an exclusive
advisory lock (`flock`) on `<data_dir>/sessions/ingest.lock` for as long as it runs, and
`mcpd import` takes the same lock, refusing with the holder's pid when a daemon has it. The
kernel releases the lock when its holder exits, however it exits: no stale locks.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path
from types import TracebackType
from typing import Self

from mcpd.runtime.errors import FailedPrecondition

__all__ = ["IngestLock", "ingest_lock_path"]


def ingest_lock_path(data_dir: Path) -> Path:
    """Where the lock of `data_dir` lives."""
    return data_dir / "sessions" / "ingest.lock"


class IngestLock:
    """An exclusive, non-blocking lock on `path`; a context manager."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd: int | None = None

    def acquire(self) -> None:
        """Take the lock, or raise FailedPrecondition naming the process that holds it."""
        if self._fd is not None:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.read(fd, 64).decode("ascii", errors="replace").strip() or "unknown"
            os.close(fd)
            raise FailedPrecondition(
                f"another mcpd process (pid {holder}) is writing sessions in "
                f"{self.path.parent.parent}",
                reason="INGEST_LOCKED",
                metadata={"pid": holder},
            ) from None
        except OSError:
            os.close(fd)
            raise
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode("ascii"))
        self._fd = fd

    def release(self) -> None:
        """Let go of the lock. Idempotent."""
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)  # closing the descriptor releases the flock

    def __enter__(self) -> Self:
        self.acquire()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.release()
