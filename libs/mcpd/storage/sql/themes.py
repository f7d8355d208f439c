"""Notes filed under entities, and the snapshots clustering passes write (`ThemeRecords` in
`mcpd.storage.interfaces`), on SQLite and PostgreSQL, inside the caller's connection.

A snapshot is written whole in one transaction, once: a second writer of the same snapshot id
(another replica running the same pass) finds it stored and writes nothing. Ordinals are counted
when read, so dropping old snapshots renumbers the rest.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any, assert_never

from sqlalchemy import Connection, RowMapping, and_, distinct, func, insert, or_, select, tuple_
from sqlalchemy.sql import ColumnElement

from mcpd.signals.notes import INHERITED, Root, root_of
from mcpd.signals.rows import AspectNoteRow
from mcpd.storage.sql.dialect import SqlDialect
from mcpd.storage.sql.schema.trace import (
    aspect_notes,
    row_columns,
    spans,
    theme_endings,
    theme_members,
    theme_snapshots,
    themes,
    traces,
)
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
    "expire_snapshots",
    "keep_newest_notes",
    "latest_snapshots",
    "note_texts",
    "noted_entities",
    "pass_notes",
    "snapshot",
    "snapshot_members",
    "snapshot_themes",
    "snapshots",
    "stored_roots",
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

_NOTE_COLUMNS = row_columns(aspect_notes)
_KEYS_PER_DELETE = 500
_ROOT_COLUMNS = [
    spans.c.trace_id,
    spans.c.entity_kind,
    spans.c.entity_name,
    *(spans.c[name] for name in INHERITED),
]


def stored_roots(conn: Connection, project: str, trace_ids: Sequence[str]) -> dict[str, Root]:
    """The stored root spans of `trace_ids`, as notes are filed from them."""
    if not trace_ids:
        return {}
    rows = conn.execute(
        select(*_ROOT_COLUMNS).where(
            spans.c.project == project, spans.c.trace_id.in_(trace_ids), spans.c.is_root
        )
    ).mappings()
    return {row["trace_id"]: root_of(dict(row)) for row in rows}


def keep_newest_notes(conn: Connection, notes: Sequence[AspectNoteRow]) -> None:
    """A later note about a trace along an aspect replaces an earlier one: of the notes stored
    for each (trace, aspect) `notes` write to, delete all but the newest by (created_at,
    note_id), in the write's transaction. The stored notes of the written traces are read by
    the (project, trace_id) index and compared here, so the cost follows the traces written."""
    n = aspect_notes.c
    traces_of: dict[str, set[str]] = {}
    for note in notes:
        traces_of.setdefault(note["project"], set()).add(note["trace_id"])
    for project, trace_ids in sorted(traces_of.items()):
        ordered = sorted(trace_ids)
        newest: dict[tuple[str, str], tuple[int, str]] = {}
        stored: list[tuple[tuple[str, str], tuple[int, str]]] = []
        for start in range(0, len(ordered), _KEYS_PER_DELETE):
            rows = conn.execute(
                select(n.trace_id, n.aspect, n.created_at, n.note_id).where(
                    n.project == project,
                    n.trace_id.in_(ordered[start : start + _KEYS_PER_DELETE]),
                )
            )
            for trace_id, aspect, created_at, note_id in rows:
                key, order = (trace_id, aspect), (created_at, note_id)
                stored.append((key, order))
                newest[key] = max(newest.get(key, order), order)
        replaced = sorted(order[1] for key, order in stored if order != newest[key])
        for start in range(0, len(replaced), _KEYS_PER_DELETE):
            conn.execute(
                aspect_notes.delete().where(
                    n.project == project,
                    n.note_id.in_(replaced[start : start + _KEYS_PER_DELETE]),
                )
            )


def _entity_is(entity: Entity) -> ColumnElement[bool]:
    return and_(
        aspect_notes.c.entity_kind == entity.kind, aspect_notes.c.entity_name == entity.name
    )


def noted_entities(conn: Connection, window_from: int, window_to: int) -> list[tuple[str, Entity]]:
    rows = conn.execute(
        select(aspect_notes.c.project, aspect_notes.c.entity_kind, aspect_notes.c.entity_name)
        .where(
            aspect_notes.c.created_at >= window_from,
            aspect_notes.c.created_at < window_to,
            aspect_notes.c.entity_kind.is_not(None),
        )
        .distinct()
    )
    return sorted((project, Entity(kind, name)) for project, kind, name in rows)


def pass_notes(
    conn: Connection,
    project: str,
    entity: Entity,
    aspect: str,
    window: tuple[int, int],
    before: tuple[int, str] | None,
    limit: int,
) -> list[PassNote]:
    n = aspect_notes.c
    conditions = [
        n.project == project,
        _entity_is(entity),
        n.aspect == aspect,
        n.created_at >= window[0],
        n.created_at < window[1],
        n.sketch.is_not(None),
    ]
    if before is not None:
        # The plain bound is implied by the pair's; it is what bounds the index range (SQLite
        # reads a row value as a filter), so a page starts where the last ended, not at the
        # window's newest note.
        conditions.append(n.created_at <= before[0])
        conditions.append(tuple_(n.created_at, n.note_id) < tuple_(*before))
    rows = conn.execute(
        select(n.note_id, n.trace_id, n.created_at, n.sketch)
        .where(*conditions)
        .order_by(n.created_at.desc(), n.note_id.desc())
        .limit(limit)
    ).all()  # one fetch for the page, not one a row
    return [
        PassNote(note_id, trace_id, created, bytes(sketch))
        for note_id, trace_id, created, sketch in rows
    ]


def note_texts(conn: Connection, project: str, note_ids: Sequence[str]) -> dict[str, str]:
    if not note_ids:
        return {}
    rows = conn.execute(
        select(aspect_notes.c.note_id, aspect_notes.c.text).where(
            aspect_notes.c.project == project, aspect_notes.c.note_id.in_(note_ids)
        )
    )
    return {note_id: text for note_id, text in rows}


def aspect_tallies(conn: Connection, project: str, entity: Entity | None) -> list[AspectTally]:
    n = aspect_notes.c
    conditions = [n.project == project, n.entity_kind.is_not(None)]
    if entity is not None:
        conditions.append(_entity_is(entity))
    rows = conn.execute(
        select(
            n.entity_kind,
            n.entity_name,
            n.aspect,
            func.count(),
            func.count(distinct(n.trace_id)),
            func.max(n.created_at),
        )
        .where(*conditions)
        .group_by(n.entity_kind, n.entity_name, n.aspect)
    )
    return [
        AspectTally(Entity(kind, name), aspect, notes, traces_, last)
        for kind, name, aspect, notes, traces_, last in rows
    ]


def entity_tallies(conn: Connection, project: str, kind: str | None) -> list[EntityTally]:
    n = aspect_notes.c
    conditions = [n.project == project, n.entity_kind.is_not(None)]
    if kind is not None:
        conditions.append(n.entity_kind == kind)
    rows = conn.execute(
        select(
            n.entity_kind,
            n.entity_name,
            func.count(),
            func.count(distinct(n.trace_id)),
            func.max(n.created_at),
        )
        .where(*conditions)
        .group_by(n.entity_kind, n.entity_name)
    )
    return [
        EntityTally(Entity(kind_, name), notes, traces_, last)
        for kind_, name, notes, traces_, last in rows
    ]


def write_snapshot(conn: Connection, project: str, write: SnapshotWrite) -> bool:
    """Store `write` unless its snapshot is stored already (the caller's transaction makes it
    all or nothing; a concurrent writer of the same id fails on the primary key instead)."""
    snap = write.snapshot
    if _snapshot_row(conn, project, snap.snapshot_id) is not None:
        return False
    conn.execute(insert(theme_snapshots), [_snapshot_values(project, snap)])
    if write.themes:
        conn.execute(insert(themes), [_theme_values(project, theme) for theme in write.themes])
    if write.members:
        _insert_members(conn, project, snap.snapshot_id, write.members)
    if write.endings:
        conn.execute(
            insert(theme_endings),
            [
                {
                    "project": project,
                    "snapshot_id": snap.snapshot_id,
                    "aspect": ending.aspect,
                    "theme_id": ending.theme_id,
                    "state": ending.state,
                    "merged_into": list(ending.merged_into),
                }
                for ending in write.endings
            ],
        )
    return True


# SQLite's member insert, compiled once: a pass writes one row per note it read (up to the
# ceiling), and binding plain tuples skips SQLAlchemy's per-row parameter processing (the
# columns are text and integers, which need none).
_SQLITE_MEMBERS = insert(theme_members).compile(dialect=SqlDialect.SQLITE.sqlalchemy_dialect())
_SQLITE_MEMBERS_SQL = str(_SQLITE_MEMBERS)
_MEMBER_COLUMNS = ["project", "snapshot_id", "aspect", "theme_id", "note_id", "trace_id"]
if _SQLITE_MEMBERS.positiontup != [*_MEMBER_COLUMNS, "similarity"]:
    raise AssertionError(f"theme_members binds {_SQLITE_MEMBERS.positiontup}")


def _insert_members(
    conn: Connection, project: str, snapshot_id: str, members: Sequence[MemberRow]
) -> None:
    dialect = SqlDialect.of(conn.dialect)
    match dialect:
        case SqlDialect.SQLITE:
            conn.exec_driver_sql(
                _SQLITE_MEMBERS_SQL,
                [
                    (
                        project,
                        snapshot_id,
                        member.aspect,
                        member.theme_id,
                        member.note_id,
                        member.trace_id,
                        member.similarity,
                    )
                    for member in members
                ],
            )
        case SqlDialect.POSTGRES:
            # SQLAlchemy batches these into multi-row INSERTs (`insertmanyvalues`).
            conn.execute(
                insert(theme_members),
                [
                    {
                        "project": project,
                        "snapshot_id": snapshot_id,
                        "aspect": member.aspect,
                        "theme_id": member.theme_id,
                        "note_id": member.note_id,
                        "trace_id": member.trace_id,
                        "similarity": member.similarity,
                    }
                    for member in members
                ],
            )
        case _:
            assert_never(dialect)


def _snapshot_values(project: str, snap: SnapshotRow) -> dict[str, Any]:
    return {
        "project": project,
        "snapshot_id": snap.snapshot_id,
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


def _theme_values(project: str, theme: ThemeRow) -> dict[str, Any]:
    return {
        "project": project,
        "snapshot_id": theme.snapshot_id,
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
        "wording": theme.wording,
    }


def _ordinal() -> Any:
    s = theme_snapshots.c
    return (
        func.row_number()
        .over(partition_by=(s.entity_kind, s.entity_name), order_by=(s.cutoff_at, s.snapshot_id))
        .label("ordinal_now")
    )


def _numbered(*conditions: ColumnElement[bool]) -> Any:
    """The project's snapshots (per `conditions`, which must select whole entities) with their
    ordinal among their entity's stored snapshots."""
    return select(theme_snapshots, _ordinal()).where(*conditions).subquery()


