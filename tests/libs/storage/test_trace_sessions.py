"""Sessions from traces, written with the spans by the trace store's own writes: what a session
holds whatever the arrival order and batches, root-only session ids and tail-sampled releases
(SQLite, PostgreSQL and ClickHouse); concurrent writers of one session, a failing session part
and a write killed with SIGKILL (SQLite and PostgreSQL, which write both in one transaction)."""

from __future__ import annotations

import multiprocessing
import os
import random
import signal
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select

from mcpd.sessions.model import EventType, SessionRecord
from mcpd.sessions.store import SearchQuery, SessionListQuery
from mcpd.signals.batch import SignalBatch
from mcpd.signals.rows import SpanRow
from mcpd.storage.clickhouse import ChdbExecutor, ClickHouseTraceStore
from mcpd.storage.clickhouse.sessions import ClickHouseSessionStore
from mcpd.storage.clickhouse.sessions import tables as ch
from mcpd.storage.clickhouse.sessions.reads import Reads
from mcpd.storage.clickhouse.sessions.traces import TRACE_TURNS
from mcpd.storage.sql.schema import sessions as tables
from mcpd.storage.sql.sessions import SqlSessionStore
from mcpd.storage.sql.sessions.traces import SqlTraceTurns
from mcpd.storage.sql.stores import SqlTraceStore
from services.ingest.trace_sessions import SEQ_STRIDE, TraceSessions
from services.ingest.transcripts.keys import session_id as mcp_session_id
from tests.libs.signals.samples import MS, T0, span
from tests.libs.storage.helpers import Migrated, sql_engine

SESSION = "s-1"
SERVICE = "support-bot"
SID = mcp_session_id(SERVICE, SESSION)
# The read model's tables a trace session writes, with the columns that differ between equal
# sessions written in different steps left out (the read-model version of the last write).
_TABLES = (tables.sessions, tables.turns, tables.events, tables.file_touches, tables.trace_turns)
_VOLATILE = {"version"}
TRACE_BACKENDS = ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres), "clickhouse"]


def _span(span_id: str, trace_id: str, at_ms: int, end_ms: int | None, **extra: Any) -> SpanRow:
    fields: dict[str, Any] = {
        "trace_id": trace_id,
        "service_name": SERVICE,
        "start_time": T0 + at_ms * MS,
        "end_time": None if end_ms is None else T0 + end_ms * MS,
        "duration_ns": None if end_ms is None else (end_ms - at_ms) * MS,
    }
    return span(span_id, **{**fields, **extra})


def agent_trace(
    trace_id: str, at_ms: int, prompt: str, *, everywhere: bool = False, service: str = SERVICE
) -> list[SpanRow]:
    """An agent run in the OpenTelemetry GenAI message shape whose root alone carries the
    session id (every span, with `everywhere`): a model call asking for a tool, the tool (it
    edits a file), a failing retrieval, a second model call, and a generation whose inference
    speaks for it."""
    session = {"session_id": SESSION if everywhere else None, "service_name": service}

    def child(span_id: str, start: int, end: int | None, **fields: Any) -> SpanRow:
        name = f"{trace_id}-{span_id}"
        return _span(name, trace_id, at_ms + start, end and at_ms + end, **session, **fields)

    root = f"{trace_id}-root"
    answer = f"Done with {prompt}"
    return [
        _span(
            root,
            trace_id,
            at_ms,
            at_ms + 100,
            is_root=True,
            kind="agent_run",
            name="answer_ticket",
            session_id=SESSION,
            service_name=service,
            input=[{"role": "user", "parts": [{"type": "text", "content": prompt}]}],
            output=[{"role": "assistant", "parts": [{"type": "text", "content": answer}]}],
        ),
        child(
            "ask",
            10,
            20,
            parent_span_id=root,
            kind="model_inference",
            model="claude-sonnet-4-5",
            output=[
                {
                    "role": "assistant",
                    "parts": [
                        {"type": "text", "content": "Let me fix it."},
                        {"type": "tool_call", "id": "c1", "name": "write_file", "arguments": {}},
                    ],
                }
            ],
        ),
        child(
            "edit",
            20,
            40,
            parent_span_id=root,
            kind="tool_call",
            name="write_file",
            input={"path": f"/srv/{trace_id}/main.py", "content": "print()"},
            output="written",
        ),
        child(
            "faq",
            41,
            45,
            parent_span_id=root,
            kind="retrieval",
            status="error",
            error={"message": "index offline"},
        ),
        child("gen", 50, 90, parent_span_id=root, kind="model_generation", output=answer),
        child(
            "inf", 55, 85, parent_span_id=f"{trace_id}-gen", kind="model_inference", output=answer
        ),
    ]


