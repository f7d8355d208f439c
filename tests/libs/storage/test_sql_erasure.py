"""Erasure, trace deletion and retention on SQLite and PostgreSQL, down to the bytes.

What `test_query_store_lifecycle.py` holds every backend to (counts, what lists show) is not
repeated here. These tests look under the store: after an erasure no table of the trace store
(every table of its MetaData, the session read model's included, and SQLite's FTS5 tables)
holds the subject's user id, session id or payload, and on SQLite neither does the database
file once the WAL is checkpointed (erasure deletes with `secure_delete` and merges the FTS5
indexes). Other people's rows, and the subject's rows in another project, are left as they
were; traces that only lost a score or feedback are re-projected; retention works in bounded
transactions and never touches the audit log.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from google.protobuf import timestamp_pb2
from sqlalchemy import Table, select, text, update

from mcpd.model.v1 import account_pb2, enums_pb2
from mcpd.sessions.model import EventType
from mcpd.sessions.store import SearchQuery
from mcpd.signals.batch import SignalBatch
from mcpd.signals.queries import STAT_SIGNALS, ErasureCounts, ErasureSubject
from mcpd.storage.sql.control_store import SqlControlStore
from mcpd.storage.sql.schema import sessions as session_schema
from mcpd.storage.sql.schema import trace as schema
from mcpd.storage.sql.sessions import SqlSessionStore
from mcpd.storage.sql.signals import erasure
from mcpd.storage.sql.stores import SqlTraceStore
from services.ingest.trace_sessions import TraceSessions
from tests.libs.signals.samples import MS, T0, aspect_note, feedback, log, metric, score, span
from tests.libs.storage.helpers import Migrated, OpenedStore, sql_engine

USER = "uhash-6f1e0c77a2b94d3e"  # the keyed hash of the subject's user id
RAW_USER = "alice.subject@example.org"  # the same person, stored before hashing
SESSION = "sess-subject-5b7d2e"
# One word each, so tokenisers keep them whole, and with first letters no other indexed word
# has: FTS5 stores a term after a shared prefix as the rest only, which a byte scan would miss.
SECRET = "qqsubjectsecret"
OTHER_USER = "uhash-0d9c4b18e3f7a265"
OTHER_SESSION = "sess-other-8c1a"
OTHER_SECRET = "vvothersecret"
NEEDLES = (USER, RAW_USER, SESSION, SECRET)
DAY = 86_400 * 1_000 * MS


@dataclass
class World:
    """A migrated trace store and the session read model on its database, whose sessions the
    trace store's writes build, as in trace ingest."""

    opened: OpenedStore
    sessions: SqlSessionStore

    @property
    def store(self) -> SqlTraceStore:
        store: SqlTraceStore = self.opened.store
        return store

    def write(self, project: str = "p", **rows: Any) -> None:
        batch = SignalBatch(key_project=project, ingest_key=None, received_at=T0, **rows)
        assert self.store.write_batches([batch]) == [True]

    def rows(self, table: Table, project: str | None = None) -> list[dict[str, Any]]:
        statement = select(table)
        if project is not None:
            statement = statement.where(table.c.project == project)
        with self.store.engine.connect() as conn:
            return [dict(row) for row in conn.execute(statement).mappings()]

    def trace(self, trace_id: str, project: str = "p") -> dict[str, Any] | None:
        found = [row for row in self.rows(schema.traces, project) if row["trace_id"] == trace_id]
        return found[0] if found else None


@pytest.fixture
def world(backend: str, migrated: Migrated, tmp_path: Path) -> Iterator[World]:
    opened = migrated.open("trace", backend)
    index_dir = tmp_path / "search" if backend == "sqlite" else None
    sessions = SqlSessionStore(opened.store.engine, index_dir=index_dir)
    # Sessions are built as trace ingest builds them: by the writes of the spans.
    TraceSessions(opened.store, sessions)
    try:
        yield World(opened, sessions)
    finally:
        sessions.close()
        opened.store.close()


def who(user: str | None, session: str | None = None) -> dict[str, Any]:
    return {"user_id": user, "session_id": session, "service_name": "support-bot"}


