"""`mcpd import HARNESS PATH... [--source NAME]`: one-off import of transcript files.

PATHs are files (imported whatever their name) or directories (every `*.jsonl` below them).
When a daemon owns the data directory (its lock says so, and where it serves gRPC), the files
are handed to it, one request per file (`IngestService.ImportTranscript`, with `--key` or
`$MCPD_API_KEY` when it asks for credentials): it is the one writer of the search index.
Otherwise the command opens the stores itself, embedded, like `mcpd migrate`, holding the data
directory's lock meanwhile. Either way the same importer reads the same lines, so the sessions
are the same. On a terminal it shows progress (files done/total, events/s, errors); the summary
always ends the output. Per-line errors are listed (up to a cap) and do not change the exit
code: 0 when every file was read, 1 when some could not be stored (or the stores or the daemon
could not be reached), 2 for bad arguments.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import sys
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from mcpd.runtime.clock import Clock, SystemClock
from mcpd.runtime.config import Settings
from mcpd.runtime.data_dir import DataDirLock, DataDirLocked, LockHolder
from mcpd.runtime.errors import McpdError, Unimplemented

if TYPE_CHECKING:
    # Imported when run, not when `mcpd` starts: the parsers and the stores are not light.
    from services.ingest.transcripts import ImportOutcome, Source

__all__ = ["API_KEY_ENV", "add_parser", "collect_files", "run"]

API_KEY_ENV = "MCPD_API_KEY"
# Errors listed in the summary; the rest are counted.
ERROR_CAP = 20
# Seconds between progress redraws.
_REDRAW_S = 0.1
# Seconds one file may take the daemon.
_FILE_DEADLINE_S = 300.0
# How many times a file is offered to a daemon that answers it is busy.
_BUSY_RETRIES = 30

# Imports one file: its path, as given, to what came of it.
ImportOne = Callable[[Path], "ImportOutcome"]


class _DaemonGoneError(Exception):
    """The daemon refused or could not be reached: no later file would fare better."""


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add `import` to the `mcpd` subcommands."""
    command = commands.add_parser(
        "import",
        help="import transcript files into the session read model",
        description=__doc__.split("\n\n", 1)[1] if __doc__ else None,
    )
    command.add_argument("harness", metavar="HARNESS", help="the harness that wrote the files")
    command.add_argument(
        "paths", metavar="PATH", nargs="+", type=Path, help="a transcript, or a directory of them"
    )
    command.add_argument(
        "--source",
        metavar="NAME",
        help="the source name sessions carry (default: the harness's standard source)",
    )
    command.add_argument(
        "--key", help=f"API key for a running daemon that asks for one (default ${API_KEY_ENV})"
    )


def collect_files(paths: Iterable[Path]) -> list[Path]:
    """Files named directly, then every `*.jsonl` under named directories (sorted), each once.

    Raises FileNotFoundError for a path that does not exist.
    """
    found: dict[Path, None] = {}
    for path in paths:
        if path.is_dir():
            found.update(dict.fromkeys(sorted(p for p in path.rglob("*.jsonl") if p.is_file())))
        elif path.exists():
            found[path] = None
        else:
            raise FileNotFoundError(str(path))
    return list(found)


@dataclass(slots=True)
class _Tally:
    files: int = 0
    sessions: set[str] = field(default_factory=set)
    events: int = 0
    errors: list[str] = field(default_factory=list)
    failed: int = 0


