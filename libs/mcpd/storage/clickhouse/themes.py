"""Notes filed under entities, and the snapshots clustering passes write (`ThemeRecords` in
`mcpd.storage.interfaces`), on ClickHouse: `aspect_notes` with the columns of migration 0009,
and the tables `theme_snapshots`, `themes` (0001, widened by 0009), `theme_members` and
`theme_endings` (0009). The semantics are those of `mcpd.storage.sql.themes`.

**Notes** are read as the other signal reads are (`signals.reads`): FINAL, with conditions kept
after it, and one row per note id (its latest arrival) where a note re-sent with another
`created_at` (another sort key) could be two. An unfiled note (stored before 0009) has the
entity '' and is left out, as the SQL backends leave out a NULL one. Bytes (a note's sketch, a
theme's wording) are stored as hex text, '' when absent (`signals.columns`).

**Snapshots are written once, without a transaction.** `write_snapshot` reads whether the
snapshot id is stored and, when it is not, writes the themes, members and endings, each table
in ONE INSERT, and the snapshot row LAST, every row tagged with the write's `write_id` (the
wall clock in ns, then random bits). Within the process the check and the writes are one step
(`_LOCK`). Replicas running the same pass at the same instant may both pass the check and both
write; a write that fails part-way leaves rows without their snapshot row. So every read takes,
of each snapshot id, the copy of the least `write_id` among its snapshot rows (`LIMIT 1 BY`
after `ORDER BY write_id`), and of the other tables only the rows of that write (`_CHOSEN`):
one whole copy of each snapshot is read, never a mix of two writers' rows (which may differ
when notes arrived between their reads), and nothing of a write whose snapshot row is missing.
The losing copy stays on disk; two replicas reading the same notes write identical copies
(`services/intelligence/passes.py`), so which one wins does not show.

**Ordinals** are counted when read: the row number of a snapshot among its entity's stored
snapshots by (cutoff_at, snapshot_id), over one copy of each.

**Erasure** (`erase_note_themes`, called by `signals.erasure.erase_subject` with the note ids it
deletes): theme labels copied from those notes are blanked (`ALTER TABLE ... UPDATE`, a mutation
applied asynchronously on a server) and their member rows deleted (a lightweight DELETE, through
the caller's eraser, which applies the mask afterwards). The counts are of what reads showed
(one copy of each row) before the change.

**Traces** (`trace_starts`, `trace_projects`, `ended_traces`) are read as `signals.reads` reads
them: of `traces` FINAL the newest live version of each trace (`is_deleted = 0`, a moved trace's
old key holding a tombstone), of `spans` FINAL the latest arrival of each span id.
"""

from __future__ import annotations

import json
import secrets
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, cast

from mcpd.signals.rows import AspectNoteRow
from mcpd.storage.clickhouse.executor import ClickHouseExecutor
from mcpd.storage.clickhouse.params import datetime64_text
from mcpd.storage.clickhouse.signals.columns import ASPECT_NOTES, as_rows, load_json
from mcpd.storage.stored_json import scrub_nul
from mcpd.storage.theme_records import (
    AspectTally,
    EndingRow,
    Entity,
    EntityTally,
    HistoryRow,
    MemberRow,
    PassNote,
    SnapshotRow,
    SnapshotWrite,
    ThemeErasure,
    ThemeRow,
    TraceEnding,
    error_class,
    split_wordings,
    step_key,
    trace_ending,
)

__all__ = [
    "aspect_tallies",
    "ended_traces",
    "entity_tallies",
    "erase_note_themes",
    "latest_snapshots",
    "note_texts",
    "noted_entities",
    "pass_notes",
    "snapshot",
    "snapshot_members",
    "snapshot_themes",
    "snapshots",
    "theme_entity",
    "theme_history",
    "theme_member_count",
    "theme_members_page",
    "theme_wordings",
    "trace_notes",
    "trace_projects",
    "trace_starts",
    "write_snapshot",
]

Delete = Callable[[str, str, Mapping[str, object]], None]
"""A lightweight DELETE of the project's rows of a table matching a condition (the eraser's)."""

_PROJECT = "project = {project:String}"
_ENTITY = "entity_kind = {kind:String} AND entity_name = {name:String}"
# Conditions stay after FINAL: one on a column outside the sort key must not filter versions
# before FINAL picks the newest.
_FINAL = " SETTINGS optimize_move_to_prewhere_if_final = 0"
# Skip indexes under FINAL, for lookups whose column is in the sort key (every version of a row
# then has the same value, so a skipped granule never hides a newer version).
_FINAL_SKIP = _FINAL + ", use_skip_indexes_if_final = 1"
# Ids per statement where a caller passes a list: bounds a parameter (in the URL on a server).
_SLICE = 500
_FORMAT = "JSONEachRow"