def _snapshot(row: RowMapping) -> SnapshotRow:
    return SnapshotRow(
        snapshot_id=row["snapshot_id"],
        entity=Entity(row["entity_kind"], row["entity_name"]),
        aspects=tuple(row["aspects"] or ()),
        ordinal=row["ordinal_now"],
        cutoff_at=row["cutoff_at"],
        window_from=row["window_from"],
        window_to=row["window_to"],
        trace_count=row["trace_count"],
        note_count=row["note_count"],
        capped=bool(row["capped"]),
    )


def snapshots(
    conn: Connection,
    project: str,
    entity: Entity,
    cutoff_from: int | None,
    cutoff_to: int | None,
) -> list[SnapshotRow]:
    s = theme_snapshots.c
    numbered = _numbered(
        s.project == project, s.entity_kind == entity.kind, s.entity_name == entity.name
    )
    query = select(numbered).order_by(numbered.c.cutoff_at, numbered.c.snapshot_id)
    if cutoff_from is not None:
        query = query.where(numbered.c.cutoff_at >= cutoff_from)
    if cutoff_to is not None:
        query = query.where(numbered.c.cutoff_at < cutoff_to)
    return [_snapshot(row) for row in conn.execute(query).mappings()]


def _snapshot_row(conn: Connection, project: str, snapshot_id: str) -> RowMapping | None:
    return (
        conn.execute(
            select(theme_snapshots).where(
                theme_snapshots.c.project == project, theme_snapshots.c.snapshot_id == snapshot_id
            )
        )
        .mappings()
        .first()
    )


