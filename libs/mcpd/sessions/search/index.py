"""The embedded search index: tantivy (BM25 with block-max WAND top-k pruning) on local disk.

One index holds every project's searchable events; `project` is a filter field, so nothing a
query returns crosses projects. Beside tantivy's files, `mcpd-state.json` records, per project,
the read-model version and generation the index has caught up with: the SQL read model is the
truth, and its owner (`mcpd.storage.sql.sessions`) brings the index up to date from it.

Only one process may write (tantivy's writer lock); any number may search. The writer is taken
on the first write and kept until `close`; a reader process sees the writer's commits on its
next search (the reader reloads on commit). Changes may be applied without committing (a commit
waits for indexing and fsyncs, tens of milliseconds, so a burst of writes shares one); they
become visible, and their marks durable, at the next `commit`. Thread-safe: writes are
serialised by a lock.
"""

from __future__ import annotations

import fcntl
import json
import math
import os
import shutil
import threading
from collections.abc import Iterable, Sequence
from pathlib import Path

import tantivy

from mcpd.sessions.search.analysis import ANALYSIS_VERSION, Unit, analyzer
from mcpd.sessions.search.documents import (
    PROJECT_CODE,
    SEP,
    TOKENIZER,
    TYPE_CODE,
    IndexDoc,
    IndexFilter,
    IndexHit,
    Mark,
    document,
    schema,
    value_code,
)

SCHEMA_VERSION = 2
FORMAT = f"mcpd-events-s{SCHEMA_VERSION}-a{ANALYSIS_VERSION}"
STATE_FILE = "mcpd-state.json"
WRITER_HEAP_BYTES = 64_000_000
# How many tied hits a search reads, at most, to order a tie that straddles the limit.
MAX_TIE_READ = 2_000
# The unfiltered first try reads enough hits to expect PREFETCH_MARGIN times the wanted ones
# to pass the filter (at the filter's share of the documents), at least PREFETCH_MIN; a filter
# too narrow to expect that within PREFETCH_MAX hits goes straight to the filtered query, which
# is cheap for a narrow filter.
PREFETCH_MARGIN = 3
PREFETCH_MIN = 100
PREFETCH_MAX = 2_000


class IndexBusyError(Exception):
    """Another process holds the index's writer lock."""


