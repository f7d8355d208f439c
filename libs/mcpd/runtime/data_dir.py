"""The data directory belongs to the user mcpd runs as, and to nobody else.

It holds prompts and completions (`trace.db`), password hashes and the audit log
(`control.db`), runs (`run.db`), the session search index and the server's keys. Every mcpd
process that opens it sets the process umask to 0o077 first, as PostgreSQL does, so whatever
creates a file there (SQLite and its `-wal`/`-shm` files, tantivy, the key and lock files) makes
it 0600 and every directory 0700, without each writer having to ask. A directory made before
(by an older mcpd, by hand, by a container image) is tightened at start, with one warning
saying what changed. PostgreSQL and ClickHouse servers keep their own files; an embedded
ClickHouse (chdb) directory under the data directory is inside it and so is covered.

One process at a time owns a data directory's writes (the embedded search index has a single
writer): `DataDirLock`, an exclusive advisory lock (`flock`) on `<data_dir>/mcpd.lock`, taken
by `mcpd serve` before anything else it does, and by `mcpd import` when no daemon runs. The
lock file says who holds it and where that daemon serves gRPC, so a second `mcpd serve` fails at
once naming the holder, and `mcpd import` can hand its files to the daemon. The kernel releases
the lock when its holder exits, however it exits: no stale locks.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import secrets
import stat
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Self

from mcpd.runtime.errors import FailedPrecondition

__all__ = [
    "DIRECTORY_MODE",
    "FILE_MODE",
    "LOCKED",
    "LOCK_FILE",
    "PRIVATE_UMASK",
    "DataDirLock",
    "DataDirLocked",
    "LockHolder",
    "Tightened",
    "open_data_dir",
    "write_private_once",
]

LOCK_FILE = "mcpd.lock"
# The reason of the error a held lock raises.
LOCKED = "DATA_DIR_LOCKED"

PRIVATE_UMASK = 0o077
DIRECTORY_MODE = 0o700
FILE_MODE = 0o600
# Any permission for the group or for others is looser than mcpd's.
_SHARED = stat.S_IRWXG | stat.S_IRWXO

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Tightened:
    """What `secure_data_dir` changed: directories set to 0700, regular files set to 0600, and
    entries it could not change (not ours: a mount point owned by root, say)."""

    directories: int = 0
    files: int = 0
    refused: tuple[str, ...] = ()


def open_data_dir(data_dir: Path) -> Tightened:
    """Make this process create private files (umask 0o077), then `secure_data_dir`.

    The umask is process-wide and inherited by children: call it at a process's start, before
    anything is created, and never from a library or a test process."""
    os.umask(PRIVATE_UMASK)
    return secure_data_dir(data_dir)


def secure_data_dir(data_dir: Path) -> Tightened:
    """Create `data_dir` 0700 when missing; otherwise set it and every directory under it that
    others may use to 0700, and every such regular file to 0600. Symbolic links are neither
    followed nor changed, so nothing outside the directory is touched. One warning says what
    was tightened; an entry that cannot be changed is reported, not fatal."""
    if not data_dir.exists():
        data_dir.mkdir(mode=DIRECTORY_MODE, parents=True)
        # mkdir's mode passes through the umask, which may be the caller's, not ours.
        data_dir.chmod(DIRECTORY_MODE)
        return Tightened()
    directories = files = 0
    refused: list[str] = []
    # The configured directory may itself be a link to where the data lives; below it, os.walk
    # does not descend into links.
    for root, _, filenames in os.walk(data_dir.resolve()):
        for path in (root, *(os.path.join(root, name) for name in filenames)):
            changed = _tighten(path, refused)
            directories += changed == DIRECTORY_MODE
            files += changed == FILE_MODE
    tightened = Tightened(directories, files, tuple(refused))
    _report(data_dir, tightened)
    return tightened


def _tighten(path: str, refused: list[str]) -> int | None:
    """Give `path` its private mode if others may use it; the mode set (None: unchanged)."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:  # removed meanwhile (a SQLite journal, a temporary file)
        return None
    if stat.S_ISDIR(info.st_mode):
        mode = DIRECTORY_MODE
    elif stat.S_ISREG(info.st_mode):
        mode = FILE_MODE
    else:
        return None  # a symbolic link, a socket: chmod would follow or mean nothing
    if not info.st_mode & _SHARED:
        return None
    try:
        os.chmod(path, mode)
    except OSError as error:
        refused.append(f"{path}: {error.strerror}")
        return None
    return mode