def snapshot(conn: Connection, project: str, snapshot_id: str) -> SnapshotRow | None:
    row = _snapshot_row(conn, project, snapshot_id)
    if row is None:
        return None
    entity = Entity(row["entity_kind"], row["entity_name"])
    found = snapshots(conn, project, entity, row["cutoff_at"], row["cutoff_at"] + 1)
    return next(snap for snap in found if snap.snapshot_id == snapshot_id)


def latest_snapshots(conn: Connection, project: str) -> dict[Entity, SnapshotRow]:
    numbered = _numbered(theme_snapshots.c.project == project)
    latest: dict[Entity, SnapshotRow] = {}
    for row in conn.execute(select(numbered).order_by(numbered.c.cutoff_at)).mappings():
        snap = _snapshot(row)
        latest[snap.entity] = snap
    return latest


def _theme(row: RowMapping) -> ThemeRow:
    return ThemeRow(
        snapshot_id=row["snapshot_id"],
        aspect=row["aspect"],
        theme_id=row["theme_id"],
        entity=Entity(row["entity_kind"], row["entity_name"]),
        label=row["label"],
        label_note_id=row["label_note_id"],
        label_trace_id=row["label_trace_id"],
        state=row["state"],
        note_count=row["note_count"],
        trace_count=row["trace_count"],
        coverage=row["coverage"],
        split_from=tuple(row["split_from"] or ()),
        split_into=tuple(row["split_into"] or ()),
        merged_from=tuple(row["merged_from"] or ()),
        wording=bytes(row["wording"] or b""),
    )