def run(
    settings: Settings,
    args: argparse.Namespace,
    *,
    out: TextIO | None = None,
    err: TextIO | None = None,
    clock: Clock | None = None,
    tty: bool | None = None,
) -> int:
    """Run `mcpd import` with parsed `args`; the exit code."""
    from services.ingest.transcripts import Source, default_source_name, harnesses

    out = out or sys.stdout
    err = err or sys.stderr
    clock = clock or SystemClock()
    if args.harness not in harnesses():
        print(
            f"mcpd import: unknown harness {args.harness!r}; valid: {', '.join(harnesses())}",
            file=err,
        )
        return 2
    source_name = args.source or default_source_name(args.harness)
    if not source_name.strip():
        print("mcpd import: --source must not be blank", file=err)
        return 2
    try:
        files = collect_files(args.paths)
    except FileNotFoundError as exc:
        print(f"mcpd import: no such file or directory: {exc}", file=err)
        return 2
    source = Source(source_name, args.harness, "")
    project = settings.sessions.project or settings.security.local_project
    key = getattr(args, "key", None) or os.environ.get(API_KEY_ENV) or None
    tally = _Tally()
    began = clock.monotonic()
    progress = _Progress(err, clock, len(files), err.isatty() if tty is None else tty)
    try:
        with _importer(settings, source, project, key, clock) as import_one:
            for path in files:
                _import_one(import_one, path, tally)
                progress.update(tally)
    except (McpdError, _DaemonGoneError) as exc:
        progress.finish()
        print(f"mcpd import: {exc}", file=err)
        return 1
    progress.finish()
    _summary(out, tally, len(files), source, project, clock.monotonic() - began)
    return 1 if tally.failed else 0


def _import_one(import_one: ImportOne, path: Path, tally: _Tally) -> None:
    try:
        outcome = import_one(path)
    except (Unimplemented, _DaemonGoneError):
        raise  # no file can be stored
    except Exception as exc:  # the store refused this file: report it, go on
        tally.failed += 1
        tally.errors.append(f"{path}: not stored: {exc}")
    else:
        tally.events += outcome.events
        tally.errors += [str(error) for error in outcome.errors]
        if outcome.session_id is not None:
            tally.sessions.add(outcome.session_id)
    tally.files += 1


@contextlib.contextmanager
def _importer(
    settings: Settings, source: Source, project: str, key: str | None, clock: Clock
) -> Iterator[ImportOne]:
    """How each file is imported: by the daemon that owns the data directory, or here."""
    lock = DataDirLock(settings.data_dir)
    try:
        lock.acquire()
    except DataDirLocked as locked:
        if locked.holder is None or locked.holder.grpc is None:
            raise  # a daemon still starting, or an offline import: nothing to hand over to
        with _daemon_importer(settings, locked.holder, source, project, key) as import_one:
            yield import_one
        return
    with lock, _local_importer(settings, source, project, clock) as import_one:
        yield import_one


@contextlib.contextmanager
def _local_importer(
    settings: Settings, source: Source, project: str, clock: Clock
) -> Iterator[ImportOne]:
    from cli.ingest import project_policies
    from mcpd.storage import open_stores
    from services.ingest.transcripts import Importer

    storage = settings.storage
    stores = open_stores(
        storage.backend,
        data_dir=settings.data_dir,
        postgres_url=storage.postgres_url,
        clickhouse_url=storage.clickhouse_url,
    )
    with stores:
        # The project's redaction rules apply to transcripts as to its signals.
        redactor = project_policies(settings, stores, clock).get(project).redactor
        importer = Importer(stores.sessions, project=project, redactor=redactor)
        yield lambda path: importer.import_file(path, source)


