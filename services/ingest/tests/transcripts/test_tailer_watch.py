"""Tailing driven by file-system events: the real watcher, tailer, importer (codex parser) and a
real SQLite session store on a temporary directory. The rescan interval is an hour, so every
scan after the first is the watch's doing (or an explicit `wake()` standing in for the periodic
rescan). Tests await the tailer's scan reports, each wait bounded by a timeout; nothing sleeps.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from mcpd.runtime.clock import ManualClock
from mcpd.sessions.store import SearchQuery
from mcpd.storage import open_stores
from mcpd.storage.factory import Stores
from mcpd.testing.templates import SqliteTemplates
from services.ingest.tests.transcripts.ingest_fakes import (
    LineParser,
    MemorySessions,
    line,
    parsers_of,
    source_for,
)
from services.ingest.transcripts.checkpoints import CheckpointFile
from services.ingest.transcripts.importer import Importer
from services.ingest.transcripts.sources import Source
from services.ingest.transcripts.tailer import ScanReport, Tailer
from services.ingest.transcripts.watcher import WatchMode

WAIT_S = 10.0  # an upper bound for a loaded machine, not a pause: waits end at the report
PROJECT = "p"
SESSION = "019c5f6a-49bd-7920-ac67-1dd8e33b0e95"


def _meta() -> str:
    record = {
        "timestamp": "2026-02-15T03:50:40.000Z",
        "type": "session_meta",
        "payload": {"id": SESSION, "cwd": "/repo"},
    }
    return json.dumps(record) + "\n"


def _message(number: int, text: str, role: str = "assistant") -> str:
    kind = "input_text" if role == "user" else "output_text"
    record = {
        "timestamp": f"2026-02-15T03:51:{number:02d}.000Z",
        "type": "response_item",
        "payload": {
            "type": "message",
            "id": f"msg_{number}",
            "role": role,
            "content": [{"type": kind, "text": text}],
        },
    }
    return json.dumps(record) + "\n"


def _mode(tailer: Tailer) -> WatchMode:
    return tailer.watch_mode  # read anew each time (mypy would narrow the property)


class Scans:
    """The tailer's scan reports, to await."""

    def __init__(self) -> None:
        self.queue: asyncio.Queue[ScanReport] = asyncio.Queue()

    def __call__(self, report: ScanReport) -> None:
        self.queue.put_nowait(report)

    async def until(self, done: Callable[[], bool]) -> list[ScanReport]:
        """The reports up to the first scan after which `done()` holds; fails after WAIT_S."""
        seen: list[ScanReport] = []
        async with asyncio.timeout(WAIT_S):
            while True:
                seen.append(await self.queue.get())
                if done():
                    return seen


@dataclass
class Rig:
    root: Path
    path: Path
    stores: Stores
    tailer: Tailer
    scans: Scans

    def events(self) -> dict[str, str]:
        """Event id -> text of the session, from the store."""
        store = self.stores.sessions
        session = store.session_of_key(PROJECT, "codex", SESSION)
        if session is None:
            return {}
        return {
            event.id: event.text
            for turn in store.list_turns(PROJECT, session.id, after_ordinal=0, limit=100)
            for event in store.list_events(PROJECT, turn.id, after_ordinal=0, limit=100)
        }

    def ids_by_text(self) -> dict[str, str]:
        return {text: event_id for event_id, text in self.events().items()}

    def size_seen(self) -> int:
        """The file size the checkpoint records (-1 without one)."""
        checkpoint = self.tailer.checkpoint("codex", self.path)
        return -1 if checkpoint is None else checkpoint.size

    def caught_up(self) -> bool:
        checkpoint = self.tailer.checkpoint("codex", self.path)
        if checkpoint is None or not self.path.exists():
            return False
        stat = self.path.stat()
        return (checkpoint.inode, checkpoint.offset) == (stat.st_ino, stat.st_size)


@pytest.fixture
def stores(tmp_path: Path, sqlite_templates: SqliteTemplates) -> Iterator[Stores]:
    data_dir = sqlite_templates.data_dir(tmp_path / "data")
    with open_stores("sqlite", data_dir=data_dir, postgres_url=None, clickhouse_url=None) as opened:
        yield opened


@pytest.fixture
async def rig(tmp_path: Path, stores: Stores) -> AsyncIterator[Rig]:
    root = tmp_path / "sessions"
    day = root / "2026" / "02" / "15"
    day.mkdir(parents=True)
    path = day / f"rollout-2026-02-15T03-50-40-{SESSION}.jsonl"
    path.write_text(
        _meta() + _message(1, "please fix the flaky parser", "user") + _message(2, "looking")
    )
    scans = Scans()
    tailer = Tailer(
        [Source("codex", "codex", str(root / "**" / "*.jsonl"))],
        Importer(stores.sessions, project=PROJECT),
        CheckpointFile(tmp_path / "data" / "sessions" / "checkpoints.json"),
        interval_s=3600,
        clock=ManualClock(),
        on_scan=scans,
        watch=True,
    )
    async with tailer:
        ready = Rig(root, path, stores, tailer, scans)
        (first,) = await scans.until(ready.caught_up)
        assert (first.full, first.imported, first.events) == (True, 1, 2)
        assert _mode(tailer) == "events"
        yield ready
    assert _mode(tailer) == "off"


