"""`mcpd import HARNESS PATH... [--source NAME]`: one-off import of transcript files.

PATHs are files (imported whatever their name) or directories (every `*.jsonl` below them).
It opens the stores itself, embedded, like `mcpd migrate`; since the search index has a single
writer it refuses to run while a daemon's ingest role holds the data directory (stop the daemon,
or let it tail the files by putting them under a configured source). On a terminal it shows
progress (files done/total, events/s, errors); the summary always ends the output. Per-line
errors are listed (up to a cap) and do not change the exit code: 0 when every file was read,
1 when some could not be stored (or the stores could not be opened), 2 for bad arguments.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from mcpd.runtime.clock import Clock, SystemClock
from mcpd.runtime.config import Settings
from mcpd.runtime.errors import McpdError, Unimplemented

if TYPE_CHECKING:
    # Imported when run, not when `mcpd` starts: the parsers and the stores are not light.
    from services.ingest.transcripts import Source

__all__ = ["add_parser", "collect_files", "run"]

# Errors listed in the summary; the rest are counted.
ERROR_CAP = 20
_LOCKED_HINT = (
    "; the search index has a single writer: stop the daemon first, or let it import the "
    "files by putting them under a source of its [sessions] configuration"
)
# Seconds between progress redraws.
_REDRAW_S = 0.1


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add `import` to the `mcpd` subcommands."""
    command = commands.add_parser(
        "import",
        help="import transcript files into the session read model (not while a daemon runs)",
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
    tally = _Tally()
    began = clock.monotonic()
    try:
        _import(settings, files, source, project, tally, err, clock, tty)
    except McpdError as exc:
        hint = _LOCKED_HINT if exc.reason == "INGEST_LOCKED" else ""
        print(f"mcpd import: {exc.message}{hint}", file=err)
        return 1
    _summary(out, tally, len(files), source, project, clock.monotonic() - began)
    return 1 if tally.failed else 0


def _import(
    settings: Settings,
    files: Sequence[Path],
    source: Source,
    project: str,
    tally: _Tally,
    err: TextIO,
    clock: Clock,
    tty: bool | None,
) -> None:
    from cli.ingest import project_policies
    from mcpd.storage import open_stores
    from services.ingest.transcripts import Importer, IngestLock, ingest_lock_path

    storage = settings.storage
    with IngestLock(ingest_lock_path(settings.data_dir)):
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
            progress = _Progress(err, clock, len(files), err.isatty() if tty is None else tty)
            for path in files:
                try:
                    outcome = importer.import_file(path, source)
                except Unimplemented:
                    raise  # the backend has no session store: no file can be stored
                except Exception as exc:  # the store refused this file: report it, go on
                    tally.failed += 1
                    tally.errors.append(f"{path}: not stored: {exc}")
                else:
                    tally.events += outcome.events
                    tally.errors += [str(error) for error in outcome.errors]
                    if outcome.session_id is not None:
                        tally.sessions.add(outcome.session_id)
                tally.files += 1
                progress.update(tally)
            progress.finish()


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