def snapshot_themes(
    conn: Connection, project: str, snapshot_id: str, aspects: Sequence[str] | None
) -> list[ThemeRow]:
    t = themes.c
    query = select(themes).where(t.project == project, t.snapshot_id == snapshot_id)
    if aspects is not None:
        query = query.where(t.aspect.in_(aspects))
    rows = conn.execute(query.order_by(t.aspect, t.theme_id)).mappings()
    return [_theme(row) for row in rows]


def theme_wordings(
    conn: Connection, project: str, entity: Entity, aspect: str, before: int
) -> tuple[list[ThemeRow], list[ThemeRow]]:
    t, s = themes.c, theme_snapshots.c
    rows = conn.execute(
        select(themes, s.cutoff_at)
        .join(
            theme_snapshots,
            and_(s.project == t.project, s.snapshot_id == t.snapshot_id),
        )
        .where(
            t.project == project,
            t.entity_kind == entity.kind,
            t.entity_name == entity.name,
            t.aspect == aspect,
            s.cutoff_at < before,
        )
        .order_by(s.cutoff_at, t.theme_id)
    ).mappings()
    found = [(row["cutoff_at"], _theme(row)) for row in rows]
    return split_wordings(snapshots(conn, project, entity, None, before), aspect, found)


def theme_entity(conn: Connection, project: str, theme_id: str) -> Entity | None:
    """From the theme's rows, else from the snapshot of one of its endings (retention may have
    taken every snapshot that held it)."""
    row = conn.execute(
        select(themes.c.entity_kind, themes.c.entity_name)
        .where(themes.c.project == project, themes.c.theme_id == theme_id)
        .limit(1)
    ).first()
    if row is None:
        s, e = theme_snapshots.c, theme_endings.c
        row = conn.execute(
            select(s.entity_kind, s.entity_name)
            .join(theme_endings, and_(e.project == s.project, e.snapshot_id == s.snapshot_id))
            .where(e.project == project, e.theme_id == theme_id)
            .limit(1)
        ).first()
    return None if row is None else Entity(row[0], row[1])