def _chosen(snapshot: str = "") -> str:
    """The condition that keeps, of a theme table, the rows of each snapshot's chosen write
    (the least write_id among its snapshot rows); `snapshot` narrows the subquery."""
    return (
        "(snapshot_id, write_id) IN (SELECT snapshot_id, min(write_id) FROM theme_snapshots "
        f"WHERE {_PROJECT}{snapshot} GROUP BY snapshot_id)"
    )


_CHOSEN = _chosen()
_CHOSEN_ONE = _chosen(" AND snapshot_id = {snapshot_id:String}")


def _entity_params(project: str, entity: Entity) -> dict[str, object]:
    return {"project": project, "kind": entity.kind, "name": entity.name}


# --- notes --------------------------------------------------------------------------------------


def noted_entities(
    executor: ClickHouseExecutor, window_from: int, window_to: int
) -> list[tuple[str, Entity]]:
    """`ThemeRecords.noted_entities`."""
    found = executor.query(
        "SELECT DISTINCT project, entity_kind, entity_name FROM aspect_notes FINAL "
        "WHERE created_at >= fromUnixTimestamp64Nano({from:Int64}, 'UTC') "
        "AND created_at < fromUnixTimestamp64Nano({to:Int64}, 'UTC') AND entity_kind != ''"
        + _FINAL,
        {"from": window_from, "to": window_to},
    )
    return sorted((str(project), Entity(str(kind), str(name))) for project, kind, name in found)


def pass_notes(
    executor: ClickHouseExecutor,
    project: str,
    entity: Entity,
    aspect: str,
    window: tuple[int, int],
    before: tuple[int, str] | None,
    limit: int,
) -> list[PassNote]:
    """`ThemeRecords.pass_notes`: newest first by (created_at, note_id)."""
    params: dict[str, object] = {
        **_entity_params(project, entity),
        "aspect": aspect,
        "from": window[0],
        "to": window[1],
        "limit": limit,
    }
    where = (
        f"{_PROJECT} AND aspect = {{aspect:String}} AND {_ENTITY} AND sketch != '' "
        "AND created_at >= fromUnixTimestamp64Nano({from:Int64}, 'UTC') "
        "AND created_at < fromUnixTimestamp64Nano({to:Int64}, 'UTC')"
    )
    after = ""
    if before is not None:
        # After the newest note of each trace is chosen, so a page never holds a note its trace
        # replaced on an earlier page.
        after = " WHERE (created, note_id) < ({before_at:Int64}, {before_id:String})"
        params.update(before_at=before[0], before_id=before[1])
    found = executor.query(
        "SELECT note_id, trace_id, created, sketch FROM ("
        + _newest_per_trace(
            "SELECT note_id, trace_id, aspect, toUnixTimestamp64Nano(created_at) AS created, "
            f"sketch FROM aspect_notes FINAL WHERE {where} "
            "ORDER BY received_at DESC LIMIT 1 BY note_id"
        )
        + f"){after} ORDER BY created DESC, note_id DESC LIMIT {{limit:UInt64}}"
        + _FINAL,
        params,
    )
    return [
        PassNote(str(note_id), str(trace_id), int(created), bytes.fromhex(sketch))
        for note_id, trace_id, created, sketch in found
    ]


def note_texts(
    executor: ClickHouseExecutor, project: str, note_ids: Sequence[str]
) -> dict[str, str]:
    """`ThemeRecords.note_texts`."""
    ids = sorted(set(note_ids))
    texts: dict[str, str] = {}
    for start in range(0, len(ids), _SLICE):
        found = executor.query(
            f"SELECT note_id, text FROM aspect_notes FINAL WHERE {_PROJECT} "
            "AND note_id IN {ids:Array(String)} ORDER BY received_at DESC LIMIT 1 BY note_id"
            + _FINAL_SKIP,
            {"project": project, "ids": ids[start : start + _SLICE]},
        )
        texts.update((str(note_id), str(text)) for note_id, text in found)
    return texts


def _tallied(where: str, groups: str) -> str:
    """Per `groups`, the notes (one row per note id), traces and latest creation of the
    project's filed notes matching `where`."""
    return (
        f"SELECT {groups}, count(), uniqExact(trace_id), max(created) FROM ("
        + _newest_per_trace(
            "SELECT note_id, trace_id, aspect, entity_kind, entity_name, "
            "toUnixTimestamp64Nano(created_at) AS created FROM aspect_notes FINAL "
            f"WHERE {_PROJECT} AND entity_kind != ''{where} "
            "ORDER BY received_at DESC LIMIT 1 BY note_id"
        )
        + f") GROUP BY {groups}"
        + _FINAL
    )


