"""Deleting from the trace store on ClickHouse: one trace (`delete_trace`), one subject's records
(`erase_subject`), and retention (`apply_retention`, and `set_default_ttl` for the engine).

**How rows go.** Each delete is a lightweight `DELETE FROM`: ClickHouse masks the rows in the
parts holding them and, by default (`lightweight_deletes_sync`), returns once that is done, so
from then on no read sees them, FINAL reads included. That matters more than the cost: a trace
re-projected by a write, or a session rebuilt from its spans, reads what is stored and writes it
back as new parts, which an `ALTER TABLE ... DELETE` issued earlier but not yet applied would
never touch. Masked rows are still on disk, so every table a call deleted from then gets
`ALTER TABLE ... APPLY DELETED MASK`, a mutation that rewrites the parts without them. On a
server it runs after the call returns: that is `ErasureCounts.deletes_pending`. (chdb applies it
before returning.)

**Matching.** What to delete is matched by queries first and named by identity afterwards: a
trace by its trace id in `spans`, `held_spans` and `traces` (every version and copy of its rows
carries it), and a log, metric, score, feedback or aspect note by its own id, so every stored
copy of a matched row goes, not only the copies that carry the match (a re-sent row is a second
copy until merges fold it, and the copy left behind would become what FINAL reads). Counts are
of identities, which is what reads show: two unmerged copies of one span count once. Ids travel
as query parameters, in chunks that keep each statement's URL far below a server's cap.

**Rollups.** The hours of the spans and trace rows a delete is about to remove are noted
(`rollups.Rebuild`), and once they are gone those hours' rollup rows, and their days', are
computed again from what is stored, under the same hold of the write lock. So are the hours of
every copy of the scores a delete touches, for the score rollups (`score_rollups`).

**Concurrency.** Deletes take the process-wide write lock of `mcpd.storage.clickhouse.signals`,
so no write of this process re-projects a trace between the match and the delete. A retention
pass takes it per step (one table's rows, or the traces that arrived before the cutoff), not
for the whole pass, so ingest is not held up for all of it.

**Retention** is measured on `received_at`. A part (an immutable block of one monthly partition)
whose every row is this project's and past the cutoff is dropped whole (`DROP PART`, a metadata
operation); when every part of a month qualifies, that is dropping the month. Parts are checked
rather than partitions because a part cannot change after the check: a late row of another
project written into the same month lands in a new part, which stays. The remaining expired rows
are deleted. The tables are partitioned by their rows' own time (start_time, timestamp,
created_at), not by `received_at`, which is why a month is never dropped on its name alone.
"""

from __future__ import annotations

import functools
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field

from mcpd.runtime.errors import InvalidArgument
from mcpd.sessions.model import TRACE_HARNESS
from mcpd.signals.queries import STAT_SIGNALS, ErasureCounts, ErasureSubject
from mcpd.storage.clickhouse.evaluation import empty_captured_items
from mcpd.storage.clickhouse.executor import ClickHouseError, ClickHouseExecutor
from mcpd.storage.clickhouse.signals import _WRITE_LOCK
from mcpd.storage.clickhouse.signals.columns import ROW_ID
from mcpd.storage.clickhouse.signals.rollups import Rebuild
from mcpd.storage.clickhouse.themes import erase_note_themes

# Tables whose rows belong to one trace: a trace is erased from them whole, by its id.
TRACE_TABLES: tuple[str, ...] = ("spans", "held_spans", "traces")
# Tables whose rows name a trace and carry a correlation of their own: matched by either.
CORRELATED_TABLES: tuple[str, ...] = ("logs", "metrics", "scores", "feedback", "aspect_notes")
_IDENTITY: dict[str, tuple[str, ...]] = {
    **ROW_ID,
    "traces": ("trace_id",),
    "ingest_keys": ("ingest_key",),
}

# The session read model's tables; sessions built from traces (harness TRACE_HARNESS) are keyed
# by the traces' session id.
SESSION_TABLES: tuple[tuple[str, str], ...] = (
    ("sessions", "id"),
    ("turns", "session_id"),
    ("events", "session_id"),
    ("file_touches", "session_id"),
    ("trace_turns", "session_id"),
)

