"""The spec's Input Permutation Matrix and Traversal Contract end to end: every row, for all four
tools, through the official MCP client over Streamable HTTP against a real `mcpd serve`, plus a
stdio smoke test (spec/mcp-search-interface.md, issue 4's acceptance).

One daemon serves the module. Its data directory holds:
- transcripts imported with `mcpd import` (the codex, claude-code and qwen-code fixtures, and
  crafted Codex and Claude Code transcripts: a four-turn session with several events per turn,
  and records repeated on consecutive lines);
- the query service's case worlds (services/query/tests/sessions: `seed_world` and the
  file_attention world), written through the store API before the daemon starts, because the
  matrix rows are those unit tests' own case tables, run unchanged through `McpTools`;
- a Codex transcript the daemon tails, which a test appends to (a live ingest publish).

The case tables were written for project `proj-a`; here that project is the daemon's local one.
The imported sessions lie outside the case tables' time ranges and share none of their words,
and the Codex fixture is imported as source `laptop`, so every row's exact expectations hold
with the imported data beside them: the filters are exercised against real foreign sessions.
"""

from __future__ import annotations

import contextlib
import json
import secrets
import string
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, cast

import httpx
import pytest

from mcpd.sessions.model import AssembledSession
from mcpd.sessions.store import SessionStore
from mcpd.storage import open_stores
from mcpd.testing.daemon import DaemonProcess
from mcpd.testing.eventually import eventually, eventually_async
from services.query.sessions import SessionTools
from services.query.tests.sessions import attention_world
from services.query.tests.sessions.builders import PROJECT as CASE_PROJECT
from services.query.tests.sessions.conftest import call
from services.query.tests.sessions.corpus import seed_world
from services.query.tests.sessions.test_attention_matrix import ROWS as ATTENTION_ROWS
from services.query.tests.sessions.test_list_matrix import ROWS as LIST_ROWS
from services.query.tests.sessions.test_list_matrix import Check
from services.query.tests.sessions.test_list_matrix import Row as ListRow
from services.query.tests.sessions.test_open_matrix import ROWS as OPEN_ROWS
from services.query.tests.sessions.test_open_matrix import Row as OpenRow
from services.query.tests.sessions.test_search_matrix import ROWS as SEARCH_ROWS
from services.query.tests.sessions.test_traversal import expand
from tests.e2e.mcp_client import McpTools, envelope_of, error_of_result, http_session, stdio_session
from tests.e2e.session_corpus import (
    CLAUDE_DUPLICATE_WORD,
    DUPLICATE_WORD,
    PROJECT,
    TRAVERSAL_WORD,
    StoredSession,
    codex_meta,
    codex_turn,
    corpus_imports,
    import_all,
    read_sessions,
)

pytestmark = pytest.mark.e2e

SPEC = Path(__file__).parents[2] / "spec" / "mcp-search-interface.md"
# The one open row that writes mid-row: here the write is a live ingest (see below).
STALE_ROW = "stale or wrong-kind cursor"
TAILED_WORD = "merlin"
TAILED_SESSION = "0199c0de-0000-7000-8000-000000000004"


@dataclass(frozen=True)
class Corpus:
    """The running daemon, its data directory, the imported sessions as the store held them
    before the daemon started, and the transcript the daemon tails."""

    daemon: DaemonProcess
    data_dir: Path
    imported: dict[str, StoredSession]
    tailed: Path


class _Reprojected:
    """Writes the case worlds' `proj-a` sessions into the daemon's local project."""

    def __init__(self, store: SessionStore) -> None:
        self._store = store

    def write_session(self, project: str, assembled: AssembledSession) -> None:
        if project == CASE_PROJECT:
            project = PROJECT
            assembled = replace(assembled, session=replace(assembled.session, project=PROJECT))
        self._store.write_session(project, assembled)


def _shifted(assembled: AssembledSession, delta: timedelta) -> AssembledSession:
    """The session with every time moved by `delta`."""
    session = assembled.session
    return replace(
        assembled,
        session=replace(
            session, started_at=session.started_at + delta, updated_at=session.updated_at + delta
        ),
        turns=[
            replace(t, started_at=t.started_at + delta, updated_at=t.updated_at + delta)
            for t in assembled.turns
        ],
        events=[replace(e, timestamp=e.timestamp + delta) for e in assembled.events],
        touches=[
            replace(t, timestamp=None if t.timestamp is None else t.timestamp + delta)
            for t in assembled.touches
        ],
    )