def _newest_per_trace(notes: str) -> str:
    """Of `notes` (a query of one row per note id with `trace_id`, `aspect`, `note_id` and
    `created`), the newest of each trace and aspect: a later note about a trace along an aspect
    replaces an earlier one (the SQL backends delete the earlier one when writing)."""
    return (
        f"SELECT * FROM ({notes}) ORDER BY created DESC, note_id DESC LIMIT 1 BY trace_id, aspect"
    )


def aspect_tallies(
    executor: ClickHouseExecutor, project: str, entity: Entity | None
) -> list[AspectTally]:
    """`ThemeRecords.aspect_tallies`."""
    params: dict[str, object] = {"project": project}
    where = ""
    if entity is not None:
        where = f" AND {_ENTITY}"
        params = _entity_params(project, entity)
    found = executor.query(_tallied(where, "entity_kind, entity_name, aspect"), params)
    return [
        AspectTally(Entity(str(kind), str(name)), str(aspect), int(notes), int(traces), int(last))
        for kind, name, aspect, notes, traces, last in found
    ]


def entity_tallies(
    executor: ClickHouseExecutor, project: str, kind: str | None
) -> list[EntityTally]:
    """`ThemeRecords.entity_tallies`."""
    params: dict[str, object] = {"project": project}
    where = ""
    if kind is not None:
        where = " AND entity_kind = {kind:String}"
        params["kind"] = kind
    found = executor.query(_tallied(where, "entity_kind, entity_name"), params)
    return [
        EntityTally(Entity(str(kind_), str(name)), int(notes), int(traces), int(last))
        for kind_, name, notes, traces, last in found
    ]


def trace_notes(executor: ClickHouseExecutor, project: str, trace_id: str) -> list[AspectNoteRow]:
    """`ThemeRecords.trace_notes`: every note about the trace, one row per note id."""
    # The newest note of each aspect (see `_newest_per_trace`), every column as stored.
    found = executor.query(
        f"SELECT {ASPECT_NOTES.select_list()} FROM aspect_notes FINAL WHERE {_PROJECT} "
        "AND trace_id = {trace_id:String} AND (note_id, received_at) IN ("
        "SELECT note_id, received_at FROM (SELECT note_id, aspect, created_at, received_at "
        f"FROM aspect_notes FINAL WHERE {_PROJECT} AND trace_id = {{trace_id:String}} "
        "ORDER BY received_at DESC LIMIT 1 BY note_id) "
        "ORDER BY created_at DESC, note_id DESC LIMIT 1 BY aspect) "
        "ORDER BY note_id LIMIT 1 BY note_id" + _FINAL,
        {"project": project, "trace_id": trace_id},
    )
    return cast(list[AspectNoteRow], as_rows(ASPECT_NOTES, found))


def trace_starts(
    executor: ClickHouseExecutor, project: str, trace_ids: Sequence[str]
) -> dict[str, int]:
    """`ThemeRecords.trace_starts`: from each trace's live row (its newest version)."""
    ids = sorted(set(trace_ids))
    starts: dict[str, int] = {}
    for start in range(0, len(ids), _SLICE):
        found = executor.query(
            "SELECT trace_id, toUnixTimestamp64Nano(start_time) FROM traces FINAL "
            f"WHERE {_PROJECT} AND trace_id IN {{ids:Array(String)}} AND is_deleted = 0 "
            "ORDER BY version DESC LIMIT 1 BY trace_id" + _FINAL_SKIP,
            {"project": project, "ids": ids[start : start + _SLICE]},
        )
        starts.update((str(trace_id), int(at)) for trace_id, at in found)
    return starts


def trace_projects(executor: ClickHouseExecutor) -> list[str]:
    """`ThemeRecords.trace_projects`: the projects of the live trace rows, sorted. Read without
    FINAL, which would merge every row of the table: an older version of a trace row has the
    project of its newest one, and a tombstone (left out) stands beside its trace's live row."""
    found = executor.query(
        "SELECT DISTINCT project FROM traces WHERE is_deleted = 0 ORDER BY project"
    )
    return [str(project) for (project,) in found]


