"""The server's redaction key: 32 random bytes in a file only the server can read.

The key makes `hash` rules and hashed identities (`user_id`, feedback `author_id`) keyed, so
a digest cannot be reversed by hashing guesses without it. Losing the key does not expose
anything, but every digest computed afterwards differs from the stored ones: grouping and
`user_id` filters stop matching older data. Back it up with the data directory.
"""

from __future__ import annotations

import logging
import secrets
import stat
from pathlib import Path
from typing import Final

from mcpd.runtime.data_dir import write_private_once
from mcpd.runtime.errors import FailedPrecondition

__all__ = ["KEY_BYTES", "load_or_create_key"]

KEY_BYTES: Final = 32

log = logging.getLogger(__name__)


def load_or_create_key(path: Path) -> bytes:
    """The key stored at `path` (raw bytes), created first when the file does not exist.

    Creation is atomic and race-free: the key is written and synced to a private temporary file
    (mode 0600) in the same directory, then hard-linked into place, which fails if another
    process got there first; the loser reads the winner's key. So every process sharing a data
    directory uses the same key, and a crash never leaves a short key file behind. Raises
    FailedPrecondition when the file exists but is not a key.
    """
    existing = _read(path)
    if existing is not None:
        return existing
    if write_private_once(path, secrets.token_bytes(KEY_BYTES)):
        log.info("created the redaction key", extra={"path": str(path)})
    loaded = _read(path)
    if loaded is None:  # pragma: no cover - removed between link and read
        raise FailedPrecondition(f"{path}: the redaction key disappeared while being created")
    return loaded


def _read(path: Path) -> bytes | None:
    try:
        data = path.read_bytes()
        mode = path.stat().st_mode
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise FailedPrecondition(f"{path}: cannot read the redaction key: {exc.strerror}") from exc
    if len(data) != KEY_BYTES:
        raise FailedPrecondition(
            f"{path}: a redaction key file holds exactly {KEY_BYTES} bytes, this one {len(data)};"
            " restore the original key (digests computed with another key will not match)"
        )
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        log.warning(
            "the redaction key file is readable by other users; chmod 600 it",
            extra={"path": str(path)},
        )
    return data
