"""The data directory's lock: one process owns its writes; the lock file names it."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from mcpd.runtime.data_dir import LOCKED, DataDirLock, DataDirLocked, LockHolder


def test_a_second_holder_is_refused_with_the_first_ones_pid_and_address(tmp_path: Path) -> None:
    # flock belongs to an open file: a second DataDirLock conflicts as another process's would.
    with DataDirLock(tmp_path) as held:
        held.announce(LockHolder(os.getpid(), grpc="127.0.0.1:50051"))
        with pytest.raises(DataDirLocked) as caught:
            DataDirLock(tmp_path).acquire()
        assert caught.value.reason == LOCKED
        assert f"pid {os.getpid()}" in caught.value.message
        assert str(tmp_path) in caught.value.message
        assert caught.value.holder == LockHolder(os.getpid(), grpc="127.0.0.1:50051")
        held.acquire()  # already held: no-op
    # Released with its holder.
    with DataDirLock(tmp_path):
        recorded = json.loads((tmp_path / "mcpd.lock").read_text())
        assert recorded == {"pid": os.getpid(), "grpc": None}


def test_the_lock_file_is_private(tmp_path: Path) -> None:
    with DataDirLock(tmp_path / "data") as lock:
        assert lock.path.stat().st_mode & 0o777 == 0o600