def ended_traces(
    executor: ClickHouseExecutor,
    project: str,
    ended: tuple[int, int],
    aspect: str,
    after: str | None,
    limit: int,
) -> list[TraceEnding]:
    """`ThemeRecords.ended_traces`: of each trace's live row (its newest version), the complete
    ones whose end_time is in [ended) and that no note along `aspect` is about, by trace id;
    then, of the page's spans (the latest arrival of each span id), the root's kind and run
    status and each failed span's error class, in (start_time, span_id) order."""
    params: dict[str, object] = {
        "project": project,
        "from": ended[0],
        "to": ended[1],
        "aspect": aspect,
        "limit": limit,
    }
    after_condition = ""
    if after is not None:
        after_condition = " AND trace_id > {after:String}"
        params["after"] = after
    ended_in = (
        "is_complete AND end_time >= fromUnixTimestamp64Nano({from:Int64}, 'UTC') "
        "AND end_time < fromUnixTimestamp64Nano({to:Int64}, 'UTC')"
    )
    # The candidates are the traces with some row (any version, read without FINAL) that ended
    # in the window, which the newest version of every wanted trace is; the test is repeated on
    # the newest live row of each (after LIMIT 1 BY), so an older version, or an older live row
    # (see `signals.reads.stored_trace_keys`), never stands in for it.
    found = executor.query(
        "SELECT trace_id, status, error_count, toUnixTimestamp64Nano(end_time) FROM ("
        "SELECT trace_id, status, error_count, end_time, is_complete FROM traces FINAL "
        f"WHERE {_PROJECT} AND is_deleted = 0{after_condition} AND trace_id IN ("
        f"SELECT trace_id FROM traces WHERE {_PROJECT} AND is_deleted = 0{after_condition} "
        f"AND {ended_in}) "
        f"ORDER BY version DESC LIMIT 1 BY trace_id) WHERE {ended_in} "
        f"AND trace_id NOT IN (SELECT trace_id FROM aspect_notes WHERE {_PROJECT} "
        "AND aspect = {aspect:String}) "
        "ORDER BY trace_id LIMIT {limit:UInt64}" + _FINAL_SKIP,
        params,
    )
    if not found:
        return []
    ids = [str(row[0]) for row in found]
    roots: dict[str, tuple[str, Any, str | None]] = {}
    failed: dict[str, list[tuple[str, str | None]]] = {}
    for start in range(0, len(ids), _SLICE):
        # Root and status are tested on the latest arrival of each span (a span re-sent with
        # another start_time is two rows under FINAL).
        for trace_id, is_root, kind, status, attributes_text, error, run_id in executor.query(
            "SELECT trace_id, is_root, kind, status, attributes, error, run_id FROM ("
            "SELECT trace_id, span_id, is_root, kind, status, start_time, attributes, error, "
            f"run_id FROM spans FINAL WHERE {_PROJECT} AND trace_id IN {{ids:Array(String)}} "
            "ORDER BY received_at DESC LIMIT 1 BY trace_id, span_id) "
            "WHERE is_root OR status = 'error' ORDER BY trace_id, start_time, span_id"
            + _FINAL_SKIP,
            {"project": project, "ids": ids[start : start + _SLICE]},
        ):
            attributes = load_json(attributes_text)
            if is_root:  # the first root in start order, as the projection chooses it
                roots.setdefault(str(trace_id), (str(kind), attributes, str(run_id) or None))
            if status == "error":
                failed.setdefault(str(trace_id), []).append(
                    (error_class(attributes, load_json(error)), step_key(attributes))
                )
    return [
        trace_ending(
            str(trace_id),
            str(status),
            int(errors),
            int(end),
            roots.get(str(trace_id)),
            failed.get(str(trace_id), []),
        )
        for trace_id, status, errors, end in found
    ]


# --- writing a snapshot -------------------------------------------------------------------------

# A read of whether a snapshot is stored and the writes it decides, as one step in the process.
_LOCK = threading.Lock()

SNAPSHOTS: dict[str, str] = {
    "project": "String",
    "snapshot_id": "String",
    "entity_kind": "String",
    "entity_name": "String",
    "aspects": "Array(String)",
    "ordinal": "UInt64",
    "cutoff_at": "DateTime64(9)",
    "window_from": "DateTime64(9)",
    "window_to": "DateTime64(9)",
    "trace_count": "UInt64",
    "note_count": "UInt64",
    "capped": "Bool",
    "write_id": "String",
}
THEMES: dict[str, str] = {
    "project": "String",
    "snapshot_id": "String",
    "aspect": "String",
    "theme_id": "String",
    "entity_kind": "String",
    "entity_name": "String",
    "label": "String",
    "label_note_id": "String",
    "label_trace_id": "String",
    "state": "String",
    "note_count": "UInt64",
    "trace_count": "UInt64",
    "coverage": "Float64",
    "split_from": "Array(String)",
    "split_into": "Array(String)",
    "merged_from": "Array(String)",
    "wording": "String",
    "write_id": "String",
}
MEMBERS: dict[str, str] = {
    "project": "String",
    "snapshot_id": "String",
    "aspect": "String",
    "theme_id": "String",
    "note_id": "String",
    "trace_id": "String",
    "similarity": "UInt32",
    "write_id": "String",
}
ENDINGS: dict[str, str] = {
    "project": "String",
    "snapshot_id": "String",
    "aspect": "String",
    "theme_id": "String",
    "state": "String",
    "merged_into": "Array(String)",
    "write_id": "String",
}