def theme_history(
    conn: Connection, project: str, theme_id: str, aspect: str | None
) -> list[HistoryRow]:
    entity = theme_entity(conn, project, theme_id)
    if entity is None:
        return []
    by_snapshot = {snap.snapshot_id: snap for snap in snapshots(conn, project, entity, None, None)}
    found: list[HistoryRow] = []
    for table, make in ((themes, _theme_point), (theme_endings, _ending_point)):
        query = select(table).where(table.c.project == project, table.c.theme_id == theme_id)
        if aspect is not None:
            query = query.where(table.c.aspect == aspect)
        for row in conn.execute(query).mappings():
            snap = by_snapshot.get(row["snapshot_id"])
            if snap is not None:
                found.append(make(snap, row))
    found.sort(key=lambda point: (point.snapshot.cutoff_at, point.snapshot.snapshot_id))
    return found


def _theme_point(snap: SnapshotRow, row: RowMapping) -> HistoryRow:
    return HistoryRow(snap, _theme(row), None)


def _ending_point(snap: SnapshotRow, row: RowMapping) -> HistoryRow:
    ending = EndingRow(
        row["aspect"], row["theme_id"], row["state"], tuple(row["merged_into"] or ())
    )
    return HistoryRow(snap, None, ending)


def _member_conditions(
    project: str, snapshot_id: str, aspect: str, theme_id: str
) -> list[ColumnElement[bool]]:
    m = theme_members.c
    return [
        m.project == project,
        m.snapshot_id == snapshot_id,
        m.aspect == aspect,
        m.theme_id == theme_id,
    ]


def theme_members_page(
    conn: Connection,
    project: str,
    snapshot_id: str,
    aspect: str,
    theme_id: str,
    after: tuple[int, str] | None,
    limit: int,
) -> list[MemberRow]:
    m = theme_members.c
    conditions = _member_conditions(project, snapshot_id, aspect, theme_id)
    if after is not None:
        similarity, note_id = after
        conditions.append(
            or_(m.similarity < similarity, and_(m.similarity == similarity, m.note_id > note_id))
        )
    rows = conn.execute(
        select(m.aspect, m.theme_id, m.note_id, m.trace_id, m.similarity)
        .where(*conditions)
        .order_by(m.similarity.desc(), m.note_id)
        .limit(limit)
    )
    return [MemberRow(*row) for row in rows]


def theme_member_count(
    conn: Connection, project: str, snapshot_id: str, aspect: str, theme_id: str
) -> int:
    return int(
        conn.execute(
            select(func.count()).where(*_member_conditions(project, snapshot_id, aspect, theme_id))
        ).scalar_one()
    )


def snapshot_members(
    conn: Connection, project: str, snapshot_id: str, aspects: Sequence[str]
) -> list[MemberRow]:
    m = theme_members.c
    rows = conn.execute(
        select(m.aspect, m.theme_id, m.note_id, m.trace_id, m.similarity).where(
            m.project == project, m.snapshot_id == snapshot_id, m.aspect.in_(aspects)
        )
    )
    return [MemberRow(*row) for row in rows]


def trace_notes(conn: Connection, project: str, trace_id: str) -> list[AspectNoteRow]:
    rows = conn.execute(
        select(*_NOTE_COLUMNS).where(
            aspect_notes.c.project == project, aspect_notes.c.trace_id == trace_id
        )
    ).mappings()
    return [dict(row) for row in rows]  # type: ignore[misc]


def trace_starts(conn: Connection, project: str, trace_ids: Sequence[str]) -> dict[str, int]:
    if not trace_ids:
        return {}
    rows = conn.execute(
        select(traces.c.trace_id, traces.c.start_time).where(
            traces.c.project == project, traces.c.trace_id.in_(trace_ids)
        )
    )
    return {trace_id: start for trace_id, start in rows}


