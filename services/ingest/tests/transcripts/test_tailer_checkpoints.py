"""Checkpoints: how a file changed since it was read, and their persistence."""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path

import pytest

from services.ingest.transcripts.checkpoints import Change, Checkpoint, CheckpointFile, classify


def _checkpoint_of(path: Path, *, offset: int) -> Checkpoint:
    stat = path.stat()
    return Checkpoint(
        source="codex",
        path=str(path),
        inode=stat.st_ino,
        device=stat.st_dev,
        size=stat.st_size,
        offset=offset,
        mtime_ns=stat.st_mtime_ns,
        lines=1,
        session_key="s1",
    )


def test_classify_every_kind_of_change(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    path.write_bytes(b'{"a":1}\n{"b"')
    checkpoint = _checkpoint_of(path, offset=8)
    assert classify(None, path.stat()) is Change.NEW
    assert classify(checkpoint, path.stat()) is Change.UNCHANGED
    with path.open("ab") as handle:
        handle.write(b":2}\n")
    assert classify(checkpoint, path.stat()) is Change.GREW
    # Same size as recorded but a new mtime: rewritten in place, read again.
    grown = dataclasses.replace(checkpoint, size=path.stat().st_size)
    os.utime(path, ns=(checkpoint.mtime_ns, checkpoint.mtime_ns + 5_000_000_000))
    assert classify(grown, path.stat()) is Change.REWRITTEN
    # Truncated below what was imported.
    path.write_bytes(b"{}")
    assert classify(checkpoint, path.stat()) is Change.REWRITTEN
    # Another file at the same path (rotation, save-by-rename).
    replacement = tmp_path / "new.jsonl"
    replacement.write_bytes(b'{"a":1}\n{"b"')
    replacement.replace(path)
    assert classify(checkpoint, path.stat()) is Change.REPLACED


def test_checkpoints_round_trip_through_the_file(tmp_path: Path) -> None:
    file = CheckpointFile(tmp_path / "sessions" / "checkpoints.json")
    assert file.load() == {}
    one = Checkpoint("codex", "/a.jsonl", 1, 2, 30, 28, 99, lines=3, session_key="k")
    two = Checkpoint("claude", "/b.jsonl", 4, 2, 0, 0, 7)
    file.save({one.key: one, two.key: two})
    assert file.load() == {one.key: one, two.key: two}
    file.save({one.key: one})
    assert file.load() == {one.key: one}
    # Written atomically: no temporary files left behind.
    assert sorted(p.name for p in file.path.parent.iterdir()) == ["checkpoints.json"]


@pytest.mark.parametrize(
    "text",
    ["not json", '{"version": 99, "files": []}', '{"version": 1, "files": [{"x": 1}]}', "[]"],
)
def test_a_corrupt_file_means_no_checkpoints(
    tmp_path: Path, text: str, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "checkpoints.json"
    path.write_text(text)
    assert CheckpointFile(path).load() == {}
    assert "re-imported" in caplog.text


def test_the_file_is_json_a_person_can_read(tmp_path: Path) -> None:
    file = CheckpointFile(tmp_path / "checkpoints.json")
    file.save({("codex", "/a"): Checkpoint("codex", "/a", 1, 2, 3, 3, 4)})
    document = json.loads(file.path.read_text())
    assert document["version"] == 1
    assert document["files"][0]["path"] == "/a"