def write_snapshot(executor: ClickHouseExecutor, project: str, write: SnapshotWrite) -> bool:
    """`ThemeRecords.write_snapshot`: False (nothing written) when the snapshot id is stored;
    else the themes, members and endings, then the snapshot row (module docstring)."""
    snap = write.snapshot
    if any(theme.snapshot_id != snap.snapshot_id for theme in write.themes):
        # The rows of a write are read by (snapshot id, write id): a theme must be its own.
        raise ValueError(f"a theme of snapshot {snap.snapshot_id!r} names another snapshot")
    with _LOCK:
        stored = executor.query(
            f"SELECT 1 FROM theme_snapshots WHERE {_PROJECT} "
            "AND snapshot_id = {snapshot_id:String} LIMIT 1",
            {"project": project, "snapshot_id": snap.snapshot_id},
        )
        if stored:
            return False
        write_id = f"{time.time_ns():020d}-{secrets.token_hex(8)}"
        common = {"project": project, "snapshot_id": snap.snapshot_id, "write_id": write_id}
        _insert(
            executor, "themes", THEMES, [_theme_values(theme, common) for theme in write.themes]
        )
        members = [
            {
                **common,
                "aspect": member.aspect,
                "theme_id": member.theme_id,
                "note_id": member.note_id,
                "trace_id": member.trace_id,
                "similarity": member.similarity,
            }
            for member in write.members
        ]
        _insert(executor, "theme_members", MEMBERS, members)
        endings = [
            {
                **common,
                "aspect": ending.aspect,
                "theme_id": ending.theme_id,
                "state": ending.state,
                "merged_into": list(ending.merged_into),
            }
            for ending in write.endings
        ]
        _insert(executor, "theme_endings", ENDINGS, endings)
        _insert(executor, "theme_snapshots", SNAPSHOTS, [_snapshot_values(snap, common)])
    return True


def _snapshot_values(snap: SnapshotRow, common: Mapping[str, Any]) -> dict[str, Any]:
    return {
        **common,
        "entity_kind": snap.entity.kind,
        "entity_name": snap.entity.name,
        "aspects": list(snap.aspects),
        "ordinal": snap.ordinal,
        "cutoff_at": snap.cutoff_at,
        "window_from": snap.window_from,
        "window_to": snap.window_to,
        "trace_count": snap.trace_count,
        "note_count": snap.note_count,
        "capped": snap.capped,
    }


def _theme_values(theme: ThemeRow, common: Mapping[str, Any]) -> dict[str, Any]:
    return {
        **common,
        "aspect": theme.aspect,
        "theme_id": theme.theme_id,
        "entity_kind": theme.entity.kind,
        "entity_name": theme.entity.name,
        "label": theme.label,
        "label_note_id": theme.label_note_id,
        "label_trace_id": theme.label_trace_id,
        "state": theme.state,
        "note_count": theme.note_count,
        "trace_count": theme.trace_count,
        "coverage": theme.coverage,
        "split_from": list(theme.split_from),
        "split_into": list(theme.split_into),
        "merged_from": list(theme.merged_from),
        "wording": theme.wording.hex(),
    }


def _insert(
    executor: ClickHouseExecutor,
    table: str,
    columns: Mapping[str, str],
    rows: Sequence[Mapping[str, Any]],
) -> None:
    """ONE INSERT of `rows` (each holding every column) as JSONEachRow data, a DateTime64 as
    its exact text and a NUL character in a string as U+FFFD; nothing for no rows."""
    if not rows:
        return
    times = [name for name, kind in columns.items() if kind.startswith("DateTime64")]
    lines = []
    for row in rows:
        values = {name: row[name] for name in columns}
        for name in times:
            values[name] = datetime64_text(values[name])
        line = json.dumps(values, ensure_ascii=False, separators=(",", ":"))
        if "\\u0000" in line:
            line = json.dumps(
                {name: scrub_nul(value) for name, value in values.items()},
                ensure_ascii=False,
                separators=(",", ":"),
            )
        lines.append(line)
    executor.insert(table, list(columns), "\n".join(lines).encode(), _FORMAT)


# --- reading snapshots --------------------------------------------------------------------------

# A snapshot's columns as `_snapshot` reads them, ordinal last.
_SNAPSHOT_COLUMNS = (
    "snapshot_id, entity_kind, entity_name, aspects, "
    "toUnixTimestamp64Nano(cutoff_at) AS cutoff, toUnixTimestamp64Nano(window_from), "
    "toUnixTimestamp64Nano(window_to), trace_count, note_count, capped"
)


