"""Per-file tailing checkpoints, persisted as one JSON file in the data directory.

A JSON file rather than a table: checkpoints describe files on this machine's disk, whichever
backend holds the read model, and they are cheap to lose (a lost checkpoint means one idempotent
re-import). The tailer still only trusts a checkpoint while the store has its session, so a
reset read model is refilled. Written atomically (temporary file, fsync, rename).
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from enum import StrEnum
from pathlib import Path

__all__ = ["Change", "Checkpoint", "CheckpointFile", "classify"]

log = logging.getLogger("mcpd.ingest.transcripts")

_VERSION = 1


@dataclass(frozen=True, slots=True)
class Checkpoint:
    """How far one file of one source was read.

    `offset` is the byte length of the complete lines imported, `size` the bytes seen (a
    partial last line makes it larger), `lines` how many complete lines there were (errors on
    lines up to it were already reported). `session_key` is the transcript's own id, None
    while the file had no events.
    """

    source: str
    path: str
    inode: int
    device: int
    size: int
    offset: int
    mtime_ns: int
    lines: int = 0
    session_key: str | None = None

    @property
    def key(self) -> tuple[str, str]:
        """(source, path): one checkpoint per file per source."""
        return (self.source, self.path)


class Change(StrEnum):
    """What happened to a file since its checkpoint."""

    NEW = "new"
    UNCHANGED = "unchanged"
    GREW = "grew"
    # Same identity, but shrunk below what was imported or rewritten in place: read it again.
    REWRITTEN = "rewritten"
    # A different file at the same path (log rotation, an editor's save-by-rename).
    REPLACED = "replaced"


def classify(checkpoint: Checkpoint | None, stat: os.stat_result) -> Change:
    """Compare a file's `stat` with its checkpoint."""
    if checkpoint is None:
        return Change.NEW
    if (stat.st_ino, stat.st_dev) != (checkpoint.inode, checkpoint.device):
        return Change.REPLACED
    if stat.st_size < checkpoint.offset:
        return Change.REWRITTEN  # truncated
    if stat.st_size == checkpoint.size and stat.st_mtime_ns == checkpoint.mtime_ns:
        return Change.UNCHANGED
    if stat.st_size > checkpoint.size:
        return Change.GREW
    return Change.REWRITTEN


class CheckpointFile:
    """The checkpoints of one data directory, in `<path>` (a JSON document)."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def load(self) -> dict[tuple[str, str], Checkpoint]:
        """Every saved checkpoint. A missing file is no checkpoints; an unreadable or corrupt
        one is logged and ignored (the files are re-imported, which is idempotent)."""
        try:
            document = json.loads(self.path.read_text(encoding="utf-8"))
            if document.get("version") != _VERSION:
                raise ValueError(f"unsupported version {document.get('version')!r}")
            found = [Checkpoint(**entry) for entry in document["files"]]
        except FileNotFoundError:
            return {}
        except (OSError, ValueError, TypeError, KeyError, AttributeError) as exc:
            log.warning(
                "ignoring unreadable transcript checkpoints; files will be re-imported",
                extra={"path": str(self.path), "error": str(exc)},
            )
            return {}
        return {checkpoint.key: checkpoint for checkpoint in found}

    def save(self, checkpoints: Mapping[tuple[str, str], Checkpoint]) -> None:
        """Replace the file with `checkpoints`, atomically."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        document = {
            "version": _VERSION,
            "files": [asdict(checkpoints[key]) for key in sorted(checkpoints)],
        }
        handle, temporary = tempfile.mkstemp(prefix=".checkpoints-", dir=self.path.parent)
        try:
            with os.fdopen(handle, "w", encoding="utf-8") as out:
                json.dump(document, out, separators=(",", ":"))
                out.flush()
                os.fsync(out.fileno())
            os.replace(temporary, self.path)
        finally:
            # Gone after a successful replace; left over when writing failed.
            Path(temporary).unlink(missing_ok=True)
