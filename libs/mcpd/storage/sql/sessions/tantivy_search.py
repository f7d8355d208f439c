"""Search beside SQLite: the tantivy index (`mcpd.sessions.search.index`), kept in step.

SQLite is the truth and commits first; the index follows. Every write also logs its difference
in its own transaction (`search_log`: the events whose documents go and those that come, per
read-model version). After each committed write the index applies the write's difference
when it holds exactly the version before it (the usual case); otherwise it catches up: from
the log when it holds every version since the index's (the documents of the events it names
are dropped and those events that are still searchable indexed again, from SQL), else by
re-indexing from SQL every session written after the version the index records; a project
whose generation differs (its database was re-created) or whose recorded version is ahead is
re-indexed whole. The same catch-up runs for every project when the store opens
(`reconcile`), so a crash between the SQL commit and the index commit, a deleted index
directory or an analyzer change mend themselves; `rebuild` starts from empty. The writer's
holder trims the log up to what its index has committed.

Commits are grouped: a write commits the index at once unless the last commit is less than
`COMMIT_DELAY` old, in which case a timer commits shortly (a tantivy commit fsyncs, tens of
milliseconds; a bulk import would otherwise spend much of its time there). A search in
the same process commits anything pending first, so a process always finds what it wrote; other
processes see it within `COMMIT_DELAY` plus the reader's reload delay.

Only one process can hold the writer: the first to write takes it and keeps it. Every process
writes the read model (the trace sessions of what it ingests, its transcript imports), so the
holder also follows the others: every `FOLLOW_INTERVAL` seconds, or at once when nudged
(`nudge`: another process said it wrote), it compares the index's marks with the read model's
versions and catches up the projects that moved. A process that finds the writer held
(`IndexBusyError`) searches but leaves the index to the holder, and tries to take the writer
again only after `FOLLOW_INTERVAL` (the holder may have gone).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, delete, insert, select
from sqlalchemy.engine import Engine

from mcpd.sessions.search.analysis import Unit
from mcpd.sessions.search.documents import IndexDoc, IndexFilter, Mark
from mcpd.sessions.search.index import IndexBusyError, SearchIndex
from mcpd.sessions.store import SearchQuery
from mcpd.storage.sql.engine import read_connection
from mcpd.storage.sql.schema.sessions import events, search_log, session_versions, sessions
from mcpd.storage.sql.sessions.backend import Ranked
from mcpd.storage.sql.sessions.rows import Row, is_searchable, search_text
from mcpd.storage.sql.sessions.writes import CHUNK, Written, chunks

log = logging.getLogger("mcpd.storage.sessions")

# Seconds a write may wait for its index commit, to share it with the writes that follow.
COMMIT_DELAY = 0.25
# Seconds between the writer holder's looks at the read model for other processes' writes, and
# how long a process that found the writer held leaves it alone.
FOLLOW_INTERVAL = 1.0

_DOC_COLUMNS = (
    "project",
    "id",
    "session_id",
    "turn_id",
    "type",
    "harness",
    "source",
    "timestamp_ns",
    "text",
    "tool_name",
    "payload",
)


def index_doc(row: Row) -> IndexDoc:
    """The index document of a searchable event row."""
    return IndexDoc(
        project=row["project"],
        event_id=row["id"],
        session_id=row["session_id"],
        turn_id=row["turn_id"],
        type=row["type"],
        harness=row["harness"],
        source=row["source"],
        timestamp_ns=row["timestamp_ns"],
        text=search_text(row),
    )


class TantivySearch:
    """The embedded search backend: a tantivy index in `path`, opened on first use."""

    def __init__(
        self, engine: Engine, path: Path, *, follow_interval_s: float = FOLLOW_INTERVAL
    ) -> None:
        self._engine = engine
        self._path = path
        self._lock = threading.RLock()
        self._index: SearchIndex | None = None
        self._last_commit = 0.0
        self._timer: threading.Timer | None = None
        self._follow_interval_s = follow_interval_s
        self._follower: threading.Thread | None = None
        self._wake = threading.Event()
        self._closing = False
        # Until when (monotonic) another process is taken to hold the writer.
        self._busy_until = 0.0

    def in_transaction(self, conn: Connection, written: Written) -> None:
        """Log the write's difference for whichever process holds the index's writer (the index
        itself is written after the commit)."""
        fresh = [row["id"] for row in written.fresh_events if is_searchable(row)]
        row = {"project": written.project, "version": written.version}
        conn.execute(
            insert(search_log), [{**row, "stale": list(written.stale_event_ids), "fresh": fresh}]
        )

    def after_commit(self, written: Written) -> None:
        """Apply the write's difference, or catch the project up; commit now or soon. The
        first write that takes the writer starts following other processes' writes."""
        with self._lock:
            if time.monotonic() < self._busy_until:
                return  # the holder follows this write
            index = self._open()
            project = written.project
            try:
                if index.marks().get(project) == Mark(written.generation, written.previous_version):
                    index.update(
                        delete_events=[(project, event_id) for event_id in written.stale_event_ids],
                        docs=[index_doc(row) for row in written.fresh_events if is_searchable(row)],
                        marks={project: Mark(written.generation, written.version)},
                        commit=False,
                    )
                else:
                    self._catch_up(index, project)
                self._commit_soon(index)
            except IndexBusyError as error:
                self._busy_until = time.monotonic() + self._follow_interval_s
                log.info("search index left to its writer: %s", error)
                return
            self._follow()

    def nudge(self) -> None:
        """Have the follower (if this process holds the writer) look at the read model now."""
        self._wake.set()

    def catch_up(self) -> int:
        """Catch up every project whose read-model version moved past the index's mark (what
        other processes wrote); return how many sessions were re-indexed. Raises
        IndexBusyError when another process holds the writer."""
        with self._lock:
            index = self._open()
            with read_connection(self._engine) as conn:
                current = {
                    str(project): Mark(str(generation), int(version))
                    for project, generation, version in conn.execute(
                        select(
                            session_versions.c.project,
                            session_versions.c.generation,
                            session_versions.c.version,
                        )
                    )
                }
            marks = index.marks()
            behind = sorted(
                {p for p, mark in current.items() if marks.get(p) != mark}
                | (marks.keys() - current.keys())
            )
            count = sum(self._catch_up(index, project) for project in behind)
            if behind:
                self._commit_soon(index)
            return count

    def rank(self, units: Sequence[Unit], query: SearchQuery) -> Ranked:
        """Rank with tantivy (BM25, block-max WAND), after committing this process's writes."""
        index = self._open()
        if index.pending():
            self.flush()
        where = IndexFilter(
            project=query.project,
            event_types=list(query.event_types),
            session_id=query.session_id,
            turn_id=query.turn_id,
            harness=query.harness,
            source=query.source,
        )
        hits, truncated = index.search(units, where, query.limit)
        weights = index.weights(units) if hits else None
        return Ranked([(hit.event_id, hit.score) for hit in hits], truncated, weights)

    def flush(self) -> None:
        """Commit what is pending now."""
        with self._lock:
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None
            if self._index is not None and self._index.pending():
                self._index.commit()
                self._last_commit = time.monotonic()

    def reconcile(self) -> int:
        """Catch every project up; sessions re-indexed (0 when another process writes)."""
        with self._lock:
            index = self._open()
            try:
                return self._reconcile(index)
            except IndexBusyError as error:
                log.info("search index not reconciled: %s", error)
                return 0

    def rebuild(self) -> int:
        """Empty the index and index every searchable event again; return the event count."""
        with self._lock:
            index = self._open()
            index.wipe()
            self._reconcile(index)
            return index.document_count()

    def close(self) -> None:
        """Stop following, commit what is pending and release the writer lock."""
        self._closing = True
        self._wake.set()
        if self._follower is not None:
            self._follower.join()
        with self._lock:
            self.flush()
            if self._index is not None:
                self._index.close()

    def _follow(self) -> None:
        """Start the follower once (this process holds the writer from now on)."""
        if self._follower is None and not self._closing:
            self._follower = threading.Thread(
                target=self._run_follower, name="search-index-follower", daemon=True
            )
            self._follower.start()

    def _run_follower(self) -> None:
        while True:
            self._wake.wait(self._follow_interval_s)
            self._wake.clear()
            if self._closing:
                return
            try:
                self.catch_up()
                self._trim_log()
            except Exception:
                log.exception("search index catch-up failed; retried at the next look")

    def _trim_log(self) -> None:
        """Forget the logged differences the index's last commit holds."""
        with self._lock:
            marks = self._open().committed_marks()
        if not marks:
            return
        with self._engine.begin() as conn:
            for project, mark in sorted(marks.items()):
                conn.execute(
                    delete(search_log).where(
                        search_log.c.project == project, search_log.c.version <= mark.version
                    )
                )

    def _open(self) -> SearchIndex:
        with self._lock:
            if self._index is None:
                self._index = SearchIndex(self._path)
            return self._index

    def _commit_soon(self, index: SearchIndex) -> None:
        if not index.pending():
            self._last_commit = time.monotonic()  # the catch-up committed
            return
        wait = self._last_commit + COMMIT_DELAY - time.monotonic()
        if wait <= 0:
            self.flush()
        elif self._timer is None:
            self._timer = threading.Timer(wait, self._flush_later)
            self._timer.daemon = True
            self._timer.start()

    def _flush_later(self) -> None:
        with self._lock:
            self._timer = None
            try:
                self.flush()
            except Exception:
                log.exception("search index commit failed; the next write catches up")

    def _reconcile(self, index: SearchIndex) -> int:
        with read_connection(self._engine) as conn:
            projects = set(conn.execute(select(session_versions.c.project)).scalars())
        try:
            return sum(self._catch_up(index, p) for p in sorted(projects | set(index.marks())))
        finally:
            # A process that only searches must not keep the lock from the one that writes.
            index.release_writer()

    def _apply_log(
        self, index: SearchIndex, conn: Connection, project: str, named: set[str], truth: Mark
    ) -> int:
        """Replace the documents of the events the log names by their current ones; return
        how many sessions they are of."""
        ids = sorted(named)
        docs = list(_docs_of_events(conn, project, ids))
        index.update(
            delete_events=[(project, event_id) for event_id in ids],
            docs=docs,
            marks={project: truth},
        )
        return len({doc.session_id for doc in docs})

    def _catch_up(self, index: SearchIndex, project: str) -> int:
        """Re-index what the index lacks of `project`; return how many sessions."""
        mark = index.marks().get(project)
        with read_connection(self._engine) as conn:
            current = conn.execute(
                select(session_versions.c.generation, session_versions.c.version).where(
                    session_versions.c.project == project
                )
            ).one_or_none()
            if current is None:  # the project is gone from the read model
                index.update(delete_projects=[project], marks={project: None})
                return 0
            truth = Mark(str(current[0]), int(current[1]))
            if mark == truth:
                return 0
            whole = mark is None or mark.generation != truth.generation
            whole = whole or mark is None or mark.version > truth.version
            if not whole and mark is not None:
                logged = _logged(conn, project, mark.version, truth.version)
                if logged is not None:
                    return self._apply_log(index, conn, project, logged, truth)
            since = 0 if whole or mark is None else mark.version
            ids = list(
                conn.execute(
                    select(sessions.c.id).where(
                        sessions.c.project == project, sessions.c.version > since
                    )
                ).scalars()
            )
            index.update(
                delete_projects=[project] if whole else [],
                delete_sessions=[] if whole else [(project, session_id) for session_id in ids],
                docs=_docs(conn, project, None if whole else ids),
                marks={project: truth},
            )
        return len(ids)