def conversation(everywhere: bool = False) -> list[SpanRow]:
    """Three turns of one session."""
    return [
        *agent_trace("t1", 0, "Fix the login page", everywhere=everywhere),
        *agent_trace("t2", 1000, "Now the signup page", everywhere=everywhere),
        *agent_trace("t3", 2000, "And the footer", everywhere=everywhere),
    ]


@dataclass
class World:
    """A migrated trace store whose writes build trace sessions in its session store."""

    trace: SqlTraceStore | ClickHouseTraceStore
    sessions: SqlSessionStore | ClickHouseSessionStore

    def write(self, *batches: list[SpanRow], held: list[SpanRow] | None = None) -> None:
        for number, spans in enumerate(batches):
            batch = SignalBatch(
                key_project="p",
                ingest_key=None,
                received_at=T0 + number,
                spans=spans,
                held_spans=held or [],
            )
            assert self.trace.write_batches([batch]) == [True]

    def rows(self) -> dict[str, list[dict[str, Any]]]:
        """Every live row of the trace-session tables, in a stable order."""
        if isinstance(self.trace, ClickHouseTraceStore):
            found = _clickhouse_rows(self.trace)
        else:
            found = _sql_rows(self.trace)
        return {
            name: sorted(
                ({k: v for k, v in row.items() if k not in _VOLATILE} for row in rows),
                key=lambda row: sorted(map(str, row.items())),
            )
            for name, rows in found.items()
        }

    def close(self) -> None:
        self.sessions.close()
        self.trace.close()

    def listed(self) -> list[SessionRecord]:
        return self.sessions.list_sessions(
            SessionListQuery(
                project="p",
                start=datetime(2000, 1, 1, tzinfo=UTC),
                end=datetime(2100, 1, 1, tzinfo=UTC),
                limit=10,
            )
        )

    def events(self, session_id: str = SID) -> list[list[tuple[str, str]]]:
        """Per turn in order, its events' types and texts."""
        turns = self.sessions.list_turns("p", session_id, after_ordinal=0, limit=100)
        return [
            [
                (e.type.value, e.text)
                for e in self.sessions.list_events("p", t.id, after_ordinal=0, limit=100)
            ]
            for t in turns
        ]

    def touches(self) -> list[tuple[int, str]]:
        """The touches' (position, raw path), in position order."""
        rows = self.rows()["file_touches"]
        return sorted((int(row["position"]), str(row["raw_path"])) for row in rows)


def _sql_rows(trace: SqlTraceStore) -> dict[str, list[dict[str, Any]]]:
    with trace.engine.connect() as conn:
        return {
            table.name: [dict(row) for row in conn.execute(select(table)).mappings()]
            for table in _TABLES
        }


def _clickhouse_rows(trace: ClickHouseTraceStore) -> dict[str, list[dict[str, Any]]]:
    reads = Reads(trace.executor)
    columns = {
        "sessions": {**ch.SESSIONS, **ch.SESSION_EXTRA},
        "turns": ch.TURNS,
        "events": {**ch.EVENTS, **ch.SEARCH},
        "file_touches": ch.TOUCHES,
        "trace_turns": TRACE_TURNS,
    }
    return {name: reads.select(name, kinds, ["1"], {}) for name, kinds in columns.items()}


