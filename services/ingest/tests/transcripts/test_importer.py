"""Importing one transcript file: complete lines only, errors per line, secrets masked, one
atomic write per file, stable ids on re-import."""

from __future__ import annotations

from pathlib import Path

import pytest

from services.ingest.tests.transcripts.ingest_fakes import (
    CrashingParser,
    LineParser,
    MemorySessions,
    line,
    parsers_of,
    source_for,
)
from services.ingest.transcripts.importer import Importer, IngestError, read_complete_lines
from services.ingest.transcripts.parsers._common import Parser

GITHUB_TOKEN = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"


def _importer(store: MemorySessions, parser: Parser | None = None) -> Importer:
    return Importer(store, project="p", parsers=parsers_of(parser or LineParser()))


def test_read_complete_lines_ignores_a_trailing_partial_line(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    path.write_bytes('{"a": "é"}\n\n{"b": 2}\n{"c"'.encode())
    snapshot = read_complete_lines(path)
    assert snapshot.lines == ['{"a": "é"}', "", '{"b": 2}']
    assert snapshot.offset == len('{"a": "é"}\n\n{"b": 2}\n'.encode())
    assert snapshot.size == snapshot.offset + 4
    assert snapshot.inode == path.stat().st_ino
    path.write_bytes(b'{"only": "partial"}')
    assert read_complete_lines(path).lines == []
    assert read_complete_lines(path).offset == 0


def test_line_separators_inside_json_strings_do_not_split_lines(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    path.write_text('{"t": "a\u2028b\u0085c"}\r\n', encoding="utf-8")
    assert read_complete_lines(path).lines == ['{"t": "a\u2028b\u0085c"}\r']


def test_import_writes_one_session_with_every_event(tmp_path: Path) -> None:
    path = tmp_path / "s1.jsonl"
    path.write_text(line("u1", "fix the build") + line("a1", "done") + line("a2", "partial"))
    path.write_bytes(path.read_bytes()[:-1])  # the last line has no newline yet
    store = MemorySessions()
    outcome = _importer(store).import_file(path, source_for(path))
    assert outcome.events == 2
    assert outcome.errors == []
    assert outcome.session_key == "s1"
    assert outcome.session_id is not None
    assert outcome.snapshot is not None
    assert len(outcome.snapshot.lines) == 2
    assert store.writes == 1
    (assembled,) = store.sessions.values()
    assert assembled.session.id == outcome.session_id
    assert assembled.session.source == "fake"
    assert assembled.session.project == "p"
    assert store.texts() == ["fix the build", "done"]


def test_bad_lines_are_errors_with_file_and_line_and_never_stop_the_file(tmp_path: Path) -> None:
    path = tmp_path / "s1.jsonl"
    path.write_text(line("u1", "hello") + "{not json\n" + line("a1", "world") + "[]\n")
    store = MemorySessions()
    outcome = _importer(store).import_file(path, source_for(path))
    assert outcome.events == 2
    assert [(e.file, e.line) for e in outcome.errors] == [(str(path), 2), (str(path), 4)]
    assert str(outcome.errors[0]).startswith(f"{path}:2: bad line")


def test_secrets_are_masked_in_text_and_payload_before_storage(tmp_path: Path) -> None:
    path = tmp_path / "s1.jsonl"
    path.write_text(
        line("u1", f"use token {GITHUB_TOKEN}", payload={"env": {"password": "hunter2"}})
        + line("a1", "ok", payload={"argv": ["git", "push", f"https://x:{GITHUB_TOKEN}@h/r"]})
    )
    store = MemorySessions()
    _importer(store).import_file(path, source_for(path))
    (assembled,) = store.sessions.values()
    stored = repr(assembled)
    assert GITHUB_TOKEN not in stored
    assert "hunter2" not in stored
    assert "use token [REDACTED:github_token]" in store.texts()


def test_reimporting_a_grown_file_keeps_ids_and_replaces_the_session(tmp_path: Path) -> None:
    path = tmp_path / "s1.jsonl"
    path.write_text(line("u1", "one") + line("a1", "two"))
    store = MemorySessions()
    importer = _importer(store)
    first = importer.import_file(path, source_for(path))
    before = {e.text: e.id for e in next(iter(store.sessions.values())).events}
    with path.open("a") as handle:
        handle.write(line("a2", "three"))
    second = importer.import_file(path, source_for(path))
    assert second.session_id == first.session_id
    assert second.events == 3
    assert len(store.sessions) == 1
    after = {e.text: e.id for e in next(iter(store.sessions.values())).events}
    assert {text: after[text] for text in before} == before


def test_a_file_without_events_writes_nothing(tmp_path: Path) -> None:
    path = tmp_path / "s1.jsonl"
    path.write_text("{broken\n")
    store = MemorySessions()
    outcome = _importer(store).import_file(path, source_for(path))
    assert (outcome.events, outcome.session_id, outcome.session_key) == (0, None, None)
    assert len(outcome.errors) == 1
    assert store.writes == 0


def test_an_unreadable_file_and_a_crashing_parser_are_file_errors(tmp_path: Path) -> None:
    store = MemorySessions()
    missing = tmp_path / "gone.jsonl"
    outcome = _importer(store).import_file(missing, source_for(missing))
    assert outcome.snapshot is None
    assert outcome.errors[0].line == 0
    assert "cannot read" in outcome.errors[0].message
    path = tmp_path / "s1.jsonl"
    path.write_text(line("u1", "x"))
    crashed = _importer(store, CrashingParser()).import_file(path, source_for(path))
    assert crashed.events == 0
    assert crashed.errors == [
        IngestError(str(path), 0, "codex parser failed: RuntimeError('parser bug')")
    ]
    assert store.writes == 0


def test_store_failures_propagate_to_the_caller(tmp_path: Path) -> None:
    path = tmp_path / "s1.jsonl"
    path.write_text(line("u1", "x"))
    store = MemorySessions()
    store.fail_with = OSError("disk full")
    with pytest.raises(OSError, match="disk full"):
        _importer(store).import_file(path, source_for(path))


def test_has_session_asks_the_store_by_source_and_key(tmp_path: Path) -> None:
    path = tmp_path / "s1.jsonl"
    path.write_text(line("u1", "x"))
    store = MemorySessions()
    importer = _importer(store)
    assert not importer.has_session("fake", "s1")
    importer.import_file(path, source_for(path))
    assert importer.has_session("fake", "s1")
    assert not importer.has_session("other", "s1")