RETENTION_TABLES: dict[str, tuple[str, ...]] = {
    "spans": ("spans", "held_spans", "traces", "aspect_notes"),
    **{signal: (signal,) for signal in STAT_SIGNALS if signal != "spans"},
}
"""The tables each signal's retention window sweeps (`TraceStore.apply_retention`), and whose
rows its count is made of."""

# Bytes of ids per statement. A parameter travels in the URL, which a server caps at 1 MiB, and
# URL encoding can triple it.
CHUNK_BYTES = 256 * 1024
NO_SUCH_PART = 232  # ClickHouse's NO_SUCH_DATA_PART: the part was merged or mutated meanwhile.

_PROJECT = "project = {project:String}"
_IN_TRACES = "trace_id IN {ids:Array(String)}"
_EXPIRED = "received_at < fromUnixTimestamp64Nano({cutoff:Int64}, 'UTC')"


# --- the three TraceStore calls -----------------------------------------------------------------


def delete_trace(executor: ClickHouseExecutor, project: str, trace_id: str) -> int:
    """`TraceStore.delete_trace`: the trace row, spans, held spans, and the logs, metrics,
    scores, feedback and aspect notes naming the trace, and the notes' copies in themes; returns
    how many matched (0 for an unknown trace). The session read model is not touched (the
    caller's contract), nor are dataset items captured from the trace (a case kept on purpose
    outlives its trace)."""
    with _WRITE_LOCK:
        eraser = _Eraser(executor, project)
        removed = sum(eraser.traces(table, [trace_id]) for table in TRACE_TABLES)
        matched = {table: eraser.matching(table, [trace_id], None) for table in CORRELATED_TABLES}
        removed += sum(eraser.remove(table, ids) for table, ids in matched.items())
        erase_note_themes(executor, project, [matched["aspect_notes"]], eraser.delete)
        eraser.rollups.run()
        eraser.purge()
    return removed


def erase_subject(
    executor: ClickHouseExecutor, project: str, subject: ErasureSubject
) -> ErasureCounts:
    """`TraceStore.erase_subject`: every trace with a span of the subject, whole; the logs,
    metrics, scores, feedback and aspect notes naming those traces or carrying the subject in
    their own correlation; and the session read model's sessions built from those traces or
    named by `subject.session_id`. The dataset items captured from those traces are emptied in
    place (`evaluation.empty_captured_items`: a new version without input, expected and
    metadata), not deleted. The erased notes are taken out of the themes
    (`themes.erase_note_themes`: labels copied from them blanked, their member rows deleted).
    Counts are what matched; the physical removal is pending."""
    match = _SubjectMatch.of(subject)
    if match is None:
        return ErasureCounts(deletes_pending=True)
    with _WRITE_LOCK:
        traces = _subject_traces(executor, project, match)
        keys = _session_keys(executor, project, traces)
        if subject.session_id:
            keys.add(subject.session_id)
        eraser = _Eraser(executor, project)
        counts = {table: eraser.traces(table, traces) for table in TRACE_TABLES}
        # Matched before anything of them goes: the notes' copies in themes go with them.
        matched = {table: eraser.matching(table, traces, match) for table in CORRELATED_TABLES}
        counts.update({table: eraser.remove(table, ids) for table, ids in matched.items()})
        sessions = eraser.sessions(sorted(keys))
        items = empty_captured_items(executor, project, chunks(traces))
        taken = erase_note_themes(
            executor, project, list(chunks(matched["aspect_notes"])), eraser.delete
        )
        eraser.rollups.run()
        eraser.purge()
    return ErasureCounts(
        traces=counts["traces"],
        spans=counts["spans"] + counts["held_spans"],
        logs=counts["logs"],
        metrics=counts["metrics"],
        scores=counts["scores"],
        feedback=counts["feedback"],
        aspect_notes=counts["aspect_notes"],
        sessions=sessions,
        dataset_items=items.items,
        datasets=items.datasets,
        theme_labels=taken.labels,
        theme_examples=taken.examples,
        deletes_pending=True,
    )


