"""The data directory is made private: created 0700, tightened when looser, links not followed;
the process umask makes what is created later private too."""

from __future__ import annotations

import logging
import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from mcpd.runtime.data_dir import PRIVATE_UMASK, Tightened, open_data_dir, secure_data_dir


@pytest.fixture
def restored_umask() -> Iterator[None]:
    """open_data_dir sets the umask of this (the test) process: put the old one back."""
    previous = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(previous)


def _mode(path: Path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


def _made(path: Path, mode: int, text: str = "x") -> Path:
    path.write_text(text)
    path.chmod(mode)
    return path


def test_a_missing_directory_is_created_private(tmp_path: Path, restored_umask: None) -> None:
    data_dir = tmp_path / "nested" / "data"
    assert secure_data_dir(data_dir) == Tightened()
    assert _mode(data_dir) == 0o700


def test_a_looser_directory_is_tightened_without_leaving_it(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir(mode=0o755)
    elsewhere = _made(outside / "elsewhere.txt", 0o644)
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    data_dir.chmod(0o755)
    database = _made(data_dir / "trace.db", 0o644)
    wal = _made(data_dir / "trace.db-wal", 0o664)
    index = data_dir / "search"
    index.mkdir()
    index.chmod(0o755)
    segment = _made(index / "segment", 0o644)
    already = _made(data_dir / "read-only.key", 0o400)
    (data_dir / "link-to-file").symlink_to(elsewhere)
    (data_dir / "link-to-dir").symlink_to(outside)

    with caplog.at_level(logging.WARNING, logger="mcpd.runtime.data_dir"):
        tightened = secure_data_dir(data_dir)

    assert tightened == Tightened(directories=2, files=3)
    assert {_mode(path) for path in (data_dir, index)} == {0o700}
    assert {_mode(path) for path in (database, wal, segment)} == {0o600}
    assert _mode(already) == 0o400  # stricter than ours: left alone
    # Nothing the links point at changed.
    assert _mode(elsewhere) == 0o644
    assert _mode(outside) == 0o755
    (warning,) = caplog.records
    assert warning.levelno == logging.WARNING
    assert warning.getMessage() == (
        f"the data directory {data_dir} was open to other users: set 2 directories to 0700 "
        "and 3 files to 0600"
    )


def test_a_private_directory_is_left_alone_silently(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    data_dir = tmp_path / "data"
    data_dir.mkdir(mode=0o700)
    _made(data_dir / "control.db", 0o600)
    with caplog.at_level(logging.WARNING, logger="mcpd.runtime.data_dir"):
        assert secure_data_dir(data_dir) == Tightened()
    assert not caplog.records


def test_open_data_dir_makes_later_files_private(tmp_path: Path, restored_umask: None) -> None:
    data_dir = tmp_path / "data"
    open_data_dir(data_dir)
    assert os.umask(PRIVATE_UMASK) == PRIVATE_UMASK  # reading the umask means setting it
    (data_dir / "new.db").write_text("x")
    (data_dir / "sub").mkdir()
    assert _mode(data_dir / "new.db") == 0o600
    assert _mode(data_dir / "sub") == 0o700