async def test_an_appended_line_is_imported_without_waiting_for_the_rescan(rig: Rig) -> None:
    before = rig.ids_by_text()
    with rig.path.open("a", encoding="utf-8") as handle:
        handle.write(_message(3, "the zebracorn parser is fixed"))
    seen = await rig.scans.until(lambda: len(rig.events()) == 3)
    assert not any(report.full for report in seen)  # the changed file only, no listing
    after = rig.ids_by_text()
    assert {text: after[text] for text in before} == before  # ids of unchanged records
    result = rig.stores.sessions.search(
        SearchQuery(project=PROJECT, text="zebracorn", event_types=["assistant_response"], limit=5)
    )
    assert [hit.event.id for hit in result.hits] == [after["the zebracorn parser is fixed"]]


async def test_a_partial_line_waits_for_its_newline(rig: Rig) -> None:
    complete = _message(3, "finished at last")
    with rig.path.open("a", encoding="utf-8") as handle:
        handle.write(complete[:-10])
    seen = await rig.scans.until(lambda: rig.size_seen() == rig.path.stat().st_size)
    assert sum(report.imported for report in seen) == 0
    assert len(rig.events()) == 2
    with rig.path.open("a", encoding="utf-8") as handle:
        handle.write(complete[-10:])
    await rig.scans.until(rig.caught_up)
    assert sorted(rig.events().values()) == [
        "finished at last",
        "looking",
        "please fix the flaky parser",
    ]


async def test_a_truncated_file_is_read_again_and_unchanged_records_keep_their_ids(
    rig: Rig,
) -> None:
    with rig.path.open("a", encoding="utf-8") as handle:
        handle.write(_message(3, "a long answer " * 50))
    await rig.scans.until(lambda: len(rig.events()) == 3)
    before = rig.ids_by_text()
    inode = rig.path.stat().st_ino
    # Rewritten in place, shorter than what was imported: a record kept, two gone, one new.
    rig.path.write_text(
        _meta() + _message(1, "please fix the flaky parser", "user") + _message(4, "redone")
    )
    assert rig.path.stat().st_ino == inode
    seen = await rig.scans.until(
        lambda: (
            rig.caught_up() and set(rig.ids_by_text()) == {"please fix the flaky parser", "redone"}
        )
    )
    assert sum(report.restarted for report in seen) >= 1
    assert not any(report.full for report in seen)
    after = rig.ids_by_text()
    assert after["please fix the flaky parser"] == before["please fix the flaky parser"]


async def test_a_rotated_file_is_read_again_from_its_start(rig: Rig) -> None:
    before = rig.ids_by_text()
    # Rotation: the file moves aside (out of the glob) and a new one takes its name; the new
    # file is shorter than the old offset, so continuing from there would read nothing.
    os.replace(rig.path, rig.path.with_name(rig.path.name + ".1"))
    rig.path.write_text(
        _meta() + _message(1, "please fix the flaky parser", "user") + _message(5, "ok")
    )
    seen = await rig.scans.until(
        lambda: rig.caught_up() and set(rig.ids_by_text()) == {"please fix the flaky parser", "ok"}
    )
    assert not any(report.full for report in seen)
    checkpoint = rig.tailer.checkpoint("codex", rig.path)
    assert checkpoint is not None
    assert checkpoint.inode == rig.path.stat().st_ino
    after = rig.ids_by_text()
    assert after["please fix the flaky parser"] == before["please fix the flaky parser"]
    # Appending to the new file is seen too (the watch is on the directory, not the old inode).
    with rig.path.open("a", encoding="utf-8") as handle:
        handle.write(_message(6, "after the rotation"))
    await rig.scans.until(lambda: "after the rotation" in rig.ids_by_text())
    assert rig.ids_by_text()["ok"] == after["ok"]


async def test_a_file_in_a_new_directory_is_found_by_a_full_scan(rig: Rig) -> None:
    other = rig.root / "2026" / "02" / "16" / "rollout-other.jsonl"
    other.parent.mkdir()
    shutil.copy(rig.path, other)  # another file of the same session key: same session
    seen = await rig.scans.until(lambda: rig.tailer.checkpoint("codex", other) is not None)
    assert any(report.full for report in seen)


async def test_a_root_that_appears_later_is_watched_after_the_rescan(tmp_path: Path) -> None:
    root = tmp_path / "later"
    store = MemorySessions()
    scans = Scans()
    tailer = Tailer(
        [source_for(root / "**" / "*.jsonl")],
        Importer(store, project=PROJECT, parsers=parsers_of(LineParser())),
        CheckpointFile(tmp_path / "checkpoints.json"),
        interval_s=3600,
        clock=ManualClock(),
        on_scan=scans,
        watch=True,
    )
    async with tailer:
        await scans.until(lambda: True)
        assert _mode(tailer) == "idle"
        (root / "a").mkdir(parents=True)
        path = root / "a" / "s1.jsonl"
        path.write_text(line("u1", "hello"))
        tailer.wake()  # what the periodic rescan does, an hour early
        await scans.until(lambda: store.texts(PROJECT) == ["hello"])
        assert _mode(tailer) == "events"
        with path.open("a", encoding="utf-8") as handle:
            handle.write(line("a1", "watched now"))
        seen = await scans.until(lambda: store.texts(PROJECT) == ["hello", "watched now"])
        assert not any(report.full for report in seen)
        # Removed: the delete events forget its file, and the watch goes idle.
        shutil.rmtree(root)
        await scans.until(lambda: tailer.checkpoint("fake", path) is None)
        assert _mode(tailer) == "idle"
        # Made again (another inode, unwatched): the next rescan re-arms the watch.
        (root / "b").mkdir(parents=True)
        tailer.wake()
        await scans.until(lambda: _mode(tailer) == "events")
        again = root / "b" / "s2.jsonl"
        again.write_text(line("u1", "second life"))
        seen = await scans.until(lambda: "second life" in store.texts(PROJECT))
        assert not any(report.full for report in seen)