def apply_retention(
    executor: ClickHouseExecutor, project: str, cutoffs: Mapping[str, int]
) -> dict[str, int]:
    """`TraceStore.apply_retention`: per signal, the project's rows with `received_at` before
    the cutoff (ns) go from every table in RETENTION_TABLES[signal], by dropping parts where
    that is exact and deleting rows elsewhere (module docstring). As on the SQL backends, a
    trace that arrived before the spans cutoff goes whole: its spans, held spans and aspect
    notes that arrived later too, so no span outlives its trace row. Returns, per signal, the
    identities matched in its tables (spans: trace rows, spans, held spans and aspect notes).

    Raises InvalidArgument (field `cutoffs`) for a signal outside STAT_SIGNALS, before
    deleting anything."""
    unknown = sorted(set(cutoffs) - set(STAT_SIGNALS))
    if unknown:
        raise InvalidArgument(
            f"no retention for {', '.join(unknown)}; signals are {', '.join(STAT_SIGNALS)}",
            field="cutoffs",
        )
    eraser = _Eraser(executor, project)
    removed: dict[str, int] = {}
    for signal, cutoff in cutoffs.items():
        steps = [
            functools.partial(eraser.expire, table, cutoff) for table in RETENTION_TABLES[signal]
        ]
        if signal == "spans":
            # Read before the rows go: the trace rows say which traces arrived before the cutoff.
            old = _traces_before(executor, project, cutoff)
            steps += [functools.partial(eraser.traces, table, old) for table in TRACE_TABLES]
            steps.append(functools.partial(eraser.rows, "aspect_notes", old, None))
            # Snapshots go with the notes they were read from (not counted under the signal).
            steps.append(functools.partial(_expire_snapshots, eraser, cutoff))
        removed[signal] = 0
        for step in steps:
            # Held per step, not for the whole pass, so ingest is not held up for all of it.
            with _WRITE_LOCK:
                removed[signal] += step()
                eraser.rollups.run()
    eraser.purge()
    return removed


_SNAPSHOT_TABLES = ("theme_members", "theme_endings", "themes", "theme_snapshots")


def _expire_snapshots(eraser: _Eraser, cutoff: int) -> int:
    """Delete the project's snapshots whose window ended before `cutoff`, with their themes,
    members and endings; 0 (snapshots are not a signal's rows)."""
    condition = (
        "snapshot_id IN (SELECT snapshot_id FROM theme_snapshots WHERE project = {project:String} "
        "AND window_to < fromUnixTimestamp64Nano({cutoff:Int64}, 'UTC'))"
    )
    for table in _SNAPSHOT_TABLES:
        eraser.delete(table, condition, {"project": eraser.project, "cutoff": cutoff})
    return 0


def expire_ingest_keys(executor: ClickHouseExecutor, project: str, before: int) -> int:
    """`TraceStore.expire_ingest_keys`: the project's keys recorded before `before` (ns) go as
    expired rows of any signal do (`_Eraser.expire`), then the mask is applied. Returns the keys
    matched."""
    eraser = _Eraser(executor, project)
    with _WRITE_LOCK:
        matched = eraser.expire("ingest_keys", before)
    eraser.purge()
    return matched


# --- declarative retention ---------------------------------------------------------------------


def set_default_ttl(
    executor: ClickHouseExecutor, days: int | None, *, keep: Collection[str] = ()
) -> list[str]:
    """Hand the server's default retention window to the engine: every table of
    RETENTION_TABLES gets `TTL toDateTime(received_at) + toIntervalDay(days)` (received_at is a
    DateTime64(9); whole seconds are plenty for a window in days), which merges apply in the
    background, so expired rows go even when no retention pass runs. `days=None` removes it.

    The TTL covers every project's rows in a table. A project that keeps its data longer than
    the default (or for ever) must be in `keep`: the TTL then leaves its rows alone (`WHERE
    project NOT IN keep`) and its own window is the retention pass's job. Call at start, and
    again when the set of such projects changes. The TTL expires rows one by one, by their own
    arrival: removing a trace whole, late spans included, is the retention pass's job too.

    A table already carrying exactly this TTL is left as it is, since changing a TTL makes
    ClickHouse recompute it over every part (a mutation); the comparison is with the clause as
    ClickHouse prints it. Returns the tables altered."""
    if days is not None and days < 1:
        raise ValueError(f"a retention window is at least one day, not {days}")
    kept = sorted(keep)
    altered: list[str] = []
    for table, engine in _engines(executor):
        current = _current_ttl(engine)
        if days is None and current is not None:
            executor.command(f"ALTER TABLE {table} REMOVE TTL")
        elif days is not None and current != _printed_ttl(days, kept):
            clause, params = _ttl(days, kept)
            executor.command(f"ALTER TABLE {table} MODIFY TTL {clause}", params)
        else:
            continue
        altered.append(table)
    return altered


