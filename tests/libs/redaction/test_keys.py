"""The redaction key file: created once, private, shared by every process, never overwritten."""

from __future__ import annotations

import logging
import os
import stat
import threading
from pathlib import Path

import pytest

from mcpd.redaction import KEY_BYTES, load_or_create_key
from mcpd.runtime.errors import FailedPrecondition


def test_created_with_mode_0600_and_then_reused(tmp_path: Path) -> None:
    path = tmp_path / "data" / "redaction.key"
    key = load_or_create_key(path)
    assert len(key) == KEY_BYTES
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert load_or_create_key(path) == key
    assert [p.name for p in path.parent.iterdir()] == ["redaction.key"]  # no temporary left


def test_concurrent_creators_agree(tmp_path: Path) -> None:
    path = tmp_path / "redaction.key"
    keys: list[bytes] = []
    barrier = threading.Barrier(8)

    def create() -> None:
        barrier.wait()
        keys.append(load_or_create_key(path))

    threads = [threading.Thread(target=create) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(set(keys)) == 1
    assert keys[0] == path.read_bytes()


def test_a_file_that_is_not_a_key_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "redaction.key"
    path.write_bytes(b"too short")
    with pytest.raises(FailedPrecondition, match="exactly 32 bytes"):
        load_or_create_key(path)
    assert path.read_bytes() == b"too short"  # never replaced


def test_an_unreadable_path_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "redaction.key"
    path.mkdir()
    with pytest.raises(FailedPrecondition, match="cannot read"):
        load_or_create_key(path)


def test_a_key_readable_by_others_is_used_with_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "redaction.key"
    path.write_bytes(bytes(32))
    os.chmod(path, 0o644)
    with caplog.at_level(logging.WARNING, logger="mcpd.redaction._keys"):
        assert load_or_create_key(path) == bytes(32)
    assert "readable by other users" in caplog.text
