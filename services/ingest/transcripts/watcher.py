"""File-system events for the transcript tailer, through `watchfiles`.

`SourceWatcher` watches the sources' root directories recursively with `watchfiles.awatch`
(the Rust `notify` crate: inotify on Linux, FSEvents on macOS), groups the changes of at most
`debounce_ms` (a change is reported once `step_ms` pass without another) and hands their paths
to a callback: the tailer's `wake`, which scans those files at once. Events are a fast path,
not the source of truth: the tailer's periodic rescan stays the safety net (an inotify queue
overflow drops events silently; a file written into a brand-new directory before its watch is
added is seen only by a scan) and calls `refresh()` after each scan, which re-arms the watch
when the roots that exist changed: one that did not exist yet (an agent installed after the
daemon started) or one removed and made again (another inode).

Without native events (the inotify instance or watch limit reached) the watch falls back to
polling every `poll_delay_ms`, with a warning; `watchfiles` itself polls when the kernel has no
inotify at all (ENOSYS) or `WATCHFILES_FORCE_POLLING` is set. Should polling fail too, the
periodic rescan alone remains until a later `refresh()` tries again.

`watchfiles.awatch` gets a stop event and no timeout: `aclose()` (or a re-arm) sets it and the
watch thread returns within `step_ms`. Creating the watch walks the roots in the event loop's
thread (adding one inotify watch per directory), which is quick for transcript trees.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from fnmatch import fnmatchcase
from pathlib import Path
from types import TracebackType
from typing import Literal, Self

import watchfiles

from services.ingest.transcripts.sources import Source

__all__ = ["Awatch", "SourceWatcher", "WatchMode", "source_matches", "watch_roots"]

log = logging.getLogger("mcpd.ingest.transcripts")

# events: native file-system events; polling: watchfiles polls the roots; idle: no root exists
# (yet); off: not started, closed, or watching failed until the next refresh().
WatchMode = Literal["events", "polling", "idle", "off"]

# The signature of `watchfiles.awatch` (injectable for tests).
Awatch = Callable[..., AsyncIterator[set[tuple[watchfiles.Change, str]]]]

# A root that exists: its path, device and inode (a root made again is another root).
_Root = tuple[str, int, int]


def watch_roots(sources: Iterable[Source]) -> list[Path]:
    """What to watch for `sources`: each glob's root (a directory, or the file a glob without
    wildcards names), leaving out roots inside another one (every watch is recursive)."""
    kept: list[Path] = []
    for root in sorted({source.root for source in sources}, key=lambda path: len(path.parts)):
        if not any(root.is_relative_to(outer) for outer in kept):
            kept.append(root)
    return sorted(kept)


def source_matches(source: Source, path: Path) -> bool:
    """Whether `source`'s glob matches the file `path`, as `Source.files` would list it (`**`
    is any number of directories, none included; a trailing `**` matches directories only).
    No I/O: whether `path` is a file is the caller's business."""
    root = source.root
    if not path.is_relative_to(root):
        return False
    return _match(path.parts[len(root.parts) :], Path(source.glob).parts[len(root.parts) :])


def _match(parts: Sequence[str], pattern: Sequence[str]) -> bool:
    if not pattern:
        return not parts
    head, tail = pattern[0], pattern[1:]
    if head == "**":
        # Zero or more directories, then the rest of the pattern on at least one part.
        return bool(tail) and any(_match(parts[skip:], tail) for skip in range(len(parts)))
    return bool(parts) and fnmatchcase(parts[0], head) and _match(parts[1:], tail)


class _StopSignal(asyncio.Event):
    """The stop event of one `awatch`. The watch thread asks `is_set()` every step once the
    watch exists, so the first call reports the watch armed (in the loop's thread)."""

    def __init__(
        self, loop: asyncio.AbstractEventLoop, on_armed: Callable[[_StopSignal], None]
    ) -> None:
        super().__init__()
        self._loop = loop
        self._on_armed: Callable[[_StopSignal], None] | None = on_armed

    @property
    def polled(self) -> bool:
        """Whether the watch thread has asked: the watch exists."""
        return self._on_armed is None

    def is_set(self) -> bool:
        on_armed, self._on_armed = self._on_armed, None
        if on_armed is not None:
            with contextlib.suppress(RuntimeError):  # the loop is closed: nobody waits
                self._loop.call_soon_threadsafe(on_armed, self)
        return super().is_set()