def _numbered(where: str) -> str:
    """The project's snapshots matching `where` (which must select whole entities), one copy of
    each, with their ordinal among their entity's stored snapshots: a subquery."""
    return (
        f"SELECT {_SNAPSHOT_COLUMNS}, row_number() OVER ("
        "PARTITION BY entity_kind, entity_name ORDER BY cutoff_at, snapshot_id) AS ordinal_now "
        f"FROM (SELECT * FROM theme_snapshots WHERE {_PROJECT}{where} "
        "ORDER BY write_id LIMIT 1 BY snapshot_id)"
    )


def _snapshot(row: Sequence[Any]) -> SnapshotRow:
    (
        snapshot_id,
        kind,
        name,
        aspects,
        cutoff,
        window_from,
        window_to,
        traces,
        notes,
        capped,
        ordinal,
    ) = row
    return SnapshotRow(
        snapshot_id=str(snapshot_id),
        entity=Entity(str(kind), str(name)),
        aspects=tuple(str(aspect) for aspect in aspects),
        ordinal=int(ordinal),
        cutoff_at=int(cutoff),
        window_from=int(window_from),
        window_to=int(window_to),
        trace_count=int(traces),
        note_count=int(notes),
        capped=bool(capped),
    )


def snapshots(
    executor: ClickHouseExecutor,
    project: str,
    entity: Entity,
    cutoff_from: int | None,
    cutoff_to: int | None,
) -> list[SnapshotRow]:
    """`ThemeRecords.snapshots`: oldest first."""
    params = _entity_params(project, entity)
    conditions = ["1"]
    if cutoff_from is not None:
        conditions.append("cutoff >= {cutoff_from:Int64}")
        params["cutoff_from"] = cutoff_from
    if cutoff_to is not None:
        conditions.append("cutoff < {cutoff_to:Int64}")
        params["cutoff_to"] = cutoff_to
    found = executor.query(
        f"SELECT * FROM ({_numbered(f' AND {_ENTITY}')}) WHERE {' AND '.join(conditions)} "
        "ORDER BY cutoff, snapshot_id",
        params,
    )
    return [_snapshot(row) for row in found]


def snapshot(executor: ClickHouseExecutor, project: str, snapshot_id: str) -> SnapshotRow | None:
    """`ThemeRecords.snapshot`: numbered among its entity's snapshots."""
    entity = (
        " AND (entity_kind, entity_name) IN (SELECT entity_kind, entity_name "
        f"FROM theme_snapshots WHERE {_PROJECT} AND snapshot_id = {{snapshot_id:String}})"
    )
    found = executor.query(
        f"SELECT * FROM ({_numbered(entity)}) WHERE snapshot_id = {{snapshot_id:String}}",
        {"project": project, "snapshot_id": snapshot_id},
    )
    return _snapshot(found[0]) if found else None


def latest_snapshots(executor: ClickHouseExecutor, project: str) -> dict[Entity, SnapshotRow]:
    """`ThemeRecords.latest_snapshots`: of each entity, the snapshot of the highest ordinal."""
    found = executor.query(
        f"SELECT * FROM ({_numbered('')}) "
        "ORDER BY cutoff DESC, snapshot_id DESC LIMIT 1 BY entity_kind, entity_name",
        {"project": project},
    )
    latest = (_snapshot(row) for row in found)
    return {snap.entity: snap for snap in sorted(latest, key=lambda snap: snap.entity)}


# --- reading themes -----------------------------------------------------------------------------

_THEME_COLUMNS = (
    "snapshot_id, aspect, theme_id, entity_kind, entity_name, label, label_note_id, "
    "label_trace_id, state, note_count, trace_count, coverage, split_from, split_into, "
    "merged_from, wording"
)


def _theme(row: Sequence[Any]) -> ThemeRow:
    (
        snapshot_id,
        aspect,
        theme_id,
        kind,
        name,
        label,
        label_note_id,
        label_trace_id,
        state,
        notes,
        traces,
        coverage,
        split_from,
        split_into,
        merged_from,
        wording,
    ) = row
    return ThemeRow(
        snapshot_id=str(snapshot_id),
        aspect=str(aspect),
        theme_id=str(theme_id),
        entity=Entity(str(kind), str(name)),
        label=str(label),
        label_note_id=str(label_note_id),
        label_trace_id=str(label_trace_id),
        state=str(state),
        note_count=int(notes),
        trace_count=int(traces),
        coverage=float(coverage),
        split_from=tuple(str(theme) for theme in split_from),
        split_into=tuple(str(theme) for theme in split_into),
        merged_from=tuple(str(theme) for theme in merged_from),
        wording=bytes.fromhex(wording),
    )


