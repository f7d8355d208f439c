"""The data directory belongs to the user mcpd runs as, and to nobody else.

It holds prompts and completions (`trace.db`), password hashes and the audit log
(`control.db`), runs (`run.db`), the session search index and the server's keys. Every mcpd
process that opens it sets the process umask to 0o077 first, as PostgreSQL does, so whatever
creates a file there (SQLite and its `-wal`/`-shm` files, tantivy, the key and lock files) makes
it 0600 and every directory 0700, without each writer having to ask. A directory made before
(by an older mcpd, by hand, by a container image) is tightened at start, with one warning
saying what changed. PostgreSQL and ClickHouse servers keep their own files; an embedded
ClickHouse (chdb) directory under the data directory is inside it and so is covered.
"""

from __future__ import annotations

import logging
import os
import stat
from dataclasses import dataclass
from pathlib import Path

__all__ = ["DIRECTORY_MODE", "FILE_MODE", "PRIVATE_UMASK", "Tightened", "open_data_dir"]

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