def _world(backend: str, url: str | None, path: Path) -> World:
    """The stores of a migrated trace store laid out in `path` (SQLite, ClickHouse) or at `url`
    (PostgreSQL), writes building sessions."""
    world: World
    if backend == "clickhouse":
        trace = ClickHouseTraceStore(ChdbExecutor(path / "clickhouse"))
        world = World(trace, ClickHouseSessionStore(trace.executor))
    else:
        engine = sql_engine("trace", backend, path, url)
        index = path / "search" if backend == "sqlite" else None
        world = World(SqlTraceStore(engine), SqlSessionStore(engine, index_dir=index))
    TraceSessions(world.trace, world.sessions)
    return world


def _fresh_world(migrated: Migrated, backend: str) -> World:
    """A world on an empty trace store of its own, copied from the session's templates."""
    return _world(backend, migrated.prepare("trace", backend), migrated.directory)


@pytest.fixture(params=TRACE_BACKENDS)
def any_backend(request: pytest.FixtureRequest) -> str:
    """A trace backend: SQLite, PostgreSQL (when available) and ClickHouse."""
    name: str = request.param
    return name


@pytest.fixture
def world(any_backend: str, migrated: Migrated) -> Iterator[World]:
    made = _fresh_world(migrated, any_backend)
    try:
        yield made
    finally:
        made.close()


@pytest.fixture
def sql_world(backend: str, migrated: Migrated) -> Iterator[World]:
    made = _fresh_world(migrated, backend)
    try:
        yield made
    finally:
        made.close()


TURN = [
    ("user_input", "Fix the login page"),
    ("assistant_response", "Let me fix it.\nwrite_file()"),
    ("tool_call", 'write_file(content="print()", path="/srv/t1/main.py")'),
    ("tool_response", "written"),
    ("runtime", "span t1-faq failed: index offline"),
    ("assistant_response", "Done with Fix the login page"),
]


# --- what a session holds ----------------------------------------------------------------------


def test_a_root_only_session_id_brings_the_children_sent_before_and_after_it(
    world: World,
) -> None:
    t1, t2 = agent_trace("t1", 0, "Fix the login page"), agent_trace("t2", 1000, "Now signup")
    # t1: its children first, the root (with the session id) last, as exporters send them;
    # t2: the root first, its children in later batches.
    world.write(t1[1:3], t1[3:], [t1[0]], [t2[0]], t2[1:4], t2[4:])

    (session,) = world.listed()
    assert (session.id, session.title, session.turn_count) == (SID, "Fix the login page", 2)
    assert (session.harness, session.source, session.mode) == ("mcpd", SERVICE, "tool_calling")
    assert session.completed is True
    turns = world.events()
    assert turns[0] == TURN
    assert [t for t, _ in turns[1]] == [t for t, _ in TURN]
    assert session.event_count == 12
    # The child spans' events are searchable in the session like the root's.
    hits = world.sessions.search(
        SearchQuery(project="p", text="offline", event_types=["runtime"], limit=5)
    )
    assert [hit.event.session_id for hit in hits.hits] == [SID, SID]


def test_the_session_is_the_same_whatever_the_order_batches_and_resends(
    any_backend: str, migrated: Migrated
) -> None:
    spans = conversation()
    shuffled = random.Random(7).sample(spans, len(spans))
    orders = {
        "one batch": [spans],
        "one span a batch, reversed": [[s] for s in reversed(spans)],
        "shuffled, three a batch": [shuffled[i : i + 3] for i in range(0, len(spans), 3)],
        "re-sent": [spans[:7], spans, spans[5:]],
    }
    found: dict[str, dict[str, list[dict[str, Any]]]] = {}
    for number, (name, batches) in enumerate(orders.items()):
        built = _fresh_world(migrated.elsewhere(str(number)), any_backend)
        try:
            built.write(*batches)
            found[name] = built.rows()
        finally:
            built.close()

    expected = found.pop("one batch")
    assert [len(expected[t.name]) for t in _TABLES] == [1, 3, 18, 3, 3]
    for name, rows in found.items():
        assert rows == expected, name


def test_a_resent_batch_changes_nothing(world: World) -> None:
    world.write(conversation())
    version = world.sessions.snapshot("p")
    rows = world.rows()

    world.write(conversation()[::-1])

    assert world.sessions.snapshot("p") == version
    assert world.rows() == rows