def _ttl(days: int, keep: Sequence[str]) -> tuple[str, dict[str, object]]:
    """The TTL clause of `set_default_ttl` and its parameters."""
    clause = "toDateTime(received_at) + toIntervalDay({days:UInt32})"
    if not keep:
        return clause, {"days": days}
    return f"{clause} WHERE project NOT IN {{keep:Array(String)}}", {"days": days, "keep": keep}


def _printed_ttl(days: int, keep: Sequence[str]) -> str:
    """The TTL clause as ClickHouse prints a `_ttl` it stored (parameters become `_CAST`
    calls, strings are quoted with backslash escapes)."""
    ttl = f"toDateTime(received_at) + toIntervalDay(_CAST({days}, 'UInt32'))"
    if not keep:
        return ttl
    listed = ", ".join("'" + name.replace("\\", "\\\\").replace("'", "\\'") + "'" for name in keep)
    return f"{ttl} WHERE project NOT IN _CAST([{listed}], 'Array(String)')"


def _engines(executor: ClickHouseExecutor) -> list[tuple[str, str]]:
    """(table, engine_full) of every retention table, in RETENTION_TABLES order."""
    tables = [table for tables in RETENTION_TABLES.values() for table in tables]
    found = dict(
        executor.query(
            "SELECT name, engine_full FROM system.tables "
            "WHERE database = currentDatabase() AND name IN {tables:Array(String)}",
            {"tables": tables},
        )
    )
    return [(table, str(found[table])) for table in tables]


def _current_ttl(engine: str) -> str | None:
    """The table TTL clause of an `engine_full`, or None."""
    _, found, rest = engine.partition(" TTL ")
    if not found:
        return None
    ttl, _, _ = rest.partition(" SETTINGS ")
    return ttl


# --- matching a subject ------------------------------------------------------------------------


@dataclass(frozen=True)
class _SubjectMatch:
    """The correlation filter of an erasure subject, for a table's columns or for the JSON
    document `held_spans` keeps each span in."""

    user_ids: tuple[str, ...]
    session_id: str | None

    @classmethod
    def of(cls, subject: ErasureSubject) -> _SubjectMatch | None:
        """The filter, or None when the subject names nobody. Empty values are dropped: '' is
        what a row without a user or a session stores, and must never match."""
        user_ids = tuple(sorted({user for user in subject.user_ids if user}))
        session_id = subject.session_id or None
        if not user_ids and session_id is None:
            return None
        return cls(user_ids, session_id)

    def where(self, *, in_json: str | None = None) -> str:
        """`(user_id IN ... OR session_id = ...)`, reading the fields from the JSON column
        `in_json` when given."""

        def column(name: str) -> str:
            return f"JSONExtractString({in_json}, '{name}')" if in_json else name

        found = []
        if self.user_ids:
            found.append(f"{column('user_id')} IN {{user_ids:Array(String)}}")
        if self.session_id is not None:
            found.append(f"{column('session_id')} = {{session_id:String}}")
        return "(" + " OR ".join(found) + ")"

    @property
    def params(self) -> dict[str, object]:
        """The parameters `where` names."""
        found: dict[str, object] = {"user_ids": list(self.user_ids)} if self.user_ids else {}
        if self.session_id is not None:
            found["session_id"] = self.session_id
        return found


def _subject_traces(executor: ClickHouseExecutor, project: str, match: _SubjectMatch) -> list[str]:
    """Every trace of the project with a span (stored or held) or a trace row of the subject."""
    found = executor.query(
        f"SELECT trace_id FROM spans WHERE {_PROJECT} AND {match.where()} "
        f"UNION DISTINCT SELECT trace_id FROM traces WHERE {_PROJECT} AND {match.where()} "
        f"UNION DISTINCT SELECT trace_id FROM held_spans WHERE {_PROJECT} "
        f"AND {match.where(in_json='row')}",
        {"project": project, **match.params},
    )
    return sorted(str(trace_id) for (trace_id,) in found)


def _traces_before(executor: ClickHouseExecutor, project: str, cutoff: int) -> list[str]:
    """The project's traces whose trace row says they arrived before `cutoff`."""
    found = executor.query(
        f"SELECT DISTINCT trace_id FROM traces WHERE {_PROJECT} AND {_EXPIRED}",
        {"project": project, "cutoff": cutoff},
    )
    return sorted(str(trace_id) for (trace_id,) in found)


