"""Session, turn and event ids survive re-imports and a rebuilt read model, and two identical
records on different lines stay two events (issue 4's acceptance): transcripts imported with
`mcpd import`, the read model read back from the stores."""

from __future__ import annotations

import shutil
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest

from mcpd.sessions.model import EventType
from mcpd.sessions.store import SearchQuery
from mcpd.storage import open_stores
from tests.e2e.session_corpus import (
    CLAUDE_DUPLICATE_WORD,
    DUPLICATE_WORD,
    PROJECT,
    TRAVERSAL_WORD,
    Import,
    StoredSession,
    corpus_imports,
    import_all,
    read_sessions,
)

pytestmark = pytest.mark.e2e

# The read model: the trace database (sessions, turns, events) and the search index.
READ_MODEL = ("trace.db", "trace.db-wal", "trace.db-shm", "search")


@dataclass(frozen=True)
class Imported:
    """The corpus imported into two fresh data directories, and what the first holds."""

    imports: list[Import]
    first: Path
    second: Path
    sessions: dict[str, StoredSession]


@pytest.fixture(scope="module")
def imported(tmp_path_factory: pytest.TempPathFactory) -> Imported:
    root = tmp_path_factory.mktemp("session-ids")
    imports = corpus_imports(root / "crafted")
    first, second = root / "first", root / "second"
    with ThreadPoolExecutor(2) as pool:
        list(pool.map(lambda data_dir: import_all(data_dir, imports), (first, second)))
    return Imported(imports, first, second, read_sessions(first))


def _search(data_dir: Path, text: str) -> list[str]:
    with open_stores("sqlite", data_dir=data_dir, postgres_url=None, clickhouse_url=None) as stores:
        result = stores.sessions.search(
            SearchQuery(
                project=PROJECT,
                text=text,
                event_types=[t.value for t in EventType if t is not EventType.UNKNOWN],
                limit=50,
            )
        )
    return [hit.event.id for hit in result.hits]


def test_ids_are_identical_in_a_fresh_data_directory(imported: Imported) -> None:
    assert len(imported.sessions) == 6
    assert sum(len(s.event_ids) for s in imported.sessions.values()) > 70
    assert read_sessions(imported.second) == imported.sessions


def _delete_read_model(data_dir: Path) -> None:
    for name in READ_MODEL:
        path = data_dir / name
        if path.is_dir():
            shutil.rmtree(path)
        else:
            path.unlink(missing_ok=True)


def _rebuild(data_dir: Path, imports: list[Import]) -> None:
    _delete_read_model(data_dir)
    import_all(data_dir, imports)


def test_ids_survive_a_reimport_and_a_rebuilt_read_model(imported: Imported) -> None:
    """The first directory imports the same files again; the second loses its read model (the
    trace database and the search index) and imports them again. (In parallel: each import is a
    process start.)"""
    found = _search(imported.second, TRAVERSAL_WORD)
    assert found
    with ThreadPoolExecutor(2) as pool:
        again = pool.submit(import_all, imported.first, imported.imports)
        rebuilt = pool.submit(_rebuild, imported.second, imported.imports)
        again.result()
        rebuilt.result()
    assert read_sessions(imported.first) == imported.sessions  # nothing new, nothing renamed
    assert read_sessions(imported.second) == imported.sessions
    assert set(_search(imported.second, TRAVERSAL_WORD)) == set(found)

    # The search index alone deleted: opening the stores rebuilds it from the database.
    shutil.rmtree(imported.second / "search")
    assert set(_search(imported.second, TRAVERSAL_WORD)) == set(found)


def _events(sessions: dict[str, StoredSession], kind: EventType, text: str) -> list[str]:
    return [
        event.id
        for session in sessions.values()
        for turn in session.turns
        for event in turn.events
        if event.type is kind and event.text == text
    ]


@pytest.mark.parametrize(
    ("kind", "text"),
    [
        # Codex, keyed by content: the same prompt twice.
        (EventType.USER_INPUT, f"Say {DUPLICATE_WORD} twice."),
        # Codex, keyed by call id: the same tool output twice.
        (EventType.TOOL_RESPONSE, DUPLICATE_WORD),
        # Claude Code, keyed by the record's uuid: the same record twice.
        (EventType.USER_INPUT, f"Call the {CLAUDE_DUPLICATE_WORD}."),
    ],
)
def test_identical_records_on_different_lines_stay_two_events(
    imported: Imported, kind: EventType, text: str
) -> None:
    ids = _events(imported.sessions, kind, text)
    assert len(ids) == 2
    assert len(set(ids)) == 2
