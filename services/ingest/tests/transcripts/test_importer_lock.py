"""The ingest lock: one process writes a data directory's sessions."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from mcpd.runtime.errors import FailedPrecondition
from services.ingest.transcripts.lock import IngestLock, ingest_lock_path

# Holds the lock in another process until its stdin closes.
_HOLDER = """
import sys
from pathlib import Path
from services.ingest.transcripts.lock import IngestLock
with IngestLock(Path(sys.argv[1])):
    print("locked", flush=True)
    sys.stdin.read()
"""


@pytest.mark.e2e  # the first holder is another process
def test_a_second_holder_is_refused_with_the_first_ones_pid(tmp_path: Path) -> None:
    path = ingest_lock_path(tmp_path)
    assert path == tmp_path / "sessions" / "ingest.lock"
    holder = subprocess.Popen(
        [sys.executable, "-c", _HOLDER, str(path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        cwd=Path(__file__).parents[4],
    )
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline().strip() == "locked"
        with pytest.raises(FailedPrecondition) as caught:
            IngestLock(path).acquire()
        assert f"pid {holder.pid}" in caught.value.message
        assert str(tmp_path) in caught.value.message
    finally:
        assert holder.stdin is not None
        holder.stdin.close()
        holder.wait(timeout=30)
    # Released when its holder exits.
    with IngestLock(path) as lock:
        assert path.read_text().strip() == str(os.getpid())
        lock.acquire()  # already held: no-op
    with IngestLock(path):
        pass