def _logged(conn: Connection, project: str, since: int, until: int) -> set[str] | None:
    """The events the log names for the versions after `since` up to `until`, or None when it
    lacks one of them (trimmed, or written before the log was kept)."""
    found: set[str] = set()
    versions: list[int] = []
    rows = conn.execute(
        select(search_log.c.version, search_log.c.stale, search_log.c.fresh)
        .where(
            search_log.c.project == project,
            search_log.c.version > since,
            search_log.c.version <= until,
        )
        .order_by(search_log.c.version)
    )
    for version, stale, fresh in rows:
        versions.append(int(version))
        found.update(stale)
        found.update(fresh)
    return found if versions == list(range(since + 1, until + 1)) else None


def _docs(conn: Connection, project: str, session_ids: list[str] | None) -> Iterator[IndexDoc]:
    """The documents of the project's searchable events (of `session_ids`, when given)."""
    columns: list[Any] = [events.c[name] for name in _DOC_COLUMNS]
    scopes = [None] if session_ids is None else list(chunks(session_ids))
    for scope in scopes:
        statement = select(*columns).where(events.c.project == project)
        if scope is not None:
            statement = statement.where(events.c.session_id.in_(scope))
        result = conn.execute(statement.execution_options(yield_per=CHUNK))
        for row in result.mappings():
            if is_searchable(row):
                yield index_doc(dict(row))


def _docs_of_events(conn: Connection, project: str, event_ids: list[str]) -> Iterator[IndexDoc]:
    """The documents of those of these events that exist and are searchable."""
    columns: list[Any] = [events.c[name] for name in _DOC_COLUMNS]
    for chunk in chunks(event_ids):
        statement = select(*columns).where(events.c.project == project, events.c.id.in_(chunk))
        for row in conn.execute(statement).mappings():
            if is_searchable(row):
                yield index_doc(dict(row))
