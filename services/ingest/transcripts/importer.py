"""Importing one transcript file into the session read model.

`Importer.import_file` reads the file's complete lines (a trailing line without its newline is
still being written and is left for later), parses them with the harness's parser, masks
secrets, assembles the session and writes it with `SessionStore.write_session`, which replaces
the session atomically. It re-reads the whole file every time: ids are stable, so a re-import
of a grown file rewrites the same rows plus the new ones. That costs O(file) per change, fine
for transcripts (megabytes) and simple; an incremental parse can use the checkpoint's offset
later.

Everything here blocks (file I/O, parsing, the store): async callers run it in a thread.
"""

from __future__ import annotations

import dataclasses
import logging
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Protocol

from mcpd.redaction import Redactor
from mcpd.sessions.model import AssembledSession, ParsedSession, SessionRecord
from services.ingest.transcripts.assemble import assemble
from services.ingest.transcripts.parsers._common import Parser
from services.ingest.transcripts.registry import parser_for
from services.ingest.transcripts.sources import Source

__all__ = [
    "CanWriteSessions",
    "FileSnapshot",
    "ImportOutcome",
    "Importer",
    "IngestError",
    "read_complete_lines",
]

log = logging.getLogger("mcpd.ingest.transcripts")


class CanWriteSessions(Protocol):
    """What the importer needs of a `SessionStore`."""

    def write_session(self, project: str, assembled: AssembledSession) -> None:
        """Insert or replace one session atomically."""
        ...

    def session_of_key(self, project: str, source: str, session_key: str) -> SessionRecord | None:
        """The session a transcript's own id maps to, if imported."""
        ...


@dataclass(frozen=True, slots=True)
class IngestError:
    """A line (or, with line 0, a whole file) that could not be imported."""

    file: str
    line: int
    message: str

    def __str__(self) -> str:
        return (
            f"{self.file}:{self.line}: {self.message}"
            if self.line
            else f"{self.file}: {self.message}"
        )


@dataclass(frozen=True, slots=True)
class FileSnapshot:
    """What was read of a file: its complete lines and where they end.

    `offset` is the byte length of the complete lines, `size` all bytes read (a partial last
    line makes it larger); `inode`, `device` and `mtime_ns` come from the open file.
    """

    lines: list[str]
    offset: int
    size: int
    inode: int
    device: int
    mtime_ns: int

    @property
    def mtime(self) -> datetime:
        """The modification time, as an aware UTC datetime."""
        return datetime.fromtimestamp(self.mtime_ns / 1e9, UTC)


def read_complete_lines(path: Path) -> FileSnapshot:
    """The complete lines of `path` (without their newlines). Bytes after the last newline are
    not a line yet. Undecodable bytes become U+FFFD rather than losing the file.

    Raises OSError when the file cannot be read.
    """
    with path.open("rb") as handle:
        stat = os.fstat(handle.fileno())
        data = handle.read()
    offset = data.rfind(b"\n") + 1
    # split("\n"), not splitlines(): JSON strings may hold U+2028 and other line breaks.
    lines = data[:offset].decode("utf-8", errors="replace").split("\n")[:-1] if offset else []
    return FileSnapshot(
        lines=lines,
        offset=offset,
        size=len(data),
        inode=stat.st_ino,
        device=stat.st_dev,
        mtime_ns=stat.st_mtime_ns,
    )


@dataclass(frozen=True, slots=True)
class ImportOutcome:
    """What importing one file did. `session_id` and `session_key` (the transcript's own id)
    are None when nothing was written (no events yet, or the file could not be read or
    parsed); `snapshot` is None when the file could not be read."""

    events: int
    errors: list[IngestError] = field(default_factory=list)
    session_id: str | None = None
    session_key: str | None = None
    snapshot: FileSnapshot | None = None


class Importer:
    """Reads transcript files into one project's session read model."""

    def __init__(
        self,
        sessions: CanWriteSessions,
        *,
        project: str,
        redactor: Redactor | None = None,
        parsers: Callable[[str], Parser] = parser_for,
    ) -> None:
        self._sessions = sessions
        self._project = project
        self._redactor = redactor or Redactor()
        self._parsers = parsers

    @property
    def project(self) -> str:
        """The project sessions are written to."""
        return self._project

    def import_file(self, path: Path, source: Source) -> ImportOutcome:
        """Import `path` as a transcript of `source` (its name and harness).

        Bad lines become `IngestError`s and never stop the file; a file that cannot be read or
        whose parser fails outright is one error with line 0. Errors of the store propagate
        (the caller decides whether to retry): nothing was written then.
        """
        name = str(path)
        try:
            snapshot = read_complete_lines(path)
        except OSError as exc:
            return ImportOutcome(0, [IngestError(name, 0, f"cannot read: {exc.strerror or exc}")])
        outcome = self.import_lines(name, snapshot.lines, snapshot.mtime, source)
        return dataclasses.replace(outcome, snapshot=snapshot)

    def import_lines(
        self, name: str, lines: list[str], modified_at: datetime, source: Source
    ) -> ImportOutcome:
        """Import the complete `lines` of the transcript `name` (last modified at
        `modified_at`), as `import_file` does with what it reads."""
        parser = self._parsers(source.harness)
        try:
            parsed = parser.parse(lines, path=name)
        except Exception as exc:  # a parser bug must not stop the other files
            log.exception("transcript parser failed", extra={"path": name})
            error = IngestError(name, 0, f"{source.harness} parser failed: {exc!r}")
            return ImportOutcome(0, [error])
        errors = [IngestError(name, e.line, e.message) for e in parsed.errors]
        if not parsed.events:
            return ImportOutcome(0, errors)
        assembled = assemble(
            self._redacted(parsed),
            source=source.name,
            project=self._project,
            path=name,
            fallback_time=modified_at,
        )
        self._sessions.write_session(self._project, assembled)
        return ImportOutcome(
            len(assembled.events),
            errors,
            session_id=assembled.session.id,
            session_key=parsed.session_key,
        )

    def has_session(self, source: str, session_key: str) -> bool:
        """Whether the store holds the session `session_key` of `source` (a checkpoint is only
        trusted while its session is still there: the read model may have been reset)."""
        return self._sessions.session_of_key(self._project, source, session_key) is not None

    def _redacted(self, parsed: ParsedSession) -> ParsedSession:
        """`parsed` with secrets masked in every text the read model derives from: event text
        and payload, title and summary. Keys and line numbers are untouched, so ids are too."""
        redact = self._redactor
        events = [
            dataclasses.replace(
                event,
                text=redact.redact_text(event.text),
                payload=None if event.payload is None else redact.redact_json(event.payload),
            )
            for event in parsed.events
        ]
        return dataclasses.replace(
            parsed,
            events=events,
            title=None if parsed.title is None else redact.redact_text(parsed.title),
            summary=None if parsed.summary is None else redact.redact_text(parsed.summary),
        )
