"""The file watch: which paths a source's glob matches, which roots are watched, and
`SourceWatcher` on a real directory (native events, the polling fallback, a clean stop).
Waits are on the watcher's own callbacks, each bounded by a timeout; nothing sleeps."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import watchfiles

from services.ingest.transcripts.sources import STANDARD_SOURCES, Source
from services.ingest.transcripts.watcher import (
    SourceWatcher,
    WatchMode,
    source_matches,
    watch_roots,
)

WAIT_S = 10.0  # an upper bound for the machine, not a pause: waits end when the event comes

Changes = set[tuple[watchfiles.Change, str]]


class Seen:
    """The path sets the watcher reported, to await."""

    def __init__(self) -> None:
        self.queue: asyncio.Queue[set[Path]] = asyncio.Queue()

    def __call__(self, paths: set[Path]) -> None:
        self.queue.put_nowait(paths)

    async def path(self, wanted: Path) -> None:
        """Returns once `wanted` is among the reported paths; fails after WAIT_S."""
        async with asyncio.timeout(WAIT_S):
            while wanted not in await self.queue.get():
                pass


def _mode(watcher: SourceWatcher) -> WatchMode:
    return watcher.mode  # read anew each time (mypy would narrow the property)


def _standard(home: Path) -> dict[str, Source]:
    return {source.name: source.expanded(home) for source in STANDARD_SOURCES}


@pytest.mark.parametrize(
    ("name", "relative", "matches"),
    [
        ("codex", ".codex/sessions/r.jsonl", True),  # ** matches no directory at all
        ("codex", ".codex/sessions/2026/02/15/rollout-x.jsonl", True),
        ("codex", ".codex/sessions/2026/02/15/rollout-x.json", False),
        ("codex", ".codex/sessions", False),
        ("codex", ".codex/other/r.jsonl", False),
        ("qwen-code", ".qwen/projects/p/chats/c.jsonl", True),
        ("qwen-code", ".qwen/projects/p/q/chats/c.jsonl", False),
        ("kimi-cli", ".kimi/sessions/a/b/wire.jsonl", True),
        ("kimi-cli", ".kimi/sessions/a/b/other.jsonl", False),
        (
            "claude-cowork",
            "Library/Application Support/Claude/local-agent-mode-sessions"
            "/a/b/.claude/projects/p/s.jsonl",
            True,
        ),
        (
            "claude-cowork",
            "Library/Application Support/Claude/local-agent-mode-sessions/a/projects/s.jsonl",
            False,
        ),
    ],
)
def test_source_matches_follows_the_glob(
    tmp_path: Path, name: str, relative: str, matches: bool
) -> None:
    assert source_matches(_standard(tmp_path)[name], tmp_path / relative) is matches


def test_source_matches_agrees_with_the_files_a_source_lists(tmp_path: Path) -> None:
    home = tmp_path / "home"
    for relative in [
        ".codex/sessions/a.jsonl",
        ".codex/sessions/2026/02/15/b.jsonl",
        ".codex/sessions/2026/02/15/b.jsonl.1",
        ".codex/sessions/.hidden/c.jsonl",
        ".qwen/projects/p/chats/q.jsonl",
        ".qwen/projects/p/x/chats/q.jsonl",
        ".kimi/sessions/s/wire.jsonl",
        ".kimi/sessions/s/meta.jsonl",
        ".pi/agent/sessions/p/s.jsonl",
        ".prime/agent/session-artifacts/r/child.jsonl",
    ]:
        path = home / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("{}\n")
    everything = [path for path in home.rglob("*") if path.is_file()]
    for source in _standard(home).values():
        listed = set(source.files())
        assert {path for path in everything if source_matches(source, path)} == listed, source


def test_a_glob_without_wildcards_matches_its_own_file_only(tmp_path: Path) -> None:
    source = Source("one", "codex", str(tmp_path / "t.jsonl"))
    assert source_matches(source, tmp_path / "t.jsonl")
    assert not source_matches(source, tmp_path / "t.jsonl" / "x")
    assert not source_matches(source, tmp_path / "u.jsonl")
    assert not source_matches(Source("dirs", "codex", str(tmp_path / "**")), tmp_path / "t.jsonl")


def test_watch_roots_leave_out_roots_inside_another(tmp_path: Path) -> None:
    sources = [
        Source("a", "codex", str(tmp_path / "agents" / "**" / "*.jsonl")),
        Source("b", "codex", str(tmp_path / "agents" / "codex" / "*.jsonl")),
        Source("c", "codex", str(tmp_path / "other" / "*" / "*.jsonl")),
        Source("d", "codex", str(tmp_path / "agents" / "**" / "*.json")),
    ]
    assert watch_roots(sources) == [tmp_path / "agents", tmp_path / "other"]


async def test_a_write_under_a_root_is_reported_with_native_events(tmp_path: Path) -> None:
    seen = Seen()
    async with SourceWatcher([tmp_path], seen) as watcher:
        assert _mode(watcher) == "events"
        path = tmp_path / "deep" / "er"
        path.mkdir(parents=True)
        await seen.path(tmp_path / "deep")
        (path / "t.jsonl").write_text("{}\n")
        await seen.path(path / "t.jsonl")


async def test_without_native_events_the_watch_polls_and_says_so(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    forced: list[object] = []

    async def no_inotify(*paths: Path | str, **options: Any) -> AsyncIterator[Changes]:
        forced.append(options["force_polling"])
        if not options["force_polling"]:
            # What watchfiles raises when inotify's watch limit is reached.
            raise OSError("OS file watch limit reached. about [...] (MaxFilesWatch)")
        async for changes in watchfiles.awatch(*paths, **options):
            yield changes

    seen = Seen()
    caplog.set_level(logging.WARNING, logger="mcpd.ingest.transcripts")
    async with SourceWatcher([tmp_path], seen, poll_delay_ms=50, awatch=no_inotify) as watcher:
        assert _mode(watcher) == "polling"
        assert forced == [None, True]
        assert "polling the transcript directories instead" in caplog.text
        (tmp_path / "t.jsonl").write_text("{}\n")
        await seen.path(tmp_path / "t.jsonl")


async def test_when_polling_fails_too_the_rescan_is_left_and_retries_the_watch(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    attempts: list[object] = []

    async def broken(*paths: Path | str, **options: Any) -> AsyncIterator[Changes]:
        attempts.append(options["force_polling"])
        raise RuntimeError("Error creating poll watcher: no")
        yield set()  # an async generator, like watchfiles.awatch

    caplog.set_level(logging.WARNING, logger="mcpd.ingest.transcripts")
    async with SourceWatcher([tmp_path], Seen(), awatch=broken) as watcher:
        assert _mode(watcher) == "off"
        assert attempts == [None, True]
        assert "relying on the periodic rescan" in caplog.text
        await watcher.refresh()  # what every rescan does: try again
        assert attempts == [None, True, True]


async def test_a_root_that_appears_is_watched_after_a_refresh(tmp_path: Path) -> None:
    root = tmp_path / "later"
    seen = Seen()
    async with SourceWatcher([root], seen) as watcher:
        assert _mode(watcher) == "idle"
        root.mkdir()
        await watcher.refresh()
        assert _mode(watcher) == "events"
        (root / "t.jsonl").write_text("{}\n")
        await seen.path(root / "t.jsonl")


async def test_closing_sets_the_stop_event_and_ends_the_watch(tmp_path: Path) -> None:
    calls: list[dict[str, Any]] = []
    ended: list[bool] = []

    async def recording(*paths: Path | str, **options: Any) -> AsyncIterator[Changes]:
        calls.append(options)
        try:
            async for changes in watchfiles.awatch(*paths, **options):
                yield changes
        finally:
            ended.append(True)

    watcher = SourceWatcher([tmp_path], Seen(), awatch=recording)
    async with asyncio.timeout(WAIT_S):
        async with watcher:
            assert _mode(watcher) == "events"
    assert _mode(watcher) == "off"
    (options,) = calls
    assert options["stop_event"].is_set()
    assert options["rust_timeout"] == 0  # no timeout: only the stop event ends it
    assert ended == [True]
    await watcher.aclose()  # idempotent
    await watcher.refresh()  # a no-op once closed
    assert len(calls) == 1