def ingest(world: World, *, subject_elsewhere: bool) -> None:
    """The subject's rows, another user's, and (when `subject_elsewhere`) the subject's rows in
    project q, which an erasure in p must not touch.

    tr-s:     the subject's root (session SESSION, SECRET in its input) and an anonymous child
              whose output repeats SECRET; a log, a metric, a score and a note name the trace.
    tr-mixed: another user's root with a child of the subject: erased whole.
    tr-held:  one held span of the subject (tail sampling has not decided it).
    tr-o:     the other user's trace (session OTHER_SESSION), which carries the subject's own
              score, feedback and note: those go, the trace stays and is re-projected.
    Loose: a log, a metric and a score of the subject (the raw id on the score), the other
    user's log.
    """
    subject, other = who(USER, SESSION), who(OTHER_USER, OTHER_SESSION)
    spans = [
        span("s-root", trace_id="tr-s", is_root=True, input={"prompt": f"my {SECRET}"}, **subject),
        span("s-child", trace_id="tr-s", parent_span_id="s-root", output=SECRET, **who(None)),
        span("m-root", trace_id="tr-mixed", is_root=True, **who(OTHER_USER)),
        span("m-child", trace_id="tr-mixed", parent_span_id="m-root", **who(USER)),
        span("o-root", trace_id="tr-o", is_root=True, input=f"hi {OTHER_SECRET}", **other),
    ]
    world.write(
        spans=spans,
        held_spans=[span("h-1", trace_id="tr-held", input=SECRET, **subject)],
        logs=[
            log("l-s", trace_id="tr-s", message=f"about {SECRET}"),
            log("l-loose", trace_id=None, message=f"loose {SECRET}", **who(USER)),
            log("l-o", trace_id="tr-o", message=OTHER_SECRET, **who(OTHER_USER)),
        ],
        metrics=[
            metric("mt-s", trace_id="tr-s"),
            metric("mt-loose", **who(USER)),
        ],
        scores=[
            score("sc-s", trace_id="tr-s", reason=SECRET),
            score("sc-on-o", trace_id="tr-o", scorer_id="by-subject", **who(RAW_USER)),
            score("sc-o", trace_id="tr-o", scorer_id="judge", value=0.9),
        ],
        feedback=[feedback("fb-on-o", trace_id="tr-o", comment=SECRET, **who(USER))],
        aspect_notes=[
            aspect_note("n-s", trace_id="tr-s", text=f"wanted {SECRET}"),
            aspect_note("n-on-o", trace_id="tr-o", text=SECRET, **who(USER)),
        ],
    )
    if subject_elsewhere:
        world.write(
            "q",
            spans=[span("q-root", project="q", trace_id="tr-s", is_root=True, **subject)],
            logs=[log("q-log", project="q", **who(USER))],
        )


ERASED_BY_USER = ErasureCounts(
    traces=2,  # tr-s, tr-mixed (tr-held has no trace row)
    spans=5,  # s-root, s-child, m-root, m-child, and the held h-1
    logs=2,  # l-s (its trace), l-loose (its user)
    metrics=2,  # mt-s, mt-loose
    scores=2,  # sc-s, sc-on-o (the raw id)
    feedback=1,  # fb-on-o
    aspect_notes=2,  # n-s, n-on-o
    sessions=1,  # the read model's session SESSION, built from tr-s
)


