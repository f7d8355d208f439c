"""Test doubles for the importer and tailer: a tiny JSONL parser and an in-memory store."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Sequence
from pathlib import Path

from mcpd.sessions.model import (
    AssembledSession,
    EventType,
    ParsedEvent,
    ParsedSession,
    ParseError,
    SessionRecord,
)
from services.ingest.transcripts.parsers._common import Parser, parse_timestamp
from services.ingest.transcripts.sources import Source

HARNESS = "codex"  # a harness the store accepts; the fake parser reads its own format


class LineParser:
    """Each line is `{"id": ..., "text": ..., "ts": ...}`; anything else is a ParseError. The
    first event is a user prompt, the others assistant responses. Session key: the file stem."""

    harness = HARNESS

    def __init__(self) -> None:
        self.parsed: list[str] = []  # paths, in call order
        self.seen_lines: list[list[str]] = []

    def parse(self, lines: Sequence[str], *, path: str) -> ParsedSession:
        self.parsed.append(path)
        self.seen_lines.append(list(lines))
        events: list[ParsedEvent] = []
        errors: list[ParseError] = []
        for number, line in enumerate(lines, start=1):
            try:
                record = json.loads(line)
                key, text = str(record["id"]), str(record["text"])
            except (ValueError, KeyError, TypeError) as exc:
                errors.append(ParseError(number, f"bad line: {exc!r}"))
                continue
            first = not events
            events.append(
                ParsedEvent(
                    key=key,
                    line=number,
                    type=EventType.USER_INPUT if first else EventType.ASSISTANT_RESPONSE,
                    text=text,
                    timestamp=parse_timestamp(record.get("ts")),
                    payload=record.get("payload"),
                    starts_turn=first,
                )
            )
        return ParsedSession(
            harness=HARNESS, session_key=Path(path).stem, events=events, errors=errors
        )


class CrashingParser:
    harness = HARNESS

    def parse(self, lines: Sequence[str], *, path: str) -> ParsedSession:
        raise RuntimeError("parser bug")


def parsers_of(parser: Parser) -> Callable[[str], Parser]:
    def lookup(harness: str) -> Parser:
        assert harness == HARNESS
        return parser

    return lookup


class MemorySessions:
    """write_session and session_of_key over a dict; can be told to fail."""

    def __init__(self) -> None:
        self.sessions: dict[tuple[str, str], AssembledSession] = {}
        self.writes = 0
        self.fail_with: Exception | None = None
        self._lock = threading.Lock()

    def write_session(self, project: str, assembled: AssembledSession) -> None:
        if self.fail_with is not None:
            raise self.fail_with
        with self._lock:
            self.sessions[(project, assembled.session.id)] = assembled
            self.writes += 1

    def session_of_key(self, project: str, source: str, session_key: str) -> SessionRecord | None:
        for (owner, _), assembled in self.sessions.items():
            record = assembled.session
            if (owner, record.source, record.session_key) == (project, source, session_key):
                return record
        return None

    def texts(self, project: str = "p") -> list[str]:
        """Every stored event text of `project`, in session then seq order."""
        return [
            event.text
            for (owner, _), assembled in sorted(self.sessions.items())
            if owner == project
            for event in sorted(assembled.events, key=lambda e: e.seq)
        ]


def line(key: str, text: str, ts: str = "2026-02-15T03:50:40Z", **extra: object) -> str:
    """One line of the fake format, with its newline."""
    return json.dumps({"id": key, "text": text, "ts": ts, **extra}) + "\n"


def source_for(glob: Path | str, name: str = "fake") -> Source:
    return Source(name, HARNESS, str(glob))
