"""Tailing: growth, partial lines, truncation, rotation, persistence across restarts. Driven
with explicit `scan_once()` calls (and scan callbacks for the loop): nothing sleeps."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from mcpd.runtime.clock import ManualClock
from services.ingest.tests.transcripts.ingest_fakes import (
    LineParser,
    MemorySessions,
    line,
    parsers_of,
    source_for,
)
from services.ingest.transcripts.checkpoints import CheckpointFile
from services.ingest.transcripts.importer import Importer
from services.ingest.transcripts.tailer import ScanReport, Tailer


class Rig:
    """A watched directory, a store, a parser that records what it parsed, and the tailer."""

    def __init__(self, tmp_path: Path, store: MemorySessions | None = None) -> None:
        self.dir = tmp_path / "watched"
        self.dir.mkdir(exist_ok=True)
        self.store = store or MemorySessions()
        self.parser = LineParser()
        self.checkpoints = CheckpointFile(tmp_path / "data" / "checkpoints.json")
        self.source = source_for(self.dir / "**" / "*.jsonl")
        self.tailer = Tailer(
            [self.source],
            Importer(self.store, project="p", parsers=parsers_of(self.parser)),
            self.checkpoints,
            interval_s=3600,
            clock=ManualClock(),
        )

    def write(self, name: str, text: str, mode: str = "a") -> Path:
        path = self.dir / name
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open(mode, encoding="utf-8") as handle:
            handle.write(text)
        return path


async def test_a_new_file_is_imported_once_and_unchanged_files_are_not_reparsed(
    tmp_path: Path,
) -> None:
    rig = Rig(tmp_path)
    path = rig.write("2026/s1.jsonl", line("u1", "hello") + line("a1", "hi"))
    report = await rig.tailer.scan_once()
    assert (report.files, report.imported, report.events, report.restarted) == (1, 1, 2, 0)
    assert rig.store.texts() == ["hello", "hi"]
    checkpoint = rig.tailer.checkpoint("fake", path)
    assert checkpoint is not None
    assert (checkpoint.offset, checkpoint.size, checkpoint.lines) == (
        path.stat().st_size,
        path.stat().st_size,
        2,
    )
    assert checkpoint.session_key == "s1"
    again = await rig.tailer.scan_once()
    assert (again.files, again.imported) == (1, 0)
    assert rig.parser.parsed == [str(path)]


async def test_an_appended_line_is_imported_and_a_partial_one_waits_for_its_newline(
    tmp_path: Path,
) -> None:
    rig = Rig(tmp_path)
    path = rig.write("s1.jsonl", line("u1", "hello"))
    await rig.tailer.scan_once()
    partial = line("a1", "still typing")
    rig.write("s1.jsonl", partial[:-5])
    report = await rig.tailer.scan_once()
    assert report.imported == 0
    assert len(rig.parser.parsed) == 1  # nothing parsed for a partial line
    checkpoint = rig.tailer.checkpoint("fake", path)
    assert checkpoint is not None
    assert checkpoint.size == path.stat().st_size
    assert checkpoint.offset < checkpoint.size
    rig.write("s1.jsonl", partial[-5:])
    report = await rig.tailer.scan_once()
    assert (report.imported, report.events, report.restarted) == (1, 2, 0)
    assert rig.store.texts() == ["hello", "still typing"]
    assert rig.parser.seen_lines[-1][-1] == partial[:-1]


async def test_a_truncated_file_is_read_again_from_zero(tmp_path: Path) -> None:
    rig = Rig(tmp_path)
    rig.write("s1.jsonl", line("u1", "old prompt") + line("a1", "old answer"))
    await rig.tailer.scan_once()
    rig.write("s1.jsonl", line("u9", "new"), mode="w")
    report = await rig.tailer.scan_once()
    assert (report.imported, report.restarted, report.events) == (1, 1, 1)
    assert rig.store.texts() == ["new"]


async def test_a_replaced_file_is_read_again_from_zero(tmp_path: Path) -> None:
    rig = Rig(tmp_path)
    path = rig.write("s1.jsonl", line("u1", "first") + line("a1", "second"))
    await rig.tailer.scan_once()
    rotated = tmp_path / "rotated.jsonl"
    rotated.write_text(line("u1", "first") + line("a1", "second") + line("a2", "third"))
    os.replace(rotated, path)
    report = await rig.tailer.scan_once()
    assert (report.imported, report.restarted, report.events) == (1, 1, 3)
    checkpoint = rig.tailer.checkpoint("fake", path)
    assert checkpoint is not None
    assert checkpoint.inode == path.stat().st_ino


async def test_checkpoints_survive_a_restart(tmp_path: Path) -> None:
    first = Rig(tmp_path)
    path = first.write("s1.jsonl", line("u1", "hello"))
    await first.tailer.scan_once()
    restarted = Rig(tmp_path, store=first.store)
    report = await restarted.tailer.scan_once()
    assert (report.files, report.imported) == (1, 0)
    assert restarted.parser.parsed == []
    first.write("s1.jsonl", line("a1", "after the restart"))
    report = await restarted.tailer.scan_once()
    assert report.imported == 1
    assert restarted.store.texts() == ["hello", "after the restart"]
    assert restarted.parser.parsed == [str(path)]


async def test_a_checkpoint_whose_session_is_gone_from_the_store_is_not_trusted(
    tmp_path: Path,
) -> None:
    first = Rig(tmp_path)
    first.write("s1.jsonl", line("u1", "hello"))
    await first.tailer.scan_once()
    reset = Rig(tmp_path, store=MemorySessions())  # the read model was deleted
    report = await reset.tailer.scan_once()
    assert report.imported == 1
    assert reset.store.texts() == ["hello"]


async def test_deleted_files_are_forgotten(tmp_path: Path) -> None:
    rig = Rig(tmp_path)
    path = rig.write("s1.jsonl", line("u1", "hello"))
    await rig.tailer.scan_once()
    path.unlink()
    report = await rig.tailer.scan_once()
    assert (report.files, report.forgotten) == (0, 1)
    assert rig.tailer.checkpoint("fake", path) is None
    assert rig.checkpoints.load() == {}


async def test_a_failed_write_keeps_the_old_checkpoint_and_is_retried(tmp_path: Path) -> None:
    rig = Rig(tmp_path)
    path = rig.write("s1.jsonl", line("u1", "hello"))
    await rig.tailer.scan_once()
    before = rig.tailer.checkpoint("fake", path)
    rig.write("s1.jsonl", line("a1", "world"))
    rig.store.fail_with = OSError("disk full")
    report = await rig.tailer.scan_once()
    assert (report.imported, report.failed) == (0, 1)
    assert rig.tailer.checkpoint("fake", path) == before
    rig.store.fail_with = None
    report = await rig.tailer.scan_once()
    assert (report.imported, report.failed) == (1, 0)
    assert rig.store.texts() == ["hello", "world"]


async def test_bad_lines_are_reported_once_not_on_every_growth(tmp_path: Path) -> None:
    rig = Rig(tmp_path)
    path = rig.write("s1.jsonl", line("u1", "hello") + "{bad\n")
    report = await rig.tailer.scan_once()
    assert [(e.file, e.line) for e in report.errors] == [(str(path), 2)]
    rig.write("s1.jsonl", line("a1", "more") + "[]\n")
    report = await rig.tailer.scan_once()
    assert [(e.file, e.line) for e in report.errors] == [(str(path), 4)]
    assert rig.store.texts() == ["hello", "more"]


async def test_a_scan_of_changed_paths_reads_only_the_files_the_globs_match(
    tmp_path: Path,
) -> None:
    rig = Rig(tmp_path)
    one = rig.write("s1.jsonl", line("u1", "hello"))
    two = rig.write("s2.jsonl", line("u1", "other"))
    await rig.tailer.scan_once()
    rig.write("s1.jsonl", line("a1", "seen"))
    rig.write("s2.jsonl", line("a1", "not yet"))
    stray = rig.write("notes.txt", "not a transcript\n")
    report = await rig.tailer.scan_changed({one, stray, tmp_path / "elsewhere.jsonl"})
    assert (report.full, report.files, report.imported, report.events) == (False, 1, 1, 2)
    assert rig.store.texts() == ["hello", "seen", "other"]
    # A changed path that is gone forgets its checkpoint.
    one.unlink()
    report = await rig.tailer.scan_changed({one})
    assert (report.full, report.forgotten) == (False, 1)
    assert rig.tailer.checkpoint("fake", one) is None
    assert rig.tailer.checkpoint("fake", two) is not None
    # A new directory means a full scan: its files may predate its watch.
    rig.write("new/s3.jsonl", line("u1", "in a new directory"))
    report = await rig.tailer.scan_changed({rig.dir / "new"})
    assert (report.full, report.files, report.imported) == (True, 2, 2)
    assert "not yet" in rig.store.texts()


async def test_the_loop_scans_at_start_and_when_woken_then_stops(tmp_path: Path) -> None:
    rig = Rig(tmp_path)
    rig.write("s1.jsonl", line("u1", "hello"))
    reports: asyncio.Queue[ScanReport] = asyncio.Queue()
    tailer = Tailer(
        [rig.source],
        Importer(rig.store, project="p", parsers=parsers_of(rig.parser)),
        rig.checkpoints,
        interval_s=3600,  # only the first scan and wake() trigger scans in this test
        clock=ManualClock(),
        on_scan=reports.put_nowait,
    )
    async with tailer:
        first = await asyncio.wait_for(reports.get(), 30)
        assert first.imported == 1
        rig.write("s1.jsonl", line("a1", "world"))
        tailer.wake()
        second = await asyncio.wait_for(reports.get(), 30)
        assert (second.imported, second.events) == (1, 2)
    assert rig.store.texts() == ["hello", "world"]
    assert rig.checkpoints.load() != {}
    await tailer.aclose()  # idempotent


async def test_a_stopped_tailer_scans_no_further(tmp_path: Path) -> None:
    rig = Rig(tmp_path)
    rig.write("s1.jsonl", line("u1", "hello"))
    await rig.tailer.aclose()
    report = await rig.tailer.scan_once()
    assert report.interrupted
    assert report.imported == 0


def test_the_interval_must_be_positive(tmp_path: Path) -> None:
    rig = Rig(tmp_path)
    with pytest.raises(ValueError, match="interval_s"):
        Tailer(
            [], Importer(rig.store, project="p"), rig.checkpoints, interval_s=0, clock=ManualClock()
        )