def test_erasure_by_user_counts_exactly_and_leaves_others_whole(world: World) -> None:
    ingest(world, subject_elsewhere=True)
    before_o = world.trace("tr-o")
    assert before_o is not None
    assert before_o["score_summary"] == {"by-subject": 0.5, "judge": 0.9}
    (versions,) = world.rows(session_schema.session_versions, "p")
    assert _search(world, SECRET) != []

    counts = world.store.erase_subject("p", ErasureSubject(user_ids=(USER, RAW_USER)))

    assert counts == ERASED_BY_USER
    assert {row["trace_id"] for row in world.rows(schema.traces, "p")} == {"tr-o"}
    assert {row["span_id"] for row in world.rows(schema.spans, "p")} == {"o-root"}
    assert world.rows(schema.held_spans, "p") == []
    assert {row["log_id"] for row in world.rows(schema.logs, "p")} == {"l-o"}
    assert world.rows(schema.metrics, "p") == []
    assert {row["score_id"] for row in world.rows(schema.scores, "p")} == {"sc-o"}
    assert world.rows(schema.feedback, "p") == []
    assert world.rows(schema.aspect_notes, "p") == []
    # The other user's trace lost the subject's score and feedback: re-projected, and it
    # arrives again for delta pollers.
    after_o = world.trace("tr-o")
    assert after_o is not None
    assert after_o["score_summary"] == {"judge": 0.9}
    assert after_o["feedback_summary"] is None
    assert after_o["arrival_seq"] > before_o["arrival_seq"]
    assert {row["session_key"] for row in world.rows(session_schema.sessions, "p")} == {
        OTHER_SESSION
    }
    # The read model moved on, under a new generation: the SQLite search index re-indexes the
    # project whole at its next catch-up, which drops the erased events' documents.
    (version,) = world.rows(session_schema.session_versions, "p")
    assert version["version"] == versions["version"] + 1
    assert version["generation"] != versions["generation"]
    world.sessions.reconcile_search_index()
    assert _search(world, SECRET) == []
    assert _search(world, OTHER_SECRET) != []
    # Project q is not read or touched.
    assert {row["span_id"] for row in world.rows(schema.spans, "q")} == {"q-root"}
    assert {row["log_id"] for row in world.rows(schema.logs, "q")} == {"q-log"}
    assert {row["session_key"] for row in world.rows(session_schema.sessions, "q")} == {SESSION}
    assert_nowhere(world, project="p")


def test_erasure_by_session_takes_the_sessions_traces_and_its_read_model_session(
    world: World,
) -> None:
    ingest(world, subject_elsewhere=True)

    counts = world.store.erase_subject("p", ErasureSubject(session_id=SESSION))

    # tr-s (its root carries the session) and tr-held go whole; tr-mixed's child has no
    # session, and the loose rows carry none either.
    assert counts == ErasureCounts(
        traces=1, spans=3, logs=1, metrics=1, scores=1, aspect_notes=1, sessions=1
    )
    assert {row["trace_id"] for row in world.rows(schema.traces, "p")} == {"tr-mixed", "tr-o"}
    assert {row["session_key"] for row in world.rows(session_schema.sessions, "p")} == {
        OTHER_SESSION
    }
    assert {row["span_id"] for row in world.rows(schema.spans, "q")} == {"q-root"}


def test_erasure_leaves_no_trace_of_the_subject_in_any_table_or_in_the_file(
    world: World,
) -> None:
    ingest(world, subject_elsewhere=False)
    assert _found_in_tables(world, project=None) != set()
    if world.opened.backend == "sqlite":
        assert _found_in_file(world) != set()
        # What the file-level promise rests on: every connection of the store deletes
        # securely (the engine sets it, whatever the build's default), so no copy of the
        # subject's bytes was left behind in a page's free space before the erasure.
        with world.store.engine.connect() as conn:
            assert conn.exec_driver_sql("PRAGMA secure_delete").scalar_one() == 1

    counts = world.store.erase_subject(
        "p", ErasureSubject(user_ids=(USER, RAW_USER), session_id=SESSION)
    )

    assert counts.traces == 2
    assert counts.sessions == 1
    assert _found_in_tables(world, project=None) == set()
    if world.opened.backend == "sqlite":
        assert _found_in_file(world) == set()
    # The other user's words are still indexed and still found.
    assert OTHER_SECRET in str(world.rows(schema.spans, "p"))
    if world.opened.backend == "sqlite":
        with world.store.engine.connect() as conn:
            hits = conn.execute(
                text("SELECT count(*) FROM spans_fts WHERE spans_fts MATCH :q"), {"q": OTHER_SECRET}
            ).scalar_one()
        assert hits == 1


def _stored(world: World) -> dict[str, list[dict[str, Any]]]:
    """Every table's rows but the search index's log of differences, which its follower thread
    trims whenever the index has committed them (bookkeeping, not data)."""
    return {
        table.name: world.rows(table)
        for table in schema.metadata.sorted_tables
        if table.name != "search_log"
    }