@contextlib.contextmanager
def _daemon_importer(
    settings: Settings, holder: LockHolder, source: Source, project: str, key: str | None
) -> Iterator[ImportOne]:
    import grpc.aio
    from google.protobuf.timestamp_pb2 import Timestamp

    from mcpd.ingest.v1 import ingest_service_pb2, ingest_service_pb2_grpc
    from mcpd.runtime.channels import open_channel
    from mcpd.runtime.errors_grpc import rpc_failure_from
    from services.ingest.transcripts import ImportOutcome, IngestError, read_complete_lines

    assert holder.grpc is not None
    daemon = f"the daemon (pid {holder.pid}, {holder.grpc})"
    metadata = (("authorization", f"Bearer {key}"),) if key else ()

    with asyncio.Runner() as runner:
        channel = open_channel(holder.grpc, settings.grpc)
        stub = ingest_service_pb2_grpc.IngestServiceStub(channel)

        async def send(request: ingest_service_pb2.ImportTranscriptRequest) -> ImportOutcome:
            for _ in range(_BUSY_RETRIES):
                try:
                    answer = await stub.ImportTranscript(
                        request, metadata=metadata, timeout=_FILE_DEADLINE_S
                    )
                except grpc.aio.AioRpcError as exc:
                    failure = rpc_failure_from(exc)
                    if failure.retry_after_s is not None:  # busy: it says when to come back
                        await asyncio.sleep(failure.retry_after_s)
                        continue
                    if failure.code is grpc.StatusCode.INVALID_ARGUMENT:
                        raise RuntimeError(failure.message) from None  # this file's fault
                    raise _DaemonGoneError(
                        f"{daemon} refused {request.path}: {failure.message}"
                    ) from None
                return ImportOutcome(
                    answer.events,
                    [IngestError(e.file, e.line, e.message) for e in answer.errors],
                    session_id=answer.session_id if answer.HasField("session_id") else None,
                )
            raise _DaemonGoneError(f"{daemon} stayed busy; try again later")

        def import_one(path: Path) -> ImportOutcome:
            name = str(path)
            try:
                snapshot = read_complete_lines(path)
            except OSError as exc:
                return ImportOutcome(0, [IngestError(name, 0, f"cannot read: {exc.strerror}")])
            modified_at = Timestamp()
            modified_at.FromNanoseconds(snapshot.mtime_ns)
            request = ingest_service_pb2.ImportTranscriptRequest(
                project=project,
                harness=source.harness,
                source=source.name,
                path=name,
                modified_at=modified_at,
                lines=snapshot.lines,
            )
            outcome: ImportOutcome = runner.run(send(request))
            return outcome

        try:
            yield import_one
        finally:
            runner.run(channel.close())


class _Progress:
    """One status line on a terminal, redrawn at most every `_REDRAW_S`; nothing otherwise."""

    def __init__(self, stream: TextIO, clock: Clock, total: int, enabled: bool) -> None:
        self._stream = stream
        self._clock = clock
        self._total = total
        self._enabled = enabled
        self._began = clock.monotonic()
        self._drawn_at: float | None = None

    def update(self, tally: _Tally) -> None:
        if not self._enabled:
            return
        now = self._clock.monotonic()
        recent = self._drawn_at is not None and now - self._drawn_at < _REDRAW_S
        if recent and tally.files < self._total:
            return
        self._drawn_at = now
        rate = tally.events / max(now - self._began, 1e-9)
        line = (
            f"importing: files {tally.files}/{self._total}  events {tally.events} "
            f"({rate:,.0f}/s)  errors {len(tally.errors)}"
        )
        self._stream.write("\r\x1b[K" + line)
        self._stream.flush()

    def finish(self) -> None:
        """Clear the status line (once; later calls do nothing)."""
        if self._enabled and self._drawn_at is not None:
            self._stream.write("\r\x1b[K")
            self._stream.flush()


def _summary(
    out: TextIO, tally: _Tally, total: int, source: Source, project: str, elapsed: float
) -> None:
    rate = tally.events / elapsed if elapsed > 0 else 0.0
    print(
        f"imported {tally.files}/{total} files ({source.harness}, source {source.name}, "
        f"project {project}): {len(tally.sessions)} sessions, {tally.events} events, "
        f"{len(tally.errors)} errors in {elapsed:.2f} s ({rate:,.0f} events/s)",
        file=out,
    )
    if tally.failed:
        print(f"{tally.failed} files could not be stored", file=out)
    if tally.errors:
        shown = tally.errors[:ERROR_CAP]
        more = len(tally.errors) - len(shown)
        print(f"errors{f' (first {len(shown)} of {len(tally.errors)})' if more else ''}:", file=out)
        for line in shown:
            print(f"  {line}", file=out)