def seed_case_worlds(data_dir: Path) -> None:
    """The query-service case worlds, in the local project. The file_attention world moves a
    month later, out of the list_sessions rows' range and after the search world's sessions
    (whose neighbours the open rows check); its rows do not look at times."""
    with open_stores("sqlite", data_dir=data_dir, postgres_url=None, clickhouse_url=None) as stores:
        store = _Reprojected(stores.sessions)
        seed_world(cast(SessionStore, store))
        for assembled in attention_world.world():
            store.write_session(assembled.session.project, _shifted(assembled, timedelta(days=30)))


def tailed_rollout(home: Path) -> Path:
    """A two-turn Codex transcript under the standard source of `home`."""
    day = home / ".codex" / "sessions" / "2026" / "06" / "04"
    day.mkdir(parents=True)
    path = day / f"rollout-2026-06-04T09-00-00-{TAILED_SESSION}.jsonl"
    start = datetime(2026, 6, 4, 9, 0, tzinfo=UTC)
    lines = [codex_meta(start, TAILED_SESSION)]
    for t in (1, 2):
        at = start + timedelta(minutes=t)
        lines += codex_turn(
            at, f"tail{t}", f"Is the {TAILED_WORD} tailed?", 1, complete=True, word=TAILED_WORD
        )
    path.write_text("\n".join(lines) + "\n")
    return path


def rest_hits(daemon: DaemonProcess, query: str) -> list[dict[str, Any]]:
    """search_sessions through the REST mirror (for waiting outside an event loop)."""
    response = httpx.post(
        f"{daemon.http_url}/v1/api/sessions/search", json={"query": query}, timeout=10
    )
    response.raise_for_status()
    hits: list[dict[str, Any]] = response.json()["envelope"]["data"]["results"]
    return hits


def wait_searchable(daemon: DaemonProcess, query: str, timeout_s: float = 15) -> None:
    def searchable() -> None:
        assert rest_hits(daemon, query), f"{query!r} never became searchable"

    eventually(searchable, timeout=timeout_s)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Corpus]:
    root = tmp_path_factory.mktemp("mcp-matrix")
    data_dir = root / "data"
    import_all(data_dir, corpus_imports(root / "crafted"))
    imported = read_sessions(data_dir)
    seed_case_worlds(data_dir)
    home = root / "home"
    tailed = tailed_rollout(home)
    env = {
        "MCPD_DATA_DIR": str(data_dir),
        "HOME": str(home),
        "MCPD_SESSIONS_SOURCES": "codex",
        "MCPD_SESSIONS_RESCAN_INTERVAL_S": "0.2",
        "MCPD_LOG_FORMAT": "text",
    }
    with DaemonProcess(extra_env=env) as daemon:
        # The first tailing publish lands before any test holds a cursor.
        wait_searchable(daemon, TAILED_WORD)
        yield Corpus(daemon, data_dir, imported, tailed)


@contextlib.asynccontextmanager
async def served(corpus: Corpus) -> AsyncIterator[SessionTools]:
    """The case tables' `tools`, served by the daemon over Streamable HTTP. (A context manager
    rather than an async fixture: the MCP client's task group must close in the task that
    opened it, and async fixtures set up and tear down in different tasks.)"""
    async with http_session(corpus.daemon) as session:
        yield cast(SessionTools, McpTools(session, CASE_PROJECT))


class _DaemonOwnedStore:
    """The daemon owns the store: a row that reached for it would not be end to end."""

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"store.{name}: rows run end to end must not touch the store")


# -- the Input Permutation Matrix, row by row ------------------------------------------------


@pytest.mark.parametrize(("arguments", "check"), SEARCH_ROWS)
async def test_search_sessions_row(corpus: Corpus, arguments: dict[str, Any], check: Check) -> None:
    async with served(corpus) as tools:
        check(await call(tools, "search_sessions", arguments))


@pytest.mark.parametrize("row", LIST_ROWS)
async def test_list_sessions_row(corpus: Corpus, row: ListRow) -> None:
    async with served(corpus) as tools:
        await row(tools)


@pytest.mark.parametrize(("arguments", "check"), ATTENTION_ROWS)
async def test_file_attention_row(corpus: Corpus, arguments: dict[str, Any], check: Check) -> None:
    async with served(corpus) as tools:
        check(await attention_world.attention(tools, arguments))


def _without(rows: list[Any], case: str) -> list[Any]:
    """The rows but `case` (which must be one of them)."""
    kept = [row for row in rows if row.id != case]
    assert len(kept) == len(rows) - 1, f"no case {case!r} among the rows"
    return kept


OPEN_ROWS_HERE = _without(OPEN_ROWS, STALE_ROW)
# Spec rows that the case tables split in two, or name more briefly.
CASE_NAMES = {
    "blank harness or source": ["blank harness", "blank source"],
    "invalid mode or sort": ["invalid mode", "invalid sort"],
    "end_datetime <= start_datetime": ["end <= start"],
}