def test_erasing_nobody_changes_nothing(world: World) -> None:
    ingest(world, subject_elsewhere=False)
    before = _stored(world)

    assert world.store.erase_subject("p", ErasureSubject()) == ErasureCounts()
    assert world.store.erase_subject("p", ErasureSubject(user_ids=("nobody",))) == ErasureCounts()

    assert _stored(world) == before


def test_delete_trace_removes_it_whole_from_tables_and_search(world: World) -> None:
    ingest(world, subject_elsewhere=False)

    # tr-s: 1 trace row, 2 spans, a log, a metric, a score and a note.
    assert world.store.delete_trace("p", "tr-s") == 7
    # tr-held: only its held span.
    assert world.store.delete_trace("p", "tr-held") == 1
    assert world.store.delete_trace("p", "tr-s") == 0

    assert world.trace("tr-s") is None
    assert {row["trace_id"] for row in world.rows(schema.spans, "p")} == {"tr-mixed", "tr-o"}
    if world.opened.backend == "sqlite":
        with world.store.engine.connect() as conn:
            left = conn.execute(
                text("SELECT count(*) FROM spans_fts WHERE spans_fts MATCH :q"), {"q": SECRET}
            ).scalar_one()
        assert left == 0


# --- retention ---------------------------------------------------------------------------------

NOW = T0 + 100 * DAY


def aged(world: World, name: str, days: int, *, project: str = "p") -> None:
    """A trace of two spans with a log, metric, score, feedback and note, received `days`
    before NOW."""
    received = NOW - days * DAY
    trace_id = f"tr-{name}"
    stamp = {"project": project, "received_at": received}
    world.write(
        project,
        spans=[
            span(f"{name}-root", trace_id=trace_id, is_root=True, **stamp),
            span(f"{name}-child", trace_id=trace_id, start_time=T0 + MS, **stamp),
        ],
        held_spans=[span(f"{name}-held", trace_id=f"{trace_id}-held", **stamp)],
        logs=[log(f"{name}-log", trace_id=trace_id, **stamp)],
        metrics=[metric(f"{name}-metric", **stamp)],
        scores=[score(f"{name}-score", trace_id=trace_id, scorer_id=name, **stamp)],
        feedback=[feedback(f"{name}-fb", trace_id=trace_id, **stamp)],
        aspect_notes=[aspect_note(f"{name}-note", trace_id=trace_id, **stamp)],
    )