def _report(data_dir: Path, tightened: Tightened) -> None:
    if tightened.directories or tightened.files:
        log.warning(
            f"the data directory {data_dir} was open to other users: set "
            f"{tightened.directories} directories to 0700 and {tightened.files} files to 0600",
            extra={
                "path": str(data_dir),
                "directories": tightened.directories,
                "files": tightened.files,
            },
        )
    if tightened.refused:
        log.warning(
            f"cannot make everything in the data directory {data_dir} private to its owner: "
            f"{'; '.join(tightened.refused)}",
            extra={"path": str(data_dir)},
        )


@dataclass(frozen=True, slots=True)
class LockHolder:
    """Who holds a data directory's lock: its pid and, once it serves, its gRPC address."""

    pid: int
    grpc: str | None = None


class DataDirLocked(FailedPrecondition):
    """Another process holds the data directory's lock (reason `DATA_DIR_LOCKED`, the holder's
    pid in the message and the metadata; `holder` None when the lock file says nothing)."""

    def __init__(self, data_dir: Path, holder: LockHolder | None) -> None:
        pid = str(holder.pid) if holder else "unknown"
        super().__init__(
            f"another mcpd process (pid {pid}) is using the data directory {data_dir}",
            reason=LOCKED,
            metadata={"pid": pid},
        )
        self.holder = holder


class DataDirLock:
    """The exclusive lock of one data directory (see the module docstring); a context manager.

    `acquire` raises `DataDirLocked` when another process holds it.
    """

    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir
        self.path = data_dir / LOCK_FILE
        self._fd: int | None = None

    def acquire(self) -> None:
        """Take the lock, or raise naming the process that holds it. Idempotent."""
        if self._fd is not None:
            return
        self.data_dir.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, FILE_MODE)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _holder(fd)
            os.close(fd)
            raise DataDirLocked(self.data_dir, holder) from None
        except OSError:
            os.close(fd)
            raise
        self._fd = fd
        self.announce(LockHolder(os.getpid()))

    def announce(self, holder: LockHolder) -> None:
        """Say in the lock file who holds it (the holder calls this once it serves)."""
        assert self._fd is not None, "acquired first"
        os.ftruncate(self._fd, 0)
        os.pwrite(self._fd, json.dumps({"pid": holder.pid, "grpc": holder.grpc}).encode(), 0)

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


def _holder(fd: int) -> LockHolder | None:
    """What the lock file at `fd` says of its holder (None when it says nothing readable)."""
    try:
        found = json.loads(os.pread(fd, 4096, 0) or b"null")
        return LockHolder(int(found["pid"]), found.get("grpc") or None)
    except (OSError, ValueError, TypeError, KeyError):
        return None


def write_private_once(path: Path, content: bytes) -> bool:
    """Create `path` holding `content`, mode 0600, unless it exists; whether this call made it.

    Written and synced to a private temporary file in the same directory, then hard-linked into
    place, which fails when another process got there first (its file stays): processes sharing
    a directory agree on one file (a key, a credential), and a crash never leaves a partial one.
    The new directory entry is synced too (where the platform can open a directory).
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, FILE_MODE)
    try:
        with os.fdopen(descriptor, "wb") as file:
            file.write(content)
            file.flush()
            os.fsync(file.fileno())
        try:
            os.link(temporary, path)
        except FileExistsError:
            return False
        _sync_directory(path.parent)
        return True
    finally:
        with contextlib.suppress(FileNotFoundError):
            temporary.unlink()


def _sync_directory(directory: Path) -> None:
    try:
        descriptor = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        with contextlib.suppress(OSError):
            os.fsync(descriptor)
    finally:
        os.close(descriptor)
