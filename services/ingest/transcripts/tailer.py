"""Tailing transcript sources into the session read model while agents write them.

`Tailer` is an async context manager: on entry it loads the checkpoints, arms the file watch
(with `watch=True`; `SourceWatcher`, file-system events through `watchfiles`) and starts a loop
that scans every source now and then every `interval_s`. Between those full rescans, `wake()`
scans sooner: with the paths that changed (what the watcher passes) only those files are
looked at; without, every source is. A directory among the changed paths means a full scan
(files made in a new directory may predate its watch). The full rescan is the safety net for
lost events and re-arms the watch when a source's root appears. A scan compares each file with
its checkpoint (inode/device, size, offset, mtime):

- new file, or grown by at least one complete line: re-import it (`Importer` re-reads the whole
  file: O(file) per change, ids are stable and the write replaces the session atomically);
- grown by a partial line only: remember the size, parse nothing (no line without its newline);
- truncated below the imported offset, rewritten in place, or replaced (another inode at the
  same path): read it again from zero;
- gone: forget its checkpoint (its session stays in the read model).

A checkpoint is trusted only while the store still has its session, checked once per file per
process, so a reset read model is refilled. A failed write keeps the old checkpoint: the file is
retried on its next scan. Bad lines are ingest errors, logged once (when first seen), never
a stop. Scans never overlap and run in a worker thread; stopping stops the watch and waits for
the file being imported, no longer.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import os
import threading
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Self

from mcpd.runtime.clock import Clock
from services.ingest.transcripts.checkpoints import Change, Checkpoint, CheckpointFile, classify
from services.ingest.transcripts.importer import Importer, ImportOutcome, IngestError
from services.ingest.transcripts.sources import Source
from services.ingest.transcripts.watcher import (
    SourceWatcher,
    WatchMode,
    source_matches,
    watch_roots,
)

__all__ = ["ScanReport", "Tailer"]

log = logging.getLogger("mcpd.ingest.transcripts")

# Ingest errors logged per scan; the rest are counted in one line.
_LOGGED_ERRORS = 20
_CHUNK = 64 * 1024


@dataclass(slots=True)
class ScanReport:
    """What one scan did."""

    files: int = 0  # files the sources' globs matched
    imported: int = 0  # files (re-)imported
    restarted: int = 0  # of those, read again from zero (truncated, rewritten or replaced)
    events: int = 0  # events written
    errors: list[IngestError] = field(default_factory=list)  # ingest errors seen for the first time
    failed: int = 0  # files whose import failed (retried on the next scan)
    forgotten: int = 0  # checkpoints dropped because their file is gone
    interrupted: bool = False  # stopped part-way by shutdown
    elapsed_s: float = 0.0
    full: bool = True  # every source listed (else only the files that changed)


class Tailer:
    """Keeps the session read model in step with the transcript files of `sources`."""

    def __init__(
        self,
        sources: Sequence[Source],
        importer: Importer,
        checkpoints: CheckpointFile,
        *,
        interval_s: float,
        clock: Clock,
        on_scan: Callable[[ScanReport], None] | None = None,
        watch: bool = False,
    ) -> None:
        """`on_scan` hears of every scan the loop runs; `watch` scans changed files when
        file-system events say so, not only every `interval_s`."""
        if not interval_s > 0:
            raise ValueError(f"interval_s must be positive, got {interval_s!r}")
        self._sources = tuple(sources)
        self._importer = importer
        self._file = checkpoints
        self._interval_s = interval_s
        self._clock = clock
        self._on_scan = on_scan
        self._checkpoints: dict[tuple[str, str], Checkpoint] | None = None
        self._verified: set[tuple[str, str]] = set()
        self._lock = asyncio.Lock()
        self._wake = asyncio.Event()
        self._full_due = True  # wake() without paths: list every source
        self._changed: set[Path] = set()  # paths to look at on the next scan
        self._watcher = SourceWatcher(watch_roots(self._sources), self.wake) if watch else None
        # Read by the scan thread between files: set on shutdown.
        self._halt = threading.Event()
        self._task: asyncio.Task[None] | None = None

    @property
    def sources(self) -> tuple[Source, ...]:
        """The sources this tailer watches."""
        return self._sources

    @property
    def watch_mode(self) -> WatchMode:
        """How changes are noticed between rescans ("off" without a watch)."""
        return "off" if self._watcher is None else self._watcher.mode

    def checkpoint(self, source: str, path: Path | str) -> Checkpoint | None:
        """The checkpoint of one file, if it has one (after the first scan)."""
        return (self._checkpoints or {}).get((source, str(path)))

    async def __aenter__(self) -> Self:
        await self._load()
        if self._watcher is not None:
            # Armed before the first scan lists the files: nothing written after it is missed.
            await self._watcher.__aenter__()
        self._task = asyncio.create_task(self._run(), name="transcript-tailer")
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Stop scanning: the current scan ends after the file it is importing. Idempotent."""
        self._halt.set()
        self._wake.set()
        if self._watcher is not None:
            await self._watcher.aclose()
        task, self._task = self._task, None
        if task is not None:
            await task

    def wake(self, paths: Iterable[Path] | None = None) -> None:
        """Scan now instead of at the end of the interval: only `paths` (files or directories
        that changed), or every source when None."""
        if paths is None:
            self._full_due = True
        else:
            self._changed.update(paths)
        self._wake.set()

    async def scan_once(self) -> ScanReport:
        """One scan of every source (scans never overlap), persisting the checkpoints."""
        async with self._lock:
            await self._load()
            report = await asyncio.to_thread(self._scan)
        self._log(report)
        return report

    async def scan_changed(self, paths: Collection[Path]) -> ScanReport:
        """One scan of the files among `paths` that a source's glob matches (a full scan when
        one of them is a directory), persisting the checkpoints."""
        async with self._lock:
            await self._load()
            report = await asyncio.to_thread(self._scan_changed, paths)
        self._log(report)
        return report

    @staticmethod
    def _log(report: ScanReport) -> None:
        if report.imported or report.failed or report.errors:
            log.info(
                "transcripts scanned",
                extra={
                    "files": report.files,
                    "imported": report.imported,
                    "events": report.events,
                    "errors": len(report.errors),
                    "failed": report.failed,
                },
            )

    async def _load(self) -> None:
        if self._checkpoints is None:
            self._checkpoints = await asyncio.to_thread(self._file.load)

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        next_full = loop.time()
        while not self._halt.is_set():
            full = self._full_due or loop.time() >= next_full
            changed, self._changed = self._changed, set()
            self._full_due = False
            report: ScanReport | None = None
            try:
                report = await (self.scan_once() if full else self.scan_changed(changed))
            except Exception:  # a full disk must not end tailing for good
                log.exception("transcript scan failed; retrying at the next rescan")
            if full or (report is not None and report.full):
                next_full = loop.time() + self._interval_s
            if self._watcher is not None:
                await self._watcher.refresh()  # a root appeared or was made again: re-arm
            if report is not None and self._on_scan is not None:
                self._on_scan(report)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), max(0.0, next_full - loop.time()))
            self._wake.clear()

    # -- the scan, in a worker thread ---------------------------------------------------------

    def _scan(self) -> ScanReport:
        assert self._checkpoints is not None
        began = self._clock.monotonic()
        report = ScanReport()
        seen: set[tuple[str, str]] = set()
        changed = False
        listed = True
        for source in self._sources:
            files = self._files(source)
            listed = listed and files is not None
            for path in files or ():
                if self._halt.is_set():
                    report.interrupted = True
                    break
                key = (source.name, str(path))
                seen.add(key)
                report.files += 1
                changed |= self._visit(source, path, key, report)
        # Forget only after a full listing: a file missed by a failed listing is not gone.
        if listed and not report.interrupted:
            for key in set(self._checkpoints) - seen:
                del self._checkpoints[key]
                report.forgotten += 1
                changed = True
        if changed:
            self._file.save(self._checkpoints)
        report.elapsed_s = self._clock.monotonic() - began
        return report

    def _scan_changed(self, paths: Collection[Path]) -> ScanReport:
        assert self._checkpoints is not None
        if any(path.is_dir() for path in paths):
            return self._scan()  # its files may have been written before it was watched
        began = self._clock.monotonic()
        report = ScanReport(full=False)
        changed = False
        for path in sorted(paths):
            if self._halt.is_set():
                report.interrupted = True
                break
            for source in self._sources:
                if not source_matches(source, path):
                    continue
                key = (source.name, str(path))
                if path.is_file():
                    report.files += 1
                    changed |= self._visit(source, path, key, report)
                elif key in self._checkpoints and not path.exists():
                    del self._checkpoints[key]
                    report.forgotten += 1
                    changed = True
        if changed:
            self._file.save(self._checkpoints)
        report.elapsed_s = self._clock.monotonic() - began
        return report

    @staticmethod
    def _files(source: Source) -> list[Path] | None:
        try:
            return source.files()
        except OSError as exc:
            log.warning(
                "cannot list transcript source",
                extra={"source": source.name, "glob": source.glob, "error": str(exc)},
            )
            return None

    def _visit(self, source: Source, path: Path, key: tuple[str, str], report: ScanReport) -> bool:
        """Bring one file up to date; whether its checkpoint changed."""
        assert self._checkpoints is not None
        try:
            stat = path.stat()
            checkpoint = self._trusted(source, key)
            change = classify(checkpoint, stat)
            if change is Change.UNCHANGED:
                return False
            if (
                change is Change.GREW
                and checkpoint is not None
                and not _newline_after(path, checkpoint.offset)
            ):
                # Only a partial line was added: nothing to parse until it ends.
                self._checkpoints[key] = dataclasses.replace(
                    checkpoint, size=stat.st_size, mtime_ns=stat.st_mtime_ns
                )
                return True
            outcome = self._importer.import_file(path, source)
        except FileNotFoundError:
            return False  # removed since the glob listed it: forgotten on the next scan
        except Exception:  # the store failed (or a bug): keep the checkpoint, retry next scan
            log.exception(
                "cannot import transcript; retrying on the next scan",
                extra={"source": source.name, "path": str(path)},
            )
            report.failed += 1
            return False
        report.imported += 1
        report.events += outcome.events
        if change in (Change.REWRITTEN, Change.REPLACED):
            report.restarted += 1
        # On growth, errors on lines read before were reported then.
        known_lines = checkpoint.lines if checkpoint is not None and change is Change.GREW else 0
        fresh = [e for e in outcome.errors if e.line == 0 or e.line > known_lines]
        self._report_errors(fresh, report)
        self._checkpoints[key] = _checkpoint_after(source, path, stat, outcome)
        return True

    def _trusted(self, source: Source, key: tuple[str, str]) -> Checkpoint | None:
        """The file's checkpoint, unless its session is missing from the store (checked once)."""
        assert self._checkpoints is not None
        checkpoint = self._checkpoints.get(key)
        if checkpoint is None or key in self._verified:
            return checkpoint
        if checkpoint.session_key is not None and not self._importer.has_session(
            source.name, checkpoint.session_key
        ):
            checkpoint = None
        self._verified.add(key)
        return checkpoint

    @staticmethod
    def _report_errors(errors: list[IngestError], report: ScanReport) -> None:
        for error in errors:
            if len(report.errors) < _LOGGED_ERRORS:
                log.warning(
                    "transcript line not imported",
                    extra={"path": error.file, "line": error.line, "error": error.message},
                )
            elif len(report.errors) == _LOGGED_ERRORS:
                log.warning("more transcript lines not imported; see the scan summary")
            report.errors.append(error)


def _checkpoint_after(
    source: Source, path: Path, stat: os.stat_result, outcome: ImportOutcome
) -> Checkpoint:
    snapshot = outcome.snapshot
    if snapshot is None:
        # Unreadable: remember it as it is, so it is tried again only once it changes.
        return Checkpoint(
            source.name, str(path), stat.st_ino, stat.st_dev, stat.st_size, 0, stat.st_mtime_ns
        )
    return Checkpoint(
        source=source.name,
        path=str(path),
        inode=snapshot.inode,
        device=snapshot.device,
        size=snapshot.size,
        offset=snapshot.offset,
        mtime_ns=snapshot.mtime_ns,
        lines=len(snapshot.lines),
        session_key=outcome.session_key,
    )


def _newline_after(path: Path, offset: int) -> bool:
    """Whether the file has a newline at or after byte `offset`."""
    with path.open("rb") as handle:
        handle.seek(offset)
        while chunk := handle.read(_CHUNK):
            if b"\n" in chunk:
                return True
    return False