def test_retention_counts_per_signal_in_bounded_transactions(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(erasure, "RETENTION_ROWS", 2)
    monkeypatch.setattr(erasure, "RETENTION_TRACES", 2)
    for number in range(5):
        aged(world, f"old{number}", 40)
    aged(world, "young", 10)
    aged(world, "theirs", 40, project="q")
    statements = world.opened.statements
    statements.clear()

    counts = world.store.apply_retention("p", dict.fromkeys(STAT_SIGNALS, NOW - 30 * DAY))

    # spans: per old trace its row, 2 spans, its held span and its note.
    assert counts == {"spans": 25, "logs": 5, "metrics": 5, "scores": 5, "feedback": 5}
    assert {row["trace_id"] for row in world.rows(schema.traces, "p")} == {"tr-young"}
    assert len(world.rows(schema.spans, "q")) == 2
    # Five old logs at two per transaction: three deletes, then a look that finds nothing.
    log_deletes = [s for s in statements if s.lstrip().upper().startswith("DELETE FROM LOGS")]
    assert len(log_deletes) == 3
    assert world.store.apply_retention("p", dict.fromkeys(STAT_SIGNALS, NOW - 30 * DAY)) == {
        signal: 0 for signal in STAT_SIGNALS
    }


def test_retention_of_scores_alone_re_projects_their_traces(world: World) -> None:
    aged(world, "kept", 40)

    counts = world.store.apply_retention("p", {"scores": NOW - 30 * DAY})

    assert counts == {"scores": 1}
    kept = world.trace("tr-kept")
    assert kept is not None
    assert kept["score_summary"] is None
    assert kept["feedback_summary"] is not None


def test_retention_takes_old_spans_of_a_younger_trace_and_re_projects_it(world: World) -> None:
    aged(world, "mixed", 40)
    aged(world, "gone", 40)
    # A trace row younger than some of its spans (the store never writes one, but a delete
    # must still leave the projection true): only its old spans go, and a trace whose spans
    # all went loses its row.
    world.write(spans=[span("mixed-new", trace_id="tr-mixed", received_at=NOW)])
    with world.store.engine.begin() as conn:
        conn.execute(
            update(schema.traces)
            .where(schema.traces.c.trace_id.in_(["tr-mixed", "tr-gone"]))
            .values(received_at=NOW)
        )

    counts = world.store.apply_retention("p", {"spans": NOW - 30 * DAY})

    # 4 old spans, 2 held spans, 2 notes, and tr-gone's row.
    assert counts == {"spans": 9}
    mixed = world.trace("tr-mixed")
    assert mixed is not None
    assert mixed["span_count"] == 1
    assert world.trace("tr-gone") is None


def test_retention_refuses_unknown_signals_and_leaves_the_audit_log(
    world: World, backend: str, tmp_path: Path
) -> None:
    # On PostgreSQL the control store shares the trace store's database, as a deployment may.
    url = world.opened.store.engine.url.render_as_string(hide_password=False)
    control = SqlControlStore(sql_engine("control", backend, tmp_path, url))
    control.migrate()
    try:
        stamp = timestamp_pb2.Timestamp()
        stamp.FromNanoseconds(NOW - 400 * DAY)
        audit = account_pb2.AuditEvent(
            audit_id="a-1",
            timestamp=stamp,
            principal="key-1",
            action="get_trace",
            project="p",
            resource="trace/tr-old0",
            result=enums_pb2.AUDIT_RESULT_ALLOWED,
        )
        control.append_audit([audit])
        aged(world, "old0", 400)
        with pytest.raises(Exception, match="no retention for audit"):
            world.store.apply_retention("p", {"audit": NOW, "spans": NOW})
        assert world.trace("tr-old0") is not None

        world.store.apply_retention("p", dict.fromkeys(STAT_SIGNALS, NOW))

        assert [e.audit_id for e in control.list_audit("p", cursor=None, limit=10).events] == [
            "a-1"
        ]
    finally:
        control.close()


# --- looking under the store -------------------------------------------------------------------


def _search(world: World, words: str) -> list[str]:
    """The ids of the read model's events a session search for `words` finds in project p."""
    query = SearchQuery(project="p", text=words, event_types=tuple(EventType), limit=10)
    return [hit.event.id for hit in world.sessions.search(query).hits]


def _found_in_tables(world: World, *, project: str | None) -> set[str]:
    """The needles any row of any trace-store table holds (of `project`, when given), SQLite's
    FTS5 tables included."""
    found: set[str] = set()
    for table in schema.metadata.sorted_tables:
        rows = world.rows(table, project if "project" in table.c else None)
        found |= {needle for needle in NEEDLES if needle in str(rows)}
    if world.opened.backend == "sqlite":
        with world.store.engine.connect() as conn:
            for fts in ("spans_fts", "logs_fts"):
                indexed = conn.execute(text(f"SELECT rowid, * FROM {fts}")).all()
                found |= {needle for needle in NEEDLES if needle in str(indexed)}
    return found


def assert_nowhere(world: World, *, project: str) -> None:
    assert _found_in_tables(world, project=project) == set()


def _found_in_file(world: World) -> set[str]:
    """The needles the SQLite database file holds, byte for byte, after a checkpoint that
    empties the WAL into it."""
    engine = world.store.engine
    # Outside any transaction: a checkpoint cannot run inside one.
    raw = engine.raw_connection()
    try:
        busy, _, _ = raw.cursor().execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
    finally:
        raw.close()
    assert busy == 0
    database = Path(str(engine.url.database))
    data = database.read_bytes()
    wal = database.with_name(database.name + "-wal")
    if wal.exists():
        data += wal.read_bytes()
    return {needle for needle in NEEDLES if needle.encode() in data}


def test_every_trace_store_table_is_scanned() -> None:
    # The scan above is only as good as its table list: the session read model's tables are
    # on the trace store's MetaData.
    names = {table.name for table in schema.metadata.sorted_tables}
    assert {"spans", "traces", "held_spans", "sessions", "events", "turns"} <= names