class SearchIndex:
    """The tantivy index under `path` (a directory of its own)."""

    def __init__(self, path: Path) -> None:
        self._path = path
        self._schema = schema()
        self._lock = threading.RLock()
        self._writer: tantivy.IndexWriter | None = None
        # Committed marks, and those of changes applied since the last commit.
        self._marks: dict[str, Mark] = {}
        self._staged: dict[str, Mark | None] = {}
        self._dirty = False
        self._index = self._open()

    @property
    def path(self) -> Path:
        """The index directory."""
        return self._path

    def marks(self) -> dict[str, Mark]:
        """Per project, what the index has caught up with, counting changes applied but not yet
        committed (they commit in order, before anything applied later)."""
        with self._lock:
            view = dict(self._marks)
            for project, mark in self._staged.items():
                if mark is None:
                    view.pop(project, None)
                else:
                    view[project] = mark
            return view

    def committed_marks(self) -> dict[str, Mark]:
        """Per project, what the index's last commit holds (changes applied since excluded)."""
        with self._lock:
            return dict(self._marks)

    def pending(self) -> bool:
        """Whether changes are applied but not committed (not yet visible to searches)."""
        return self._dirty

    def update(
        self,
        *,
        docs: Iterable[IndexDoc] = (),
        delete_events: Iterable[tuple[str, str]] = (),
        delete_sessions: Iterable[tuple[str, str]] = (),
        delete_projects: Iterable[str] = (),
        marks: dict[str, Mark | None] | None = None,
        commit: bool = True,
    ) -> None:
        """Apply deletions (by (project, id)), then additions, and `marks` (None forgets a
        project); commit unless told not to. Raises IndexBusyError when another process
        writes. A failure discards every uncommitted change, earlier ones included."""
        with self._lock:
            writer = self._acquire_writer()
            try:
                for project in delete_projects:
                    writer.delete_documents_by_term("project", project)
                for project, session_id in delete_sessions:
                    writer.delete_documents_by_term("skey", project + SEP + session_id)
                for project, event_id in delete_events:
                    writer.delete_documents_by_term("key", project + SEP + event_id)
                for doc in docs:
                    writer.add_document(document(doc))
            except BaseException:
                self._discard(writer)
                raise
            self._staged.update(marks or {})
            self._dirty = True
            if commit:
                self.commit()

    def commit(self) -> None:
        """Make the applied changes durable and visible, then record their marks."""
        with self._lock:
            if not self._dirty or self._writer is None:
                return
            try:
                self._writer.commit()
            except BaseException:
                self._discard(self._writer)
                raise
            self._index.reload()
            self._marks = self.marks()
            self._staged.clear()
            self._dirty = False
            self._save_state()

    def wipe(self) -> None:
        """Remove every document and mark (a rebuild starts here)."""
        with self._lock:
            writer = self._acquire_writer()
            writer.delete_all_documents()
            self._staged = {project: None for project in self.marks()}
            self._dirty = True
            self.commit()

    def search(
        self, units: Sequence[Unit], where: IndexFilter, limit: int
    ) -> tuple[list[IndexHit], bool]:
        """The best `limit` hits ordered by (score desc, timestamp desc, id asc), and whether
        more matched. Units are OR-ed; a tie at the limit is resolved over all tied hits.

        A filter that only names the project and the event types is tried first as an
        unfiltered query, whose top hits are checked against the filter by their fast fields:
        that query is pruned (block-max WAND), which a conjunction with filters is not. Its
        answer is used only when it provably holds every match the filtered query would rank
        at or above the limit; otherwise the filtered query runs.
        """
        if not units or not where.event_types or limit < 1:
            return [], False
        searcher = self._index.searcher()
        candidates = self._prefiltered(searcher, units, where, limit)
        if candidates is None:
            candidates = self._filtered(searcher, units, where, limit)
        return _ordered(searcher, candidates, limit)

    def _filtered(
        self, searcher: tantivy.Searcher, units: Sequence[Unit], where: IndexFilter, limit: int
    ) -> list[tuple[float, tantivy.DocAddress]]:
        """The filtered query's hits down to the limit's score, ties at the limit included,
        and one more when more matched."""
        query = self._query(units, where)
        wanted = limit + 1
        while True:
            hits = searcher.search(query, limit=wanted, count=False).hits
            tie_cut = len(hits) == wanted and hits[-1][0] >= hits[limit - 1][0]
            if not tie_cut or wanted >= MAX_TIE_READ:
                return list(hits)
            wanted = min(wanted * 4, MAX_TIE_READ)

    def _prefiltered(
        self, searcher: tantivy.Searcher, units: Sequence[Unit], where: IndexFilter, limit: int
    ) -> list[tuple[float, tantivy.DocAddress]] | None:
        """The hits of the unfiltered query that pass the filter, when they are complete down
        to the limit's score (a filter never changes a score: filters score nothing); None when
        this path does not apply or cannot prove its answer complete."""
        narrowed = (where.session_id, where.turn_id, where.harness, where.source)
        if any(value is not None for value in narrowed):
            return None
        depth = _prefetch_depth(searcher, where, limit)
        if depth is None:
            return None
        hits = searcher.search(_text_query(self._schema, units), limit=depth, count=False).hits
        addresses = [address for _, address in hits]
        projects = searcher.fast_field_values(PROJECT_CODE, addresses)
        types = searcher.fast_field_values(TYPE_CODE, addresses)
        project = value_code(where.project)
        wanted_types = {value_code(event_type) for event_type in where.event_types}
        kept = [
            hit
            for hit, hit_project, hit_type in zip(hits, projects, types, strict=True)
            if hit_project == project and hit_type in wanted_types
        ]
        if len(hits) < depth:
            return kept  # every match was read
        # More hits may follow the last one read, none scoring above it: the kept hits are
        # complete from the limit's score up only when that score is above the last one read,
        # and `truncated` is known only when a match past the limit was kept.
        if len(kept) <= limit or kept[limit - 1][0] <= hits[-1][0]:
            return None
        return kept

    def weights(self, units: Sequence[Unit]) -> list[float]:
        """Each unit's inverse document frequency (a phrase: the sum of its tokens')."""
        searcher = self._index.searcher()
        total = searcher.num_docs
        return [
            sum(_idf(total, searcher.doc_freq("text", token)) for token in unit) for unit in units
        ]

    def document_count(self) -> int:
        """How many documents the index holds."""
        return int(self._index.searcher().num_docs)

    def release_writer(self) -> None:
        """Commit, then let another process write (waits for merges to finish). Idempotent."""
        with self._lock:
            self.commit()
            if self._writer is not None:
                writer, self._writer = self._writer, None
                writer.wait_merging_threads()

    def close(self) -> None:
        """Release the writer. The index stays on disk."""
        self.release_writer()

    def _query(self, units: Sequence[Unit], where: IndexFilter) -> tantivy.Query:
        schema = self._schema
        text = _text_query(schema, units)
        filters = [tantivy.Query.term_set_query(schema, "type", list(where.event_types))]
        exact = {
            "project": where.project,
            "session_id": where.session_id,
            "turn_id": where.turn_id,
            "harness": where.harness,
            "source": where.source,
        }
        for name, value in exact.items():
            if value is not None:
                filters.append(tantivy.Query.term_query(schema, name, value, index_option="basic"))
        # Filters score nothing: a hit's score is its text's BM25 alone.
        clauses = [(tantivy.Occur.Must, text)]
        clauses += [(tantivy.Occur.Must, tantivy.Query.const_score_query(f, 0.0)) for f in filters]
        return tantivy.Query.boolean_query(clauses)

    def _open(self) -> tantivy.Index:
        # Processes opening together must not both wipe and create: take turns.
        self._path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self._path.parent / f"{self._path.name}.lock", os.O_CREAT | os.O_RDWR, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            index = self._open_or_create()
        finally:
            os.close(fd)  # releases the lock
        index.register_tokenizer(TOKENIZER, analyzer())
        index.config_reader(reload_policy="commit")
        return index

    def _open_or_create(self) -> tantivy.Index:
        state = self._read_state()
        index: tantivy.Index | None = None
        if state is not None and tantivy.Index.exists(str(self._path)):
            try:
                index = tantivy.Index.open(str(self._path))
                self._marks = state
            except ValueError:
                index = None
        if index is None:
            # Missing, unreadable or of another format: start empty; the owner rebuilds.
            shutil.rmtree(self._path, ignore_errors=True)
            self._path.mkdir(parents=True, exist_ok=True)
            index = tantivy.Index(self._schema, path=str(self._path), reuse=False)
            self._marks = {}
            self._save_state()
        return index

    def _discard(self, writer: tantivy.IndexWriter) -> None:
        writer.rollback()
        self._staged.clear()
        self._dirty = False

    def _acquire_writer(self) -> tantivy.IndexWriter:
        if self._writer is None:
            try:
                self._writer = self._index.writer(heap_size=WRITER_HEAP_BYTES, num_threads=1)
            except ValueError as error:
                if "LockBusy" in str(error):
                    message = f"another process writes the search index {self._path}"
                    raise IndexBusyError(message) from error
                raise
        return self._writer

    def _read_state(self) -> dict[str, Mark] | None:
        try:
            state = json.loads((self._path / STATE_FILE).read_text(encoding="utf-8"))
            if state.get("format") != FORMAT:
                return None
            return {
                project: Mark(str(mark["generation"]), int(mark["version"]))
                for project, mark in state["projects"].items()
            }
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            return None

    def _save_state(self) -> None:
        # Written after the commit it describes, so it never claims more than the index holds:
        # lost or stale, it only makes the owner re-index more than it had to.
        projects = {
            project: {"generation": mark.generation, "version": mark.version}
            for project, mark in self._marks.items()
        }
        document = json.dumps({"format": FORMAT, "projects": projects}, sort_keys=True)
        temporary = self._path / f".{STATE_FILE}.tmp"
        temporary.write_text(document, encoding="utf-8")
        os.replace(temporary, self._path / STATE_FILE)