def _session_keys(executor: ClickHouseExecutor, project: str, traces: Sequence[str]) -> set[str]:
    """The session ids the traces' spans carry: the keys of the sessions built from them."""
    return {
        str(key)
        for chunk in chunks(traces)
        for (key,) in executor.query(
            f"SELECT DISTINCT session_id FROM spans WHERE {_PROJECT} AND {_IN_TRACES} "
            "AND session_id != ''",
            {"project": project, "ids": chunk},
        )
    }


# --- deleting ------------------------------------------------------------------------------------


@dataclass
class _Eraser:
    """Counts and deletes within one project, remembering the tables it deleted from, which
    `purge` then rewrites without the masked rows."""

    executor: ClickHouseExecutor
    project: str
    touched: list[str] = field(default_factory=list)
    rollups: Rebuild = field(init=False)

    def __post_init__(self) -> None:
        self.rollups = Rebuild(self.executor, self.project)

    def traces(self, table: str, trace_ids: Sequence[str]) -> int:
        """Delete the traces' rows from a TRACE_TABLES table, every version and tombstone;
        return the identities matched. They are counted under FINAL, which leaves out the
        tombstones `traces` keeps at a trace's former sort keys (migration 0004); the trace id
        is in every table's sort key, so the condition cannot pick among a row's versions."""
        identity = ", ".join(_IDENTITY[table])
        matched = 0
        for chunk in chunks(trace_ids):
            params = {"project": self.project, "ids": chunk}
            rows = self.executor.query(
                f"SELECT uniqExact({identity}) FROM {table} FINAL "
                f"WHERE {_PROJECT} AND {_IN_TRACES}",
                params,
            )
            count = int(rows[0][0])
            if count:
                self.rollups.note(table, _IN_TRACES, params)
                self.delete(table, _IN_TRACES, params)
            matched += count
        return matched

    def rows(self, table: str, trace_ids: Sequence[str], match: _SubjectMatch | None) -> int:
        """Delete, from a CORRELATED_TABLES table, every copy of the rows naming one of the
        traces or matching the subject; return the identities matched."""
        return self.remove(table, self.matching(table, trace_ids, match))

    def matching(
        self, table: str, trace_ids: Sequence[str], match: _SubjectMatch | None
    ) -> list[str]:
        """The ids of the rows of a CORRELATED_TABLES table naming one of the traces or
        matching the subject, sorted."""
        (id_column,) = _IDENTITY[table]
        select = f"SELECT DISTINCT {id_column} FROM {table} WHERE {_PROJECT} AND "
        ids = {
            str(row_id)
            for chunk in chunks(trace_ids)
            for (row_id,) in self.executor.query(
                select + _IN_TRACES, {"project": self.project, "ids": chunk}
            )
        }
        if match is not None:
            found = self.executor.query(
                select + match.where(), {"project": self.project, **match.params}
            )
            ids.update(str(row_id) for (row_id,) in found)
        return sorted(ids)

    def remove(self, table: str, ids: Sequence[str]) -> int:
        """Delete every copy of the rows of a CORRELATED_TABLES table with these ids (as
        `matching` found them); return how many ids."""
        (id_column,) = _IDENTITY[table]
        if table == "scores":
            for chunk in chunks(ids):
                self.rollups.note(table, "score_id IN {ids:Array(String)}", {"ids": chunk})
        self._delete_ids(table, id_column, ids)
        return len(ids)

    def sessions(self, keys: Sequence[str]) -> int:
        """Delete the sessions built from traces with these session ids, with their turns,
        events, file touches and trace states; return how many sessions matched."""
        ids = self._session_ids(
            "SELECT DISTINCT id FROM sessions WHERE {project_clause} "
            "AND harness = {{harness:String}} AND session_key IN {{ids:Array(String)}}",
            keys,
        )
        # A trace session none of whose traces made an event yet has trace states and no row.
        unlisted = self._session_ids(
            "SELECT DISTINCT session_id FROM trace_turns WHERE {project_clause} "
            "AND session_key IN {{ids:Array(String)}}",
            keys,
        )
        for table, column in SESSION_TABLES:
            self._delete_ids(table, column, sorted(set(ids) | set(unlisted)))
        return len(ids)

    def _session_ids(self, sql: str, keys: Sequence[str]) -> list[str]:
        statement = sql.format(project_clause=_PROJECT)
        params: dict[str, object] = {"project": self.project, "harness": TRACE_HARNESS}
        return sorted(
            {
                str(session_id)
                for chunk in chunks(keys)
                for (session_id,) in self.executor.query(statement, {**params, "ids": chunk})
            }
        )

    def expire(self, table: str, cutoff: int) -> int:
        """Remove the project's rows of `table` with `received_at` before `cutoff`: drop the
        parts holding nothing else, delete the rest. Returns the identities whose current row
        arrived before the cutoff, which is what reads stop seeing: counted under FINAL (a
        trace's tombstones are not rows), the condition kept after it, as an older copy of a
        row that was sent again later goes but leaves its identity behind."""
        params: dict[str, object] = {"project": self.project, "cutoff": cutoff}
        identity = ", ".join(_IDENTITY[table])
        rows = self.executor.query(
            f"SELECT uniqExact({identity}) FROM {table} FINAL WHERE {_PROJECT} AND {_EXPIRED} "
            "SETTINGS optimize_move_to_prewhere_if_final = 0",
            params,
        )
        expired = _expired_parts(self.executor, table, params)
        if expired:
            self.rollups.note(table, _EXPIRED, params)
        whole = _whole_parts(self.executor, table, expired)
        dropped = sum(expired[part] for part in whole if self._drop_part(table, part))
        if dropped < sum(expired.values()):
            self.delete(table, _EXPIRED, params)
        return int(rows[0][0])

    def purge(self) -> None:
        """Rewrite every table deleted from without its masked rows (a mutation: on a server it
        runs after this returns)."""
        for table in self.touched:
            self.executor.command(f"ALTER TABLE {table} APPLY DELETED MASK")
        self.touched.clear()

    def _delete_ids(self, table: str, column: str, ids: Sequence[str]) -> None:
        for chunk in chunks(ids):
            condition = f"{column} IN {{ids:Array(String)}}"
            self.delete(table, condition, {"project": self.project, "ids": chunk})

    def delete(self, table: str, condition: str, params: Mapping[str, object]) -> None:
        """A lightweight DELETE of the project's rows of `table` matching `condition`."""
        self.executor.command(f"DELETE FROM {table} WHERE {_PROJECT} AND {condition}", params)
        if table not in self.touched:
            self.touched.append(table)

    def _drop_part(self, table: str, part: str) -> bool:
        """Drop one part; False when it is gone already (merged or mutated since it was
        checked: its rows are then deleted row by row)."""
        try:
            self.executor.command(f"ALTER TABLE {table} DROP PART {{part:String}}", {"part": part})
        except ClickHouseError as error:
            if error.clickhouse_code == NO_SUCH_PART:
                return False
            raise
        return True