class SourceWatcher:
    """Calls `on_change` with the paths that changed under `roots` (from the event loop).

    An async context manager: entering arms the watch (waiting at most `settle_timeout_s`),
    leaving stops it. `refresh()` re-arms it when the existing roots changed.
    """

    def __init__(
        self,
        roots: Iterable[Path],
        on_change: Callable[[set[Path]], None],
        *,
        debounce_ms: int = 200,
        step_ms: int = 50,
        poll_delay_ms: int = 1000,
        settle_timeout_s: float = 5.0,
        awatch: Awatch = watchfiles.awatch,
    ) -> None:
        self._roots = tuple(roots)
        self._on_change = on_change
        self._debounce_ms = debounce_ms
        self._step_ms = step_ms
        self._poll_delay_ms = poll_delay_ms
        self._settle_timeout_s = settle_timeout_s
        self._awatch = awatch
        self._mode: WatchMode = "off"
        self._polling = False  # native events failed: poll from now on
        self._failed = False  # the last watch ended in an error: re-arm on the next refresh
        self._wanted: frozenset[_Root] | None = None  # the roots that existed at the last refresh
        self._stop: _StopSignal | None = None  # of the running watch
        self._restart = asyncio.Event()  # (re)start with `_wanted`, or end when closing
        self._settled = asyncio.Event()  # the watch is armed, idle or failed
        self._closing = False
        self._task: asyncio.Task[None] | None = None

    @property
    def roots(self) -> tuple[Path, ...]:
        """What is watched, where it exists."""
        return self._roots

    @property
    def mode(self) -> WatchMode:
        """How changes are noticed now."""
        return self._mode

    async def __aenter__(self) -> Self:
        if self._task is None and not self._closing:
            self._task = asyncio.create_task(self._run(), name="transcript-watcher")
            await self.refresh()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Stop watching: the watch thread returns within `step_ms`. Idempotent."""
        self._closing = True
        if self._stop is not None:
            self._stop.set()
        self._restart.set()
        task, self._task = self._task, None
        if task is not None:
            await task
        self._mode = "off"
        self._settled.set()

    async def refresh(self) -> None:
        """Re-arm the watch if the roots that exist are not those watched (or the last watch
        failed); returns once it is settled, or after `settle_timeout_s`."""
        if self._task is None or self._closing:
            return
        wanted = await asyncio.to_thread(self._existing_roots)
        if wanted == self._wanted and not self._failed:
            return
        if self._wanted is not None:
            log.info(
                "re-arming the transcript watch",
                extra={"roots": sorted(root for root, _, _ in wanted)},
            )
        self._wanted, self._failed = wanted, False
        self._settled.clear()
        if self._stop is not None:
            self._stop.set()
        self._restart.set()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._settled.wait(), self._settle_timeout_s)

    def _existing_roots(self) -> frozenset[_Root]:
        found: set[_Root] = set()
        for root in self._roots:
            try:
                stat = root.stat()
            except OSError:
                continue
            found.add((str(root), stat.st_dev, stat.st_ino))
        return frozenset(found)

    async def _run(self) -> None:
        while True:
            await self._restart.wait()
            self._restart.clear()
            if self._closing:
                return
            roots = self._wanted or frozenset()
            if not roots:
                self._mode = "idle"
                self._settled.set()
                continue
            try:
                await self._watch(sorted(root for root, _, _ in roots))
            except Exception:  # a bug here must not end tailing: the rescan still runs
                log.exception("transcript watch failed; relying on the periodic rescan")
                self._fail()

    async def _watch(self, paths: list[str]) -> None:
        polling = self._polling
        stop = _StopSignal(asyncio.get_running_loop(), self._armed)
        self._stop = stop
        try:
            changes_seen = self._awatch(
                *paths,
                watch_filter=None,
                debounce=self._debounce_ms,
                step=self._step_ms,
                stop_event=stop,
                rust_timeout=0,  # no timeouts: the stop event ends the watch
                force_polling=True if polling else None,  # None: watchfiles decides (env, WSL)
                poll_delay_ms=self._poll_delay_ms,
                recursive=True,
                ignore_permission_denied=True,
            )
            async for changes in changes_seen:
                self._deliver({Path(path) for _, path in changes})
        except FileNotFoundError as exc:  # a root vanished since the refresh
            log.info(
                "a transcript root vanished; watching again after the next rescan",
                extra={"error": str(exc)},
            )
            self._fail()
        except (OSError, RuntimeError) as exc:  # RuntimeError: WatchfilesRustInternalError
            if polling or stop.polled:
                # Polling failed too, or the watch broke while running: the rescan re-arms it.
                log.warning(
                    "watching transcript files failed; relying on the periodic rescan",
                    extra={"error": str(exc), "polling": polling},
                )
                self._fail()
            else:
                # No native watch could be made (inotify's instance or watch limit): poll.
                log.warning(
                    "file-system events unavailable; polling the transcript directories instead",
                    extra={"error": str(exc), "poll_delay_ms": self._poll_delay_ms},
                )
                self._polling = True
                self._restart.set()
        finally:
            self._stop = None

    def _armed(self, stop: _StopSignal) -> None:
        if stop is self._stop and not stop.is_set():
            self._mode = "polling" if self._polling else "events"
            self._settled.set()

    def _fail(self) -> None:
        self._failed = True
        self._mode = "off"
        self._settled.set()

    def _deliver(self, paths: set[Path]) -> None:
        try:
            self._on_change(paths)
        except Exception:  # the callback's bug must not end the watch
            log.exception("transcript change callback failed")
