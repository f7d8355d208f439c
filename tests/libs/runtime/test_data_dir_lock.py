"""The data directory's lock: one process owns its writes; the lock file names it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from mcpd.runtime.data_dir import LOCKED, DataDirLock, DataDirLocked, LockHolder

# Holds the lock in another process until its stdin closes.
_HOLDER = """
import sys
from pathlib import Path
from mcpd.runtime.data_dir import DataDirLock, LockHolder
import os
with DataDirLock(Path(sys.argv[1])) as lock:
    lock.announce(LockHolder(os.getpid(), grpc="127.0.0.1:50051"))
    print("locked", flush=True)
    sys.stdin.read()
"""


def test_a_second_holder_is_refused_with_the_first_ones_pid_and_address(tmp_path: Path) -> None:
    holder = subprocess.Popen(
        [sys.executable, "-c", _HOLDER, str(tmp_path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline().strip() == "locked"
        with pytest.raises(DataDirLocked) as caught:
            DataDirLock(tmp_path).acquire()
        assert caught.value.reason == LOCKED
        assert f"pid {holder.pid}" in caught.value.message
        assert str(tmp_path) in caught.value.message
        assert caught.value.holder == LockHolder(holder.pid, grpc="127.0.0.1:50051")
    finally:
        assert holder.stdin is not None
        holder.stdin.close()
        holder.wait(timeout=30)
    # Released when its holder exits, however it exits.
    with DataDirLock(tmp_path) as lock:
        recorded = json.loads((tmp_path / "mcpd.lock").read_text())
        assert recorded == {"pid": os.getpid(), "grpc": None}
        lock.acquire()  # already held: no-op
    with DataDirLock(tmp_path):
        pass


def test_the_lock_file_is_private(tmp_path: Path) -> None:
    with DataDirLock(tmp_path / "data") as lock:
        assert lock.path.stat().st_mode & 0o777 == 0o600