def test_a_trace_that_sorts_first_renumbers_the_turns_after_it(world: World) -> None:
    late, early = agent_trace("t2", 1000, "Second"), agent_trace("t1", 0, "First")
    world.write(late)
    (before,) = world.sessions.list_turns("p", SID, after_ordinal=0, limit=10)

    world.write(early)

    turns = world.sessions.list_turns("p", SID, after_ordinal=0, limit=10)
    assert [(t.ordinal, t.id) for t in turns] == [(1, turns[0].id), (2, before.id)]
    moved = world.sessions.list_events("p", before.id, after_ordinal=0, limit=10)
    assert [e.seq for e in moved] == [2 * SEQ_STRIDE + n for n in range(1, 7)]
    (session,) = world.listed()
    assert (session.title, session.turn_count) == ("First", 2)
    # The touches follow the turns' order.
    assert world.touches() == [(0, "/srv/t1/main.py"), (1, "/srv/t2/main.py")]


def test_a_trace_moves_to_the_session_its_root_names(world: World) -> None:
    trace = agent_trace("t1", 0, "Fix it")
    child = trace[2].copy()
    child["session_id"] = "s-early"
    world.write([child])
    assert {s.session_key for s in world.listed()} == {"s-early"}

    world.write([trace[0], trace[1], *trace[3:]])

    (session,) = world.listed()
    assert (session.session_key, session.turn_count, session.event_count) == (SESSION, 1, 6)


def test_released_tail_sampled_spans_reach_their_session(world: World) -> None:
    trace = agent_trace("t1", 0, "Fix the login page")
    world.write([], held=trace)
    assert world.listed() == []

    assert world.trace.release_held("p", ["t1"], []) == len(trace)

    assert world.events() == [TURN]


def test_a_session_stored_before_trace_states_is_rebuilt_whole(sql_world: World) -> None:
    world = sql_world
    world.write(conversation())
    before = world.events()
    # As the rebuilds of earlier versions left it: its rows, no trace states, and turns of
    # another id scheme, which nothing produces any more.
    assert isinstance(world.trace, SqlTraceStore)
    with world.trace.engine.begin() as conn:
        conn.execute(tables.trace_turns.delete())
        conn.execute(tables.turns.update().values(id="turn:old-" + tables.turns.c.id))

    world.write(agent_trace("t9", 5000, "Fix the login page"))

    (session,) = world.listed()
    assert session.turn_count == 4
    again = [(kind, text.replace("t1", "t9")) for kind, text in before[0]]
    assert world.events() == [*before, again]
    rows = world.rows()
    assert (len(rows["turns"]), len(rows["trace_turns"])) == (4, 4)