def _idf(total: int, frequency: int) -> float:
    return math.log(1.0 + (total - frequency + 0.5) / (frequency + 0.5))


def _text_query(schema: tantivy.Schema, units: Sequence[Unit]) -> tantivy.Query:
    """The units OR-ed: a token's term query, a phrase's phrase query."""
    terms = [
        tantivy.Query.term_query(schema, "text", unit[0])
        if len(unit) == 1
        else tantivy.Query.phrase_query(schema, "text", list(unit))
        for unit in units
    ]
    if len(terms) == 1:
        return terms[0]
    return tantivy.Query.boolean_query([(tantivy.Occur.Should, term) for term in terms])


def _prefetch_depth(searcher: tantivy.Searcher, where: IndexFilter, limit: int) -> int | None:
    """How many unfiltered hits to read to expect enough that pass `where`; None when the
    filter is too narrow for that to pay (or nothing is indexed)."""
    total = searcher.num_docs
    if total == 0:
        return None
    typed = sum(searcher.doc_freq("type", event_type) for event_type in set(where.event_types))
    share = min(1.0, typed / total) * min(1.0, searcher.doc_freq("project", where.project) / total)
    if share <= 0:
        return None
    depth = math.ceil(PREFETCH_MARGIN * (limit + 1) / share)
    return None if depth > PREFETCH_MAX else max(depth, PREFETCH_MIN)


def _ordered(
    searcher: tantivy.Searcher, candidates: list[tuple[float, tantivy.DocAddress]], limit: int
) -> tuple[list[IndexHit], bool]:
    """The best `limit` of `candidates` in the contract's order, and whether there were more.
    Only those scoring at least the limit's score can place, so only their ids are read."""
    if not candidates:
        return [], False
    ranked = sorted(candidates, key=lambda hit: -hit[0])
    floor = ranked[min(limit, len(ranked)) - 1][0]
    placing = [hit for hit in ranked if hit[0] >= floor]
    stamps = searcher.fast_field_values("timestamp_ns", [address for _, address in placing])
    found = [
        IndexHit(str(searcher.doc(address).get_first("event_id")), score, int(stamp or 0))
        for (score, address), stamp in zip(placing, stamps, strict=True)
    ]
    found.sort(key=lambda hit: (-hit.score, -hit.timestamp_ns, hit.event_id))
    return found[:limit], len(candidates) > limit
