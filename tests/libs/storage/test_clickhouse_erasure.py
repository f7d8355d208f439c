"""Erasure, trace deletion and retention on ClickHouse, on the real engine (chdb): what matched is
counted exactly, once the mutations are done no table holds the subject, other people's and
other projects' rows are untouched, parts are dropped only when that is exact, and the default
window is handed to the engine as a TTL."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from mcpd.runtime.errors import InvalidArgument
from mcpd.signals.batch import SignalBatch
from mcpd.signals.queries import ErasureCounts, ErasureSubject
from mcpd.storage.clickhouse import ChdbExecutor, ClickHouseTraceStore
from mcpd.storage.clickhouse.sessions import ClickHouseSessionStore
from mcpd.storage.clickhouse.signals.erasure import (
    RETENTION_TABLES,
    TRACE_TABLES,
    chunks,
    set_default_ttl,
)
from mcpd.testing.eventually import eventually
from mcpd.testing.templates import ClickHouseTemplate
from services.ingest.trace_sessions import TraceSessions
from tests.libs.signals.samples import MS, T0, aspect_note, feedback, log, metric, score, span
from tests.libs.storage.helpers import RecordingExecutor

DAY = 86_400 * 1_000_000_000
USER = "u-subject-digest"
RAW_USER = "alice@example.org"  # a row stored before hashing
SESSION = "sess-subject"
SECRET = "zqxsubjectpayload"  # one word, so the session search tokens carry it whole
OTHER = "zqxotherpayload"
MUTATION_TIMEOUT_S = 30.0


@dataclass
class Store:
    """A migrated ClickHouse trace store on chdb with the session read model on its database."""

    executor: RecordingExecutor
    store: ClickHouseTraceStore
    sessions: ClickHouseSessionStore

    def write(self, **rows: Any) -> None:
        project = rows.pop("project", "p")
        self.store.write_batches([SignalBatch(project, None, T0 + 50 * MS, **rows)])

    def query(self, sql: str) -> list[tuple[Any, ...]]:
        return self.executor.inner.query(sql)

    def session_keys(self, project: str) -> set[str]:
        rows = self.executor.inner.query(
            "SELECT session_key FROM sessions FINAL WHERE project = {p:String}", {"p": project}
        )
        return {str(key) for (key,) in rows}

    def wait_for_mutations(self) -> None:
        """Until every mutation of the database is applied (chdb applies them at once; a
        server would take a while)."""
        pending = (
            "SELECT count() FROM system.mutations "
            "WHERE database = currentDatabase() AND NOT is_done"
        )

        def none_pending() -> None:
            assert not self.query(pending)[0][0], "mutations still pending"

        eventually(none_pending, timeout=MUTATION_TIMEOUT_S)

    def tables(self) -> dict[str, bool]:
        """Every table of the database, and whether it has a `project` column."""
        rows = self.query(
            "SELECT name, countIf(c.name = 'project') FROM system.tables AS t "
            "LEFT JOIN system.columns AS c ON c.database = t.database AND c.table = t.name "
            "WHERE t.database = currentDatabase() GROUP BY name"
        )
        return {str(name): bool(has) for name, has in rows}

    def holding(self, text: str, project: str) -> dict[str, int]:
        """Per table, the rows (of `project`, in a table with projects) with `text` in any
        column; tables without such rows are left out."""
        found = {}
        for table, scoped in self.tables().items():
            where = f"position(formatRow('TSV', *), '{text}') > 0"
            if scoped:
                where += f" AND project = '{project}'"
            count = int(self.query(f"SELECT count() FROM {table} WHERE {where}")[0][0])
            if count:
                found[table] = count
        return found

    def snapshot(self, project: str) -> list[str]:
        """Every row of `project` in every table, as text, in a stable order."""
        rows = []
        for table, scoped in sorted(self.tables().items()):
            if scoped:
                found = self.query(
                    f"SELECT formatRow('TSV', *) FROM {table} WHERE project = '{project}'"
                )
                rows += sorted(f"{table}\t{row}" for (row,) in found)
        return rows


@pytest.fixture
def ch(tmp_path: Path, clickhouse_template: ClickHouseTemplate) -> Iterator[Store]:
    executor = RecordingExecutor(ChdbExecutor(clickhouse_template.copy(tmp_path / "clickhouse")))
    store = ClickHouseTraceStore(executor)
    sessions = ClickHouseSessionStore(executor)
    # Sessions are built as trace ingest builds them: by the writes of the spans.
    TraceSessions(store, sessions)
    try:
        yield Store(executor, store, sessions)
    finally:
        store.close()


def root(trace_id: str, **overrides: Any) -> Any:
    """The root span of a trace, its input a user prompt."""
    return span(
        "s1",
        trace_id=trace_id,
        is_root=True,
        kind="agent_run",
        input={"messages": [{"role": "user", "content": overrides.pop("text")}]},
        output="done",
        **overrides,
    )


def write_world(ch: Store) -> None:
    """The subject's records in project p (by hashed and raw user id, by session), another
    user's in p, and the subject's ids in project q, with the sessions built from them."""
    subject_trace = "t-user"
    # The child first: the trace's start then moves earlier with its root, which leaves an older
    # trace row without the user at the former sort key, and a tombstone there (migration 0004).
    child = span("s2", trace_id=subject_trace, start_time=T0 + 5 * MS, output=f"{SECRET} child")
    ch.write(spans=[{**child, "parent_span_id": "s1"}])
    ch.write(
        spans=[
            root(subject_trace, user_id=USER, session_id="sess-a", text=f"hi {SECRET}"),
            root("t-raw", user_id=RAW_USER, text=f"raw {SECRET}"),
            root("t-session", session_id=SESSION, text=f"by session {SECRET}"),
            root("t-other", user_id="u-other", session_id="sess-other", text=f"hi {OTHER}"),
        ],
        held_spans=[root("t-held", user_id=USER, text=f"held {SECRET}")],
        logs=[
            log("l-trace", trace_id=subject_trace, message=f"{SECRET} log"),
            log("l-user", trace_id=None, user_id=USER, message=f"{SECRET} own"),
            log("l-other", trace_id="t-other", message=f"{OTHER} log"),
        ],
        metrics=[
            metric("m-trace", trace_id=subject_trace),
            metric("m-user", user_id=USER),
            metric("m-other", user_id="u-other"),
        ],
        scores=[
            score("sc-trace", trace_id=subject_trace, reason=f"{SECRET} reason"),
            score("sc-other", trace_id="t-other", reason=f"{OTHER} reason"),
        ],
        feedback=[
            feedback("f-trace", trace_id=subject_trace, comment=f"{SECRET} comment"),
            feedback("f-session", trace_id=None, session_id=SESSION, comment=f"{SECRET} own"),
            feedback("f-other", trace_id="t-other", comment=f"{OTHER} comment"),
        ],
        aspect_notes=[
            aspect_note("n-trace", trace_id=subject_trace, text=f"{SECRET} note"),
            aspect_note("n-user", trace_id="t-other", user_id=USER, text=f"{SECRET} noted"),
            aspect_note("n-other", trace_id="t-other", text=f"{OTHER} note"),
        ],
    )
    ch.write(
        project="q",
        spans=[
            root("t-user", project="q", user_id=USER, session_id=SESSION, text="q prompt"),
        ],
        logs=[log("l-user", project="q", user_id=USER, message="q log")],
    )
    # A copy of a matched row that does not carry the match: it goes with the row.
    ch.write(logs=[log("l-user", trace_id=None, message=f"{SECRET} resent", received_at=T0)])


def test_erasing_by_user_then_by_session_leaves_nothing_of_the_subject(ch: Store) -> None:
    write_world(ch)
    assert {"spans", "held_spans", "logs", "events"} <= set(ch.holding(SECRET, "p"))
    others = ch.snapshot("q")
    other_user = ch.holding(OTHER, "p")
    other_trace = ch.store.trace_records("p", "t-other", logs=True, scores=True, feedback=True)

    by_user = ch.store.erase_subject("p", ErasureSubject(user_ids=(USER, RAW_USER)))
    by_session = ch.store.erase_subject("p", ErasureSubject(session_id=SESSION))
    ch.wait_for_mutations()

    # t-user (2 spans), t-raw and the held t-held; what names t-user or carries the user.
    assert by_user == ErasureCounts(
        traces=2,
        spans=4,
        logs=2,
        metrics=2,
        scores=1,
        feedback=1,
        aspect_notes=2,
        sessions=1,
        deletes_pending=True,
    )
    assert by_session == ErasureCounts(
        traces=1, spans=1, feedback=1, sessions=1, deletes_pending=True
    )
    for marker in (SECRET, USER, RAW_USER, SESSION, "sess-a"):
        assert ch.holding(marker, "p") == {}, marker
    for table in TRACE_TABLES:
        erased = ch.query(
            f"SELECT count() FROM {table} WHERE project = 'p' "
            "AND trace_id IN ('t-user', 't-raw', 't-session', 't-held')"
        )
        assert erased == [(0,)], table
    assert ch.snapshot("q") == others
    assert ch.holding(OTHER, "p") == other_user
    after = ch.store.trace_records("p", "t-other", logs=True, scores=True, feedback=True)
    assert after == other_trace
    assert ch.session_keys("p") == {"sess-other"}
    assert ch.session_keys("q") == {SESSION}


def test_a_subject_matching_nothing_changes_nothing(ch: Store) -> None:
    write_world(ch)
    before = ch.snapshot("p")
    nobody = ErasureSubject(user_ids=("", "u-nobody"), session_id="")

    assert ch.store.erase_subject("p", nobody) == ErasureCounts(deletes_pending=True)
    # '' is what a row without a user or session stores: it must never match.
    assert ch.store.erase_subject("p", ErasureSubject(user_ids=("",))) == ErasureCounts(
        deletes_pending=True
    )
    assert ch.snapshot("p") == before


def test_erasure_removes_rows_from_final_reads_when_it_returns(ch: Store) -> None:
    write_world(ch)
    ch.store.erase_subject("p", ErasureSubject(user_ids=(USER,)))

    assert ch.store.trace_records("p", "t-user", logs=True, scores=True, feedback=True) is None
    remaining = ch.query("SELECT trace_id FROM spans FINAL WHERE project = 'p' ORDER BY trace_id")
    assert remaining == [("t-other",), ("t-raw",), ("t-session",)]


def test_delete_trace_counts_and_removes_what_names_the_trace(ch: Store) -> None:
    write_world(ch)
    others = ch.snapshot("q")

    # The trace row, its span, and its log, score, feedback and two aspect notes.
    assert ch.store.delete_trace("p", "t-other") == 7
    ch.wait_for_mutations()

    # The session built from the trace is the session read model's, which this leaves alone.
    assert set(ch.holding(OTHER, "p")) <= {"sessions", "turns", "events", "trace_turns"}
    for table in ("traces", "spans", "logs", "scores", "feedback", "aspect_notes"):
        found = ch.query(
            f"SELECT count() FROM {table} WHERE project = 'p' AND trace_id = 't-other'"
        )
        assert found == [(0,)], table
    assert ch.store.trace_records("p", "t-user", logs=True, scores=True, feedback=True) is not None
    assert ch.snapshot("q") == others
    assert ch.store.delete_trace("p", "t-other") == 0
    assert ch.store.delete_trace("p", "t-unknown") == 0


def test_delete_trace_takes_held_spans(ch: Store) -> None:
    write_world(ch)

    assert ch.store.delete_trace("p", "t-held") == 1
    assert ch.store.held_traces() == []


def expired_world(ch: Store) -> None:
    """Project p: trace t-jan and a log received in January, and in the same parts a span of
    t-jan and one of t-late, both received in June; project q: March rows only."""
    january = T0 + 50 * MS
    june = T0 + 160 * DAY
    march = T0 + 60 * DAY
    ch.write(
        spans=[
            root("t-jan", text="old"),
            span("s2", trace_id="t-jan", received_at=january),
            span("s-jan-late", trace_id="t-jan", received_at=june),
            span("s-late", trace_id="t-late", received_at=june),
        ],
        logs=[log("l-jan")],
    )
    ch.write(
        project="q",
        spans=[root("t-q", project="q", start_time=march, received_at=march, text="q")],
        logs=[log("l-q", project="q", timestamp=march, received_at=march)],
    )


def active_parts(ch: Store, table: str) -> dict[str, int]:
    rows = ch.query(
        "SELECT partition_id, sum(rows) FROM system.parts WHERE database = currentDatabase() "
        f"AND table = '{table}' AND active GROUP BY partition_id"
    )
    return {str(partition): int(count) for partition, count in rows}


def test_retention_drops_a_month_that_holds_only_expired_rows_of_the_project(ch: Store) -> None:
    expired_world(ch)
    with pytest.raises(InvalidArgument, match="traces"):
        ch.store.apply_retention("p", {"logs": T0 + DAY, "traces": T0})
    statements = len(ch.executor.statements)

    removed = ch.store.apply_retention("p", {"logs": T0 + DAY})
    ch.wait_for_mutations()

    assert removed == {"logs": 1}
    issued = ch.executor.statements[statements:]
    assert any(sql.startswith("ALTER TABLE logs DROP PART") for sql in issued)
    assert not any(sql.startswith("DELETE FROM logs") for sql in issued)
    assert "202601" not in active_parts(ch, "logs")
    assert ch.query("SELECT project, log_id FROM logs FINAL") == [("q", "l-q")]


def test_retention_deletes_rows_where_a_month_also_holds_rows_to_keep(ch: Store) -> None:
    expired_world(ch)
    others = ch.snapshot("q")
    statements = len(ch.executor.statements)

    removed = ch.store.apply_retention("p", {"spans": T0 + DAY})
    ch.wait_for_mutations()

    # t-jan's trace row and spans went, its span received in June with them (the trace arrived
    # before the cutoff); t-late's span, started in January but received in June, stays.
    assert removed == {"spans": 4}
    issued = ch.executor.statements[statements:]
    assert any(sql.startswith("DELETE FROM spans") for sql in issued)
    spans = ch.query("SELECT project, trace_id FROM spans FINAL ORDER BY project, trace_id")
    assert spans == [("p", "t-late"), ("q", "t-q")]
    # The trace rows are swept with the spans, each by its own arrival.
    traces = ch.query("SELECT project, trace_id FROM traces FINAL ORDER BY project, trace_id")
    assert traces == [("p", "t-late"), ("q", "t-q")]
    assert ch.snapshot("q") == others


def test_retention_never_drops_another_projects_rows(ch: Store) -> None:
    expired_world(ch)
    ch.write(project="q", logs=[log("l-q-jan", project="q")])  # January, like p's logs
    others = ch.snapshot("q")

    removed = ch.store.apply_retention("p", {signal: T0 + 400 * DAY for signal in RETENTION_TABLES})
    ch.wait_for_mutations()

    assert removed == {"spans": 6, "logs": 1, "metrics": 0, "scores": 0, "feedback": 0}
    assert ch.snapshot("q") == others
    for table in {table for tables in RETENTION_TABLES.values() for table in tables}:
        assert ch.query(f"SELECT count() FROM {table} WHERE project = 'p'") == [(0,)], table


def show_create(ch: Store, table: str) -> str:
    return str(ch.query(f"SHOW CREATE TABLE {table}")[0][0])


def test_default_ttl_is_set_kept_and_removed(ch: Store) -> None:
    tables = [table for tables in RETENTION_TABLES.values() for table in tables]
    with pytest.raises(ValueError, match="one day"):
        set_default_ttl(ch.executor, 0)

    assert set_default_ttl(ch.executor, 30) == tables
    assert "TTL toDateTime(received_at) + toIntervalDay(" in show_create(ch, "spans")
    assert set_default_ttl(ch.executor, 30) == []  # unchanged: no recomputation
    assert set_default_ttl(ch.executor, 30, keep=["vip", "o'brien", "back\\slash"]) == tables
    assert "WHERE project NOT IN" in show_create(ch, "logs")
    assert set_default_ttl(ch.executor, 30, keep=["back\\slash", "o'brien", "vip"]) == []
    assert set_default_ttl(ch.executor, None) == tables
    assert "TTL" not in show_create(ch, "metrics")
    assert set_default_ttl(ch.executor, None) == []


def test_the_default_ttl_expires_rows_but_those_of_projects_kept(ch: Store) -> None:
    long_ago = 1_577_836_800_000_000_000  # 2020-01-01
    ch.write(logs=[log("l-old", received_at=long_ago)])
    ch.write(project="vip", logs=[log("l-vip", project="vip", received_at=long_ago)])

    set_default_ttl(ch.executor, 30, keep=["vip"])
    ch.executor.command("OPTIMIZE TABLE logs FINAL")

    assert ch.query("SELECT project, log_id FROM logs") == [("vip", "l-vip")]


def test_ids_are_chunked_within_the_budget() -> None:
    ids = [f"id-{n:04d}" for n in range(1000)]

    found = list(chunks(ids, budget=100))

    assert [value for chunk in found for value in chunk] == ids
    assert all(sum(len(value) + 4 for value in chunk) <= 100 for chunk in found)
    assert list(chunks(["x" * 500], budget=100)) == [["x" * 500]]