def erase_note_themes(conn: Connection, project: str, note_ids: Iterable[str]) -> ThemeErasure:
    """Take erased notes out of the themes, in the erasure's transaction: labels copied from
    them are blanked and their member rows (the examples) deleted."""
    ids = sorted(set(note_ids))
    labels = examples = 0
    for start in range(0, len(ids), _KEYS_PER_DELETE):
        chunk = ids[start : start + _KEYS_PER_DELETE]
        labels += conn.execute(
            themes.update()
            .where(themes.c.project == project, themes.c.label_note_id.in_(chunk))
            .values(label="")
        ).rowcount
        examples += conn.execute(
            theme_members.delete().where(
                theme_members.c.project == project, theme_members.c.note_id.in_(chunk)
            )
        ).rowcount
    return ThemeErasure(labels=labels, examples=examples)


def trace_projects(conn: Connection) -> list[str]:
    return list(
        conn.execute(select(traces.c.project).distinct().order_by(traces.c.project)).scalars()
    )


def ended_traces(
    conn: Connection,
    project: str,
    ended: tuple[int, int],
    aspect: str,
    after: str | None,
    limit: int,
) -> list[TraceEnding]:
    t, n = traces.c, aspect_notes.c
    noted = (
        select(n.note_id)
        .where(n.project == t.project, n.trace_id == t.trace_id, n.aspect == aspect)
        .exists()
    )
    conditions = [
        t.project == project,
        t.is_complete,
        t.end_time >= ended[0],
        t.end_time < ended[1],
        ~noted,
    ]
    if after is not None:
        conditions.append(t.trace_id > after)
    rows = conn.execute(
        select(t.trace_id, t.status, t.error_count, t.end_time, t.root_span_id)
        .where(*conditions)
        .order_by(t.trace_id)
        .limit(limit)
    ).all()
    if not rows:
        return []
    ids = [row.trace_id for row in rows]
    s = spans.c
    roots = {
        trace_id: (kind, attributes, run_id)
        for trace_id, kind, attributes, run_id in conn.execute(
            select(s.trace_id, s.kind, s.attributes, s.run_id).where(
                s.project == project, s.trace_id.in_(ids), s.is_root
            )
        )
    }
    failed: dict[str, list[tuple[str, str | None]]] = {}
    for trace_id, attributes, error in conn.execute(
        select(s.trace_id, s.attributes, s.error)
        .where(s.project == project, s.trace_id.in_(ids), s.status == "error")
        .order_by(s.trace_id, s.start_time, s.span_id)
    ):
        failed.setdefault(trace_id, []).append(
            (error_class(attributes, error), step_key(attributes))
        )
    return [
        trace_ending(
            row.trace_id,
            row.status,
            row.error_count,
            row.end_time,
            roots.get(row.trace_id),
            failed.get(row.trace_id, []),
        )
        for row in rows
    ]


def expire_snapshots(
    conn: Connection, project: str, cutoff: int, limit: int
) -> tuple[Counter[str], bool]:
    """Delete the project's oldest snapshots whose window ended before `cutoff` (the notes they
    read are gone by then), with their themes, members and endings, at most `limit` of them;
    rows removed per table, and whether more may remain."""
    snapshot_ids = list(
        conn.execute(
            select(theme_snapshots.c.snapshot_id)
            .where(theme_snapshots.c.project == project, theme_snapshots.c.window_to < cutoff)
            .order_by(theme_snapshots.c.cutoff_at)
            .limit(limit)
        ).scalars()
    )
    removed: Counter[str] = Counter()
    for table in (theme_members, theme_endings, themes, theme_snapshots):
        removed[table.name] = conn.execute(
            table.delete().where(table.c.project == project, table.c.snapshot_id.in_(snapshot_ids))
        ).rowcount
    return removed, len(snapshot_ids) == limit