def _expired_parts(
    executor: ClickHouseExecutor, table: str, params: Mapping[str, object]
) -> dict[str, int]:
    """Per part, how many of its rows are the project's and expired (parts with none left out):
    a read of the project's rows only, which the sort key (project first) finds."""
    found = executor.query(
        f"SELECT _part, count() FROM {table} WHERE {_PROJECT} AND {_EXPIRED} GROUP BY _part",
        params,
    )
    return {str(part): int(count) for part, count in found}


def _whole_parts(executor: ClickHouseExecutor, table: str, expired: Mapping[str, int]) -> list[str]:
    """The parts whose every row is among the expired ones counted in `expired`."""
    if not expired:
        return []
    found = executor.query(
        f"SELECT _part, count() FROM {table} WHERE _part IN {{parts:Array(String)}} GROUP BY _part",
        {"parts": sorted(expired)},
    )
    return sorted(str(part) for part, count in found if int(count) == expired[str(part)])


def chunks(values: Iterable[str], budget: int = CHUNK_BYTES) -> Iterator[list[str]]:
    """`values` in lists whose parameter text stays within `budget` bytes (a value costs its
    UTF-8 length and a few bytes of quoting), each list at least one value."""
    chunk: list[str] = []
    size = 0
    for value in values:
        cost = len(value.encode()) + 4
        if chunk and size + cost > budget:
            yield chunk
            chunk, size = [], 0
        chunk.append(value)
        size += cost
    if chunk:
        yield chunk