def snapshot_themes(
    executor: ClickHouseExecutor, project: str, snapshot_id: str, aspects: Sequence[str] | None
) -> list[ThemeRow]:
    """`ThemeRecords.snapshot_themes`: by aspect, then theme id."""
    params: dict[str, object] = {"project": project, "snapshot_id": snapshot_id}
    where = f"{_PROJECT} AND snapshot_id = {{snapshot_id:String}} AND {_CHOSEN_ONE}"
    if aspects is not None:
        where += " AND aspect IN {aspects:Array(String)}"
        params["aspects"] = list(aspects)
    found = executor.query(
        f"SELECT {_THEME_COLUMNS} FROM themes WHERE {where} ORDER BY aspect, theme_id", params
    )
    return [_theme(row) for row in found]


def theme_wordings(
    executor: ClickHouseExecutor, project: str, entity: Entity, aspect: str, before: int
) -> tuple[list[ThemeRow], list[ThemeRow]]:
    """`ThemeRecords.theme_wordings`: worked out from every row of the entity's themes along
    the aspect in snapshots before `before`, as on the SQL backends."""
    columns = ", ".join(f"t.{name.strip()}" for name in _THEME_COLUMNS.split(","))
    found = executor.query(
        f"SELECT {columns}, s.cutoff FROM themes AS t INNER JOIN ("
        "SELECT snapshot_id, write_id, toUnixTimestamp64Nano(cutoff_at) AS cutoff "
        f"FROM theme_snapshots WHERE {_PROJECT} AND {_ENTITY} "
        "AND cutoff_at < fromUnixTimestamp64Nano({before:Int64}, 'UTC') "
        "ORDER BY write_id LIMIT 1 BY snapshot_id"
        ") AS s ON t.snapshot_id = s.snapshot_id AND t.write_id = s.write_id "
        "WHERE t.project = {project:String} AND t.entity_kind = {kind:String} "
        "AND t.entity_name = {name:String} AND t.aspect = {aspect:String} "
        "ORDER BY s.cutoff, t.theme_id",
        {**_entity_params(project, entity), "aspect": aspect, "before": before},
    )
    rows = [(int(row[-1]), _theme(row[:-1])) for row in found]
    return split_wordings(snapshots(executor, project, entity, None, before), aspect, rows)


def theme_entity(executor: ClickHouseExecutor, project: str, theme_id: str) -> Entity | None:
    """`ThemeRecords.theme_entity`: from the theme's rows, else from the snapshot of one of its
    endings (retention may have taken every snapshot that held it)."""
    params = {"project": project, "theme_id": theme_id}
    found = executor.query(
        f"SELECT entity_kind, entity_name FROM themes WHERE {_PROJECT} "
        f"AND theme_id = {{theme_id:String}} AND {_CHOSEN} LIMIT 1",
        params,
    )
    if not found:
        found = executor.query(
            f"SELECT entity_kind, entity_name FROM theme_snapshots WHERE {_PROJECT} "
            "AND snapshot_id IN (SELECT snapshot_id FROM theme_endings WHERE "
            f"{_PROJECT} AND theme_id = {{theme_id:String}} AND {_CHOSEN}) LIMIT 1",
            params,
        )
    return Entity(str(found[0][0]), str(found[0][1])) if found else None


def theme_history(
    executor: ClickHouseExecutor, project: str, theme_id: str, aspect: str | None
) -> list[HistoryRow]:
    """`ThemeRecords.theme_history`: the theme's rows, then its endings, oldest cutoff first."""
    entity = theme_entity(executor, project, theme_id)
    if entity is None:
        return []
    by_snapshot = {
        snap.snapshot_id: snap for snap in snapshots(executor, project, entity, None, None)
    }
    params: dict[str, object] = {"project": project, "theme_id": theme_id}
    where = f"{_PROJECT} AND theme_id = {{theme_id:String}} AND {_CHOSEN}"
    if aspect is not None:
        where += " AND aspect = {aspect:String}"
        params["aspect"] = aspect
    found: list[HistoryRow] = []
    for row in executor.query(
        f"SELECT {_THEME_COLUMNS} FROM themes WHERE {where} ORDER BY snapshot_id, aspect", params
    ):
        theme = _theme(row)
        snap = by_snapshot.get(theme.snapshot_id)
        if snap is not None:
            found.append(HistoryRow(snap, theme, None))
    for snapshot_id, aspect_, theme_id_, state, merged_into in executor.query(
        "SELECT snapshot_id, aspect, theme_id, state, merged_into FROM theme_endings "
        f"WHERE {where} ORDER BY snapshot_id, aspect",
        params,
    ):
        snap = by_snapshot.get(str(snapshot_id))
        if snap is not None:
            ending = EndingRow(
                str(aspect_), str(theme_id_), str(state), tuple(str(t) for t in merged_into)
            )
            found.append(HistoryRow(snap, None, ending))
    found.sort(key=lambda point: (point.snapshot.cutoff_at, point.snapshot.snapshot_id))
    return found