def spec_matrix() -> dict[str, list[str]]:
    """The spec's Input Permutation Matrix: each tool's input combinations, as case names."""
    text = SPEC.read_text()
    section = text[text.index("## Input Permutation Matrix") : text.index("## Traversal Contract")]
    matrix: dict[str, list[str]] = {}
    rows: list[str] = []
    for line in section.splitlines():
        if line.startswith("### "):
            rows = matrix.setdefault(line.removeprefix("### ").strip("`"), [])
        elif "\t" in line and not line.startswith("Input combination"):
            combination = line.split("\t")[0].replace("`", "").strip()
            rows += CASE_NAMES.get(combination, [combination])
    return matrix


def test_every_spec_matrix_row_is_a_case_here() -> None:
    """Each row of the spec's matrix is one of the tests below, for all four tools."""
    cases = {
        "search_sessions": [p.id for p in SEARCH_ROWS],
        "list_sessions": [p.id for p in LIST_ROWS],
        "file_attention": [p.id for p in ATTENTION_ROWS],
        "open": [*(p.id for p in OPEN_ROWS_HERE), STALE_ROW],
    }
    matrix = spec_matrix()
    assert sorted(matrix) == sorted(cases)
    for tool, rows in matrix.items():
        assert sorted(rows) == sorted(cases[tool]), tool


@pytest.mark.parametrize("row", OPEN_ROWS_HERE)
async def test_open_row(corpus: Corpus, row: OpenRow) -> None:
    async with served(corpus) as tools:
        await row(tools, cast(SessionStore, _DaemonOwnedStore()))


def _nonce() -> str:
    return "".join(secrets.choice(string.ascii_lowercase) for _ in range(12))


async def test_open_row_stale_or_wrong_kind_cursor(corpus: Corpus) -> None:
    async with served(corpus) as tools:
        await _stale_or_wrong_kind(corpus, tools)


async def _stale_or_wrong_kind(corpus: Corpus, tools: SessionTools) -> None:
    """The row `stale or wrong-kind cursor`: a page cursor goes stale when the daemon ingests
    more of its session (appended to a tailed transcript), and a list_sessions cursor is the
    wrong kind; both are invalid_request naming the cursor and telling the caller to reopen."""
    hits = (await call(tools, "search_sessions", {"query": TAILED_WORD}))["data"]["results"]
    session = hits[0]["open"]["session_id"]
    page = await call(tools, "open", {"id": session, "limit": 1})
    cursor = page["data"]["next_cursor"]
    assert isinstance(cursor, str)
    assert "data" in await call(tools, "open", {"cursor": cursor})  # fresh: it continues

    word = _nonce()
    at = datetime(2026, 6, 4, 9, 30, tzinfo=UTC)
    with corpus.tailed.open("a") as transcript:
        transcript.write(
            "\n".join(codex_turn(at, "tail3", f"And now {word}?", 0, complete=True, word=word))
        )
        transcript.write("\n")

    async def ingested() -> None:
        found = await call(tools, "search_sessions", {"query": word})
        assert found["data"]["results"], "the appended turn was never ingested"

    await eventually_async(ingested, timeout=15)

    stale = await call(tools, "open", {"cursor": cursor})
    error = stale["error"]
    assert (error["code"], error["details"]["field"]) == ("invalid_request", "cursor")
    assert error["details"]["reason"] == "stale_cursor"
    assert error["details"]["reopen"] == session
    assert f"reopen {session}" in error["message"]
    # Reopening the id gives a fresh walk over the new turn.
    fresh = await call(tools, "open", {"id": session, "limit": 50})
    assert len(fresh["data"]["turns"]) == 3

    listing = await call(
        tools,
        "list_sessions",
        {
            "start_datetime": "2026-01-01T00:00:00Z",
            "end_datetime": "2027-01-01T00:00:00Z",
            "limit": 1,
        },
    )
    wrong = await call(tools, "open", {"cursor": listing["data"]["next_cursor"]})
    assert (wrong["error"]["code"], wrong["error"]["details"]["field"]) == (
        "invalid_request",
        "cursor",
    )
    assert "open a session or turn id with limit" in wrong["error"]["message"]


# -- the Traversal Contract --------------------------------------------------------------------

EVERY_TYPE = [
    "user_input",
    "assistant_response",
    "reasoning",
    "tool_call",
    "tool_response",
    "compaction",
    "system",
    "runtime",
]
# One word of each imported session: OR semantics finds them all in one search.
ANY_IMPORTED = f"{TRAVERSAL_WORD} inspect replacement {DUPLICATE_WORD} {CLAUDE_DUPLICATE_WORD}"