def test_a_failure_in_the_session_part_leaves_the_spans_written_and_is_repaired(
    sql_world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    world = sql_world
    trace = agent_trace("t1", 0, "Fix the login page")

    def broken(*_args: Any) -> None:
        raise RuntimeError("mapping bug")

    with monkeypatch.context() as patched:
        patched.setattr(SqlTraceTurns, "apply", broken)
        world.write(trace[:3])
    assert world.listed() == []
    assert world.trace.trace_records("p", "t1", logs=False, scores=False, feedback=False)

    world.write(trace[3:])

    assert world.events() == [TURN]


# --- writers of one session at once ------------------------------------------------------------


@pytest.fixture
def writers(backend: str, migrated: Migrated) -> Iterator[list[World]]:
    """Two writers of one database, each with its own engine, as two processes have."""
    url = migrated.prepare("trace", backend)
    made = [_world(backend, url, migrated.directory) for _ in range(2)]
    try:
        yield made
    finally:
        for writer in made:
            writer.close()


def _in_threads(*work: Any) -> None:
    failures: list[BaseException] = []

    def run(job: Any) -> None:
        try:
            job()
        except BaseException as error:
            failures.append(error)

    threads = [threading.Thread(target=run, args=(job,)) for job in work]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []


def test_a_second_writer_of_a_session_waits_for_the_first_and_keeps_its_turn(
    writers: list[World], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Writer A holds its transaction open once its session part is done, until B has
    # finished or for a second; B writes another trace of the same session meanwhile. The
    # writers' spans share no row (their services differ), so only the session's own lock
    # can order them.
    first, second = writers
    follow = TraceSessions.follow
    inside, second_done = threading.Event(), threading.Event()

    def held(self: TraceSessions, write: Any) -> Any:
        after = follow(self, write)
        if threading.current_thread().name == "first" and not inside.is_set():
            inside.set()
            second_done.wait(timeout=1.0)
        return after

    monkeypatch.setattr(TraceSessions, "follow", held)

    def write_first() -> None:
        threading.current_thread().name = "first"
        first.write(agent_trace("t1", 0, "First", service="svc-a"))

    def write_second() -> None:
        assert inside.wait(timeout=30)
        second.write(agent_trace("t2", 1000, "Second", service="svc-b"))
        second_done.set()

    _in_threads(write_first, write_second)

    (session,) = first.listed()
    assert (session.source, session.turn_count, session.event_count) == ("svc-a", 2, 12)
    assert [turn[0][1] for turn in first.events(session.id)] == ["First", "Second"]


def test_concurrent_writers_of_one_session_lose_no_turn(writers: list[World]) -> None:
    # Each writer writes six traces of the session, each in two batches, at once with the other.
    start = threading.Barrier(len(writers))

    def job(number: int) -> Any:
        def run() -> None:
            start.wait()
            for turn in range(6):
                at = (turn * 2 + number) * 1000
                trace = agent_trace(
                    f"w{number}-{turn}", at, f"prompt {number} {turn}", service=f"svc-{number}"
                )
                writers[number].write(trace[:3], trace[3:])

        return run

    _in_threads(*(job(number) for number in range(len(writers))))

    (session,) = writers[0].listed()
    assert (session.turn_count, session.event_count) == (12, 72)
    turns = writers[0].sessions.list_turns("p", session.id, after_ordinal=0, limit=20)
    assert [t.ordinal for t in turns] == list(range(1, 13))
    assert [events[0][1] for events in writers[0].events(session.id)] == [
        f"prompt {n % 2} {n // 2}" for n in range(12)
    ]


# --- kill -9 -----------------------------------------------------------------------------------


def _write_then_die(path: str, backend: str, url: str | None, die_inside: bool) -> None:
    """A writer process: write one trace and die by SIGKILL, after the write returned (it was
    acknowledged) or inside its transaction, after the session part."""
    world = _world(backend, url, Path(path))
    if die_inside:
        follow = TraceSessions.follow

        def follow_then_die(self: TraceSessions, write: Any) -> Any:
            follow(self, write)
            os.kill(os.getpid(), signal.SIGKILL)

        TraceSessions.follow = follow_then_die  # type: ignore[method-assign]
    world.write(agent_trace("t1", 0, "Fix the login page"))
    os.kill(os.getpid(), signal.SIGKILL)


@pytest.mark.parametrize("die_inside", [False, True], ids=["after the ack", "inside the write"])
def test_a_write_killed_with_sigkill_keeps_spans_and_session_together(
    backend: str, migrated: Migrated, die_inside: bool
) -> None:
    url = migrated.prepare("trace", backend)
    path = migrated.directory
    process = multiprocessing.get_context("spawn").Process(
        target=_write_then_die, args=(str(path), backend, url, die_inside)
    )
    process.start()
    process.join(60)
    assert process.exitcode == -signal.SIGKILL

    world = _world(backend, url, path)
    try:
        stored = world.trace.trace_records("p", "t1", logs=False, scores=False, feedback=False)
        if die_inside:
            assert (stored, world.listed()) == (None, [])
            return
        assert stored is not None
        assert len(stored.spans) == 6
        assert world.events() == [TURN]
        # The search index caught up with the committed session when the store opened.
        world.sessions.reconcile_search_index()
        hits = world.sessions.search(
            SearchQuery(project="p", text="login", event_types=[EventType.USER_INPUT], limit=5)
        )
        assert [hit.event.text for hit in hits.hits] == ["Fix the login page"]
    finally:
        world.close()