# --- reading members ----------------------------------------------------------------------------

_MEMBER = f"{_PROJECT} AND snapshot_id = {{snapshot_id:String}} AND {_CHOSEN_ONE}"
_MEMBER_COLUMNS = "aspect, theme_id, note_id, trace_id, similarity"


def _member(row: Sequence[Any]) -> MemberRow:
    aspect, theme_id, note_id, trace_id, similarity = row
    return MemberRow(str(aspect), str(theme_id), str(note_id), str(trace_id), int(similarity))


def theme_members_page(
    executor: ClickHouseExecutor,
    project: str,
    snapshot_id: str,
    aspect: str,
    theme_id: str,
    after: tuple[int, str] | None,
    limit: int,
) -> list[MemberRow]:
    """`ThemeRecords.theme_members`: by (similarity desc, note_id)."""
    params: dict[str, object] = {
        "project": project,
        "snapshot_id": snapshot_id,
        "aspect": aspect,
        "theme_id": theme_id,
        "limit": limit,
    }
    where = f"{_MEMBER} AND aspect = {{aspect:String}} AND theme_id = {{theme_id:String}}"
    if after is not None:
        where += (
            " AND (similarity < {after_similarity:UInt32} OR "
            "(similarity = {after_similarity:UInt32} AND note_id > {after_id:String}))"
        )
        params.update(after_similarity=after[0], after_id=after[1])
    found = executor.query(
        f"SELECT {_MEMBER_COLUMNS} FROM theme_members WHERE {where} "
        "ORDER BY similarity DESC, note_id LIMIT {limit:UInt64}",
        params,
    )
    return [_member(row) for row in found]


def theme_member_count(
    executor: ClickHouseExecutor, project: str, snapshot_id: str, aspect: str, theme_id: str
) -> int:
    """`ThemeRecords.member_count`."""
    found = executor.query(
        f"SELECT count() FROM theme_members WHERE {_MEMBER} "
        "AND aspect = {aspect:String} AND theme_id = {theme_id:String}",
        {"project": project, "snapshot_id": snapshot_id, "aspect": aspect, "theme_id": theme_id},
    )
    return int(found[0][0])


def snapshot_members(
    executor: ClickHouseExecutor, project: str, snapshot_id: str, aspects: Sequence[str]
) -> list[MemberRow]:
    """`ThemeRecords.snapshot_members`."""
    found = executor.query(
        f"SELECT {_MEMBER_COLUMNS} FROM theme_members WHERE {_MEMBER} "
        "AND aspect IN {aspects:Array(String)} ORDER BY aspect, theme_id, note_id",
        {"project": project, "snapshot_id": snapshot_id, "aspects": list(aspects)},
    )
    return [_member(row) for row in found]


# --- erasure ------------------------------------------------------------------------------------


def erase_note_themes(
    executor: ClickHouseExecutor,
    project: str,
    note_chunks: Sequence[Sequence[str]],
    delete: Delete,
) -> ThemeErasure:
    """Take erased notes, given in chunks that fit a statement's parameters
    (`signals.erasure.chunks`), out of the themes: blank the labels copied from them and delete
    their member rows (part of an erasure, under its lock; module docstring). Returns the theme
    rows and member rows matched, as reads show them."""
    labels = examples = 0
    for chunk in note_chunks:
        params = {"project": project, "ids": list(chunk)}
        shown, stored = executor.query(
            f"SELECT uniqExactIf((snapshot_id, aspect, theme_id), {_CHOSEN}), count() "
            f"FROM themes WHERE {_PROJECT} AND label_note_id IN {{ids:Array(String)}}",
            params,
        )[0]
        labels += int(shown)
        if int(stored):
            executor.command(
                f"ALTER TABLE themes UPDATE label = '' WHERE {_PROJECT} "
                "AND label_note_id IN {ids:Array(String)}",
                params,
            )
        shown, stored = executor.query(
            f"SELECT uniqExactIf((snapshot_id, aspect, theme_id, note_id), {_CHOSEN}), count() "
            f"FROM theme_members WHERE {_PROJECT} AND note_id IN {{ids:Array(String)}}",
            params,
        )[0]
        examples += int(shown)
        if int(stored):
            delete("theme_members", "note_id IN {ids:Array(String)}", params)
    return ThemeErasure(labels=labels, examples=examples)