@pytest.mark.parametrize("limit", [1, 3, 50])
async def test_traversal_from_search_hits_reaches_every_event_once_in_order(
    corpus: Corpus, limit: int
) -> None:
    async with served(corpus) as tools:
        await _traverse_every_imported_session(corpus, tools, limit)


async def _traverse_every_imported_session(corpus: Corpus, tools: SessionTools, limit: int) -> None:
    """From search hits, open(session, limit) and cursor-only opens reach every turn; open(turn,
    limit) and cursor-only opens reach every event: each exactly once, in session order, for
    every imported session (fixtures and crafted transcripts)."""
    search = await call(
        tools,
        "search_sessions",
        {"query": ANY_IMPORTED, "n_hits": 50, "event_types": EVERY_TYPE},
    )
    hits = search["data"]["results"]
    starts = [
        s for s in dict.fromkeys(h["open"]["session_id"] for h in hits) if s in corpus.imported
    ]
    assert sorted(starts) == sorted(corpus.imported)
    for start in starts:
        expected = corpus.imported[start]
        turns = await expand(tools, start, limit, "turns")
        assert [t["id"] for t in turns] == [t.id for t in expected.turns]
        assert [t["ordinal"] for t in turns] == list(range(1, len(turns) + 1))
        reached: list[str] = []
        for turn in turns:
            events = await expand(tools, turn["id"], limit, "events")
            assert [e["ordinal"] for e in events] == list(range(1, turn["event_count"] + 1))
            reached += [e["id"] for e in events]
        assert len(set(reached)) == len(reached)
        assert reached == expected.event_ids


async def test_search_hit_handles_open_to_consistent_parents(corpus: Corpus) -> None:
    async with served(corpus) as tools:
        await _hit_handles_agree(corpus, tools)


async def _hit_handles_agree(corpus: Corpus, tools: SessionTools) -> None:
    """Every handle of a hit opens, and the event, turn and session agree on their parents."""
    search = await call(tools, "search_sessions", {"query": TRAVERSAL_WORD, "n_hits": 50})
    hits = search["data"]["results"]
    assert len(hits) > 5
    for hit in hits:
        handles = hit["open"]
        event = (await call(tools, "open", {"id": handles["event_id"]}))["data"]
        assert event["traversal"]["turn_id"] == handles["turn_id"]
        assert event["traversal"]["session_id"] == handles["session_id"]
        turn = (await call(tools, "open", {"id": handles["turn_id"]}))["data"]
        assert turn["traversal"]["session_id"] == handles["session_id"]
        session = (await call(tools, "open", {"id": handles["session_id"]}))["data"]
        assert session["session"]["id"] == handles["session_id"]
        assert handles["session_id"] in corpus.imported


# -- stdio -----------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["daemon", "embedded"])
async def test_stdio_smoke_search_then_open(corpus: Corpus, tmp_path: Path, mode: str) -> None:
    """`mcpd mcp` over stdio, forwarding to the daemon or reading the data directory itself:
    search, open the hit's event, then walk its turn page by page."""
    env = {
        "MCPD_DATA_DIR": str(corpus.data_dir),
        "MCPD_QUERY_ADDR": corpus.daemon.grpc_addr,
        "MCPD_SESSIONS_ENABLED": "false",
        "MCPD_LOG_FORMAT": "text",
    }
    log = tmp_path / "stderr.log"
    async with stdio_session(env, ["--mode", mode], log) as session:
        found = envelope_of(
            await session.call_tool("search_sessions", {"query": TRAVERSAL_WORD, "n_hits": 1})
        )
        hit = found["data"]["results"][0]
        event = envelope_of(await session.call_tool("open", {"id": hit["open"]["event_id"]}))
        page = envelope_of(
            await session.call_tool("open", {"id": hit["open"]["turn_id"], "limit": 2})
        )
        events = list(page["data"]["events"])
        while page["data"]["next_cursor"] is not None:
            page = envelope_of(
                await session.call_tool("open", {"cursor": page["data"]["next_cursor"]})
            )
            events += page["data"]["events"]
        refused = error_of_result(await session.call_tool("open", {"id": "not an id"}))
    stored = corpus.imported[hit["open"]["session_id"]]
    assert found["request"]["n_hits"] == 1
    assert event["data"]["kind"] == "event"
    assert TRAVERSAL_WORD in json.dumps(event["data"]["content"])
    assert event["data"]["traversal"]["turn_id"] == hit["open"]["turn_id"]
    turn = next(t for t in stored.turns if t.id == hit["open"]["turn_id"])
    assert [e["id"] for e in events] == [e.id for e in turn.events]
    assert refused["code"] == "invalid_id"
    assert ("using the daemon" if mode == "daemon" else "in process") in log.read_text()
