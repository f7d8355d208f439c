"""The SQLite/PostgreSQL trace and run stores. The control store is in `control_store`."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from itertools import groupby
from operator import itemgetter
from typing import Any, TypeVar

from sqlalchemy import Connection
from sqlalchemy.engine import Engine
from sqlalchemy.exc import IntegrityError

from mcpd.model.v1 import query_pb2
from mcpd.sessions.traces import FollowedWrite, TraceWriteFollower
from mcpd.signals.batch import HeldTrace, SignalBatch, TraceRecords
from mcpd.signals.notes import Root, file_notes
from mcpd.signals.queries import (
    CostPoint,
    DeltaPage,
    DeltaPosition,
    ErasureCounts,
    ErasureSubject,
    FeedbackQuery,
    GroupFigures,
    LogQuery,
    Page,
    ScoreQuery,
    ScoreStats,
    SpanQuery,
    TraceQuery,
    Window,
)
from mcpd.signals.rows import (
    AspectNoteRow,
    FeedbackRow,
    LogRow,
    MetricRow,
    ScoreRow,
    SpanRow,
    TraceRow,
)
from mcpd.storage import capabilities
from mcpd.storage.evaluation_records import (
    DatasetItemRow,
    DatasetRow,
    ExperimentCost,
    ExperimentItemRow,
    ExperimentRow,
    ExperimentScore,
)
from mcpd.storage.run_records import (
    NewDefinition,
    ParkedEventRow,
    PlacedDefinition,
    RunChanges,
    RunDetailRecord,
    RunErasure,
    RunEventRow,
    RunRow,
    RunShapes,
    RunSnapshot,
    StoredDefinition,
    TimerRow,
)
from mcpd.storage.sql import (
    definitions,
    evaluation,
    run_erasure,
    run_shapes,
    runs,
    signals,
    themes,
    transitions,
)
from mcpd.storage.sql.base import SqlStore
from mcpd.storage.sql.dialect import SqlDialect
from mcpd.storage.sql.engine import read_connection
from mcpd.storage.sql.group_commit import GroupCommit
from mcpd.storage.sql.schema import StoreName
from mcpd.storage.sql.signals import analytics, deltas, erasure, lists, score_rollups
from mcpd.storage.sql.statistics import PlannerStatistics
from mcpd.storage.theme_records import (
    AspectTally,
    Entity,
    EntityTally,
    HistoryRow,
    MemberRow,
    PassNote,
    SnapshotRow,
    SnapshotWrite,
    ThemeRow,
    TraceEnding,
)

T = TypeVar("T")


class SqlTraceStore(SqlStore):
    """The trace store on SQLite or PostgreSQL."""

    _store = StoreName.TRACE

    def __init__(self, engine: Engine) -> None:
        super().__init__(engine)
        self._statistics = (
            PlannerStatistics(engine) if self._dialect is SqlDialect.POSTGRES else None
        )
        self._follower: TraceWriteFollower[Any] | None = None

    def capabilities(self) -> query_pb2.StoreCapabilities:
        """This backend's row of `mcpd.storage.capabilities`."""
        return capabilities.BY_BACKEND[self.backend].to_proto()

    def follow_writes(self, follower: TraceWriteFollower[Any]) -> None:
        """Have `follower` told every write of spans, inside its transaction (the sessions of
        ingested traces, `mcpd.sessions.traces`)."""
        self._follower = follower

    def write_batches(self, batches: Sequence[SignalBatch]) -> list[bool]:
        """Write several batches as one transaction (see `TraceStore.write_batches`); the
        follower, if any, prepares before it and follows inside it."""
        if not batches:
            return []
        file_notes(batches, self._stored_roots)
        bound = signals.bind_batches(self._dialect, batches)
        follower = self._follower
        prepared = follower.prepare(bound.span_rows()) if follower is not None else None
        after: list[Callable[[], None]] = []
        with self._engine.begin() as conn:
            follow = self._following(conn, prepared, after)
            written = signals.write_bound(conn, self._dialect, bound, follow)
        for done in after:
            done()
        if self._statistics is not None:
            self._statistics.wrote(_rows_written(batches, written))
        return written

    def close(self) -> None:
        """Wait for a running ANALYZE, then dispose of the connection pool. Idempotent."""
        if self._statistics is not None:
            self._statistics.wait()
        super().close()

    def held_traces(self) -> list[HeldTrace]:
        """A summary of every trace with held spans, oldest first arrival first."""
        with read_connection(self._engine) as conn:
            return signals.held_traces(conn)

    def release_held(self, project: str, keep: Sequence[str], drop: Sequence[str]) -> int:
        """Move the `keep` traces' held spans into `spans`, delete the `drop` traces' ones; the
        follower, if any, follows the spans moved (prepared inside the transaction, where they
        are first known)."""
        if not keep and not drop:
            return 0
        after: list[Callable[[], None]] = []
        with self._engine.begin() as conn:
            follow = self._following(conn, None, after)
            moved = signals.release_held(conn, self._dialect, project, keep, drop, follow)
        for done in after:
            done()
        return moved

    def _following(
        self, conn: Connection, prepared: Any, after: list[Callable[[], None]]
    ) -> signals.Follow | None:
        """What a write inside `conn` calls with what it wrote (None without a follower): the
        follower's `follow`, whose after-commit work is kept in `after`. Without `prepared`,
        the follower prepares then and there."""
        follower = self._follower
        if follower is None:
            return None

        def follow(spans: Sequence[SpanRow], traces: Sequence[TraceRow]) -> None:
            ready = prepared if prepared is not None else follower.prepare(spans)
            after.append(follower.follow(FollowedWrite(conn, spans, traces, ready)))

        return follow

    def trace_records(
        self, project: str, trace_id: str, *, logs: bool, scores: bool, feedback: bool
    ) -> TraceRecords | None:
        """One trace with its spans (and, as asked, logs, scores and feedback)."""
        with read_connection(self._engine) as conn:
            return signals.trace_records(
                conn, project, trace_id, logs=logs, scores=scores, feedback=feedback
            )

    def trace_detail_json(
        self, project: str, trace_id: str, *, logs: bool, scores: bool, feedback: bool
    ) -> bytes | None:
        """The spec JSON of one trace's TraceDetail, put together from stored text."""
        with read_connection(self._engine) as conn:
            return signals.trace_detail_json(
                conn, project, trace_id, logs=logs, scores=scores, feedback=feedback
            )

    def facet_value_count(self, project: str, facet: str, key: str) -> int:
        """Distinct values the facet table holds for (project, facet, key)."""
        with read_connection(self._engine) as conn:
            return signals.facet_value_count(conn, project, facet, key)

    # --- the query service's reads (`TraceStore` documents each) -----------------------------

    def list_traces(self, project: str, query: TraceQuery) -> Page[TraceRow]:
        """One page of trace rows."""
        with read_connection(self._engine) as conn:
            return lists.list_traces(conn, self._dialect, project, query)

    def list_spans(self, project: str, query: SpanQuery) -> Page[SpanRow]:
        """One page of spans, newest first."""
        with read_connection(self._engine) as conn:
            return lists.list_spans(conn, self._dialect, project, query)

    def list_logs(self, project: str, query: LogQuery) -> Page[LogRow]:
        """One page of log records, newest first."""
        with read_connection(self._engine) as conn:
            return lists.list_logs(conn, self._dialect, project, query)

    def list_scores(self, project: str, query: ScoreQuery) -> Page[ScoreRow]:
        """One page of scores, newest first."""
        with read_connection(self._engine) as conn:
            return lists.list_scores(conn, self._dialect, project, query)

    def list_feedback(self, project: str, query: FeedbackQuery) -> Page[FeedbackRow]:
        """One page of feedback, newest first."""
        with read_connection(self._engine) as conn:
            return lists.list_feedback(conn, self._dialect, project, query)

    def metric_points(
        self, project: str, name: str, window: Window, *, limit: int
    ) -> list[MetricRow]:
        """One metric's points in a window, oldest first."""
        with read_connection(self._engine) as conn:
            return lists.metric_points(conn, self._dialect, project, name, window, limit=limit)

    def discover(
        self, project: str, facet: str, key: str, prefix: str | None, limit: int
    ) -> list[tuple[str, int]]:
        """Distinct values of one facet, ordered by value."""
        with read_connection(self._engine) as conn:
            return lists.discover(conn, self._dialect, project, facet, key, prefix, limit)

    def group_figures(
        self, project: str, window: Window, group_by: str | None
    ) -> list[GroupFigures]:
        """Analytics over a window, whole or per group."""
        with read_connection(self._engine) as conn:
            return analytics.group_figures(conn, self._dialect, project, window, group_by)

    def cost_points(
        self, project: str, window: Window, group_by: str | None, bucket_ns: int
    ) -> list[CostPoint]:
        """Spend per bucket and group."""
        with read_connection(self._engine) as conn:
            return analytics.cost_points(conn, self._dialect, project, window, group_by, bucket_ns)

    def score_stats(self, project: str, scorer_id: str, window: Window) -> ScoreStats:
        """The count and sum of one scorer's scores in a window."""
        with read_connection(self._engine) as conn:
            return score_rollups.score_stats(conn, project, scorer_id, window)

    def deltas(
        self, project: str, signal: str, after: DeltaPosition | None, *, limit: int
    ) -> DeltaPage:
        """Rows of one signal that arrived after a position, in arrival order."""
        with read_connection(self._engine) as conn:
            return deltas.deltas(conn, self._dialect, project, signal, after, limit=limit)

    def delete_trace(self, project: str, trace_id: str) -> int:
        """Delete one trace and what names it, in one transaction."""
        with self._engine.begin() as conn:
            return erasure.delete_trace(conn, self._dialect, project, trace_id)

    def erase_subject(self, project: str, subject: ErasureSubject) -> ErasureCounts:
        """Erase one subject's records, in one transaction."""
        with self._engine.begin() as conn:
            counts = erasure.erase_subject(conn, self._dialect, project, subject)
        if self._dialect is SqlDialect.SQLITE:
            # The erased pages also sit in the write-ahead log until a checkpoint copies it
            # into the database file and truncates it; do that now rather than at SQLite's
            # leisure. Best effort: a reader holding an old snapshot makes it partial.
            # Outside any transaction (a checkpoint inside one is refused), on the raw
            # connection, which runs in autocommit.
            raw = self._engine.raw_connection()
            try:
                raw.cursor().execute("PRAGMA wal_checkpoint(TRUNCATE)")
            finally:
                raw.close()
        return counts

    def apply_retention(self, project: str, cutoffs: Mapping[str, int]) -> dict[str, int]:
        """Delete the project's records older than their signal's cutoff, a bounded batch per
        transaction (`erasure.apply_retention`), so a large backlog never holds the write lock
        for its whole length."""
        return erasure.apply_retention(self._engine, self._dialect, project, cutoffs)

    def expire_ingest_keys(self, project: str, before: int) -> int:
        """Forget the project's ingest keys recorded before `before` (ns), a bounded batch per
        transaction; keys removed."""
        return erasure.expire_ingest_keys(self._engine, project, before)

    # --- the evaluation service's records (`DatasetRecords`, `ExperimentRecords`) -------------

    def create_dataset(self, project: str, dataset: DatasetRow) -> None:
        """Store a new dataset; AlreadyExists when its name is taken."""
        with self._engine.begin() as conn:
            evaluation.create_dataset(conn, project, dataset)

    def datasets(
        self, project: str, *, after: tuple[int, str] | None, limit: int
    ) -> list[DatasetRow]:
        """A page of datasets, newest first."""
        with read_connection(self._engine) as conn:
            return evaluation.datasets_page(conn, project, after, limit)

    def dataset(self, project: str, dataset_id: str) -> DatasetRow | None:
        """One dataset with its item count."""
        with read_connection(self._engine) as conn:
            return evaluation.dataset(conn, project, dataset_id)

    def add_dataset_items(self, project: str, items: Sequence[DatasetItemRow]) -> int:
        """Store items, one transaction."""
        with self._engine.begin() as conn:
            return evaluation.add_dataset_items(conn, self._dialect, project, items)

    def dataset_items(
        self, project: str, dataset_id: str, *, after: tuple[int, str] | None, limit: int
    ) -> list[DatasetItemRow]:
        """A page of one dataset's items, in the order they were added."""
        with read_connection(self._engine) as conn:
            return evaluation.dataset_items_page(conn, project, dataset_id, after, limit)

    def create_experiment(self, project: str, experiment: ExperimentRow) -> None:
        """Store a new experiment."""
        with self._engine.begin() as conn:
            evaluation.create_experiment(conn, project, experiment)

    def experiment(self, project: str, experiment_id: str) -> ExperimentRow | None:
        """One experiment."""
        with read_connection(self._engine) as conn:
            return evaluation.experiment(conn, project, experiment_id)

    def experiments(
        self,
        project: str,
        *,
        dataset_id: str | None,
        after: tuple[int, str] | None,
        limit: int,
    ) -> list[ExperimentRow]:
        """A page of experiments, newest first."""
        with read_connection(self._engine) as conn:
            return evaluation.experiments_page(conn, project, dataset_id, after, limit)

    def change_experiment(
        self, project: str, experiment: ExperimentRow, *, expected: Sequence[str]
    ) -> bool:
        """Replace an experiment's row when its status is one of `expected`."""
        with self._engine.begin() as conn:
            return evaluation.change_experiment(conn, project, experiment, expected)

    def driven_experiments(self, statuses: Sequence[str]) -> list[tuple[str, ExperimentRow]]:
        """The experiments mcpd drives in one of `statuses`, oldest first."""
        with read_connection(self._engine) as conn:
            return evaluation.driven_experiments(conn, statuses)

    def put_experiment_items(
        self, project: str, experiment_id: str, items: Sequence[ExperimentItemRow]
    ) -> None:
        """Store where an experiment's item runs got to."""
        with self._engine.begin() as conn:
            evaluation.put_experiment_items(conn, self._dialect, project, experiment_id, items)

    def experiment_items(self, project: str, experiment_id: str) -> list[ExperimentItemRow]:
        """An experiment's item rows."""
        with read_connection(self._engine) as conn:
            return evaluation.experiment_items_of(conn, project, experiment_id)

    def experiment_scores(self, project: str, experiment_id: str) -> list[ExperimentScore]:
        """An experiment's scores with their items."""
        with read_connection(self._engine) as conn:
            return evaluation.experiment_scores(conn, project, experiment_id)

    def experiment_cost(self, project: str, experiment_id: str) -> ExperimentCost:
        """An experiment's trace count and cost."""
        with read_connection(self._engine) as conn:
            return evaluation.experiment_cost(conn, project, experiment_id)

    # --- the intelligence service's records (`ThemeRecords`) ---------------------------------

    def noted_entities(self, window_from: int, window_to: int) -> list[tuple[str, Entity]]:
        """Every (project, entity) with a note created in the window."""
        return self._read(themes.noted_entities, window_from, window_to)

    def pass_notes(
        self,
        project: str,
        entity: Entity,
        aspect: str,
        window: tuple[int, int],
        *,
        before: tuple[int, str] | None,
        limit: int,
    ) -> list[PassNote]:
        """A page of one entity's notes along one aspect, newest first."""
        return self._read(themes.pass_notes, project, entity, aspect, window, before, limit)

    def note_texts(self, project: str, note_ids: Sequence[str]) -> dict[str, str]:
        """The text of each stored note of `note_ids`."""
        return self._read(themes.note_texts, project, note_ids)

    def aspect_tallies(self, project: str, entity: Entity | None) -> list[AspectTally]:
        """Per entity and aspect, the notes stored."""
        return self._read(themes.aspect_tallies, project, entity)

    def entity_tallies(self, project: str, kind: str | None) -> list[EntityTally]:
        """Per entity, the notes stored."""
        return self._read(themes.entity_tallies, project, kind)

    def write_snapshot(self, project: str, write: SnapshotWrite) -> bool:
        """Store a pass's snapshot whole, unless it is stored already."""
        try:
            with self._engine.begin() as conn:
                return themes.write_snapshot(conn, project, write)
        except IntegrityError:
            # Another replica wrote the same snapshot between the check and the insert.
            return False

    def snapshots(
        self, project: str, entity: Entity, *, cutoff_from: int | None, cutoff_to: int | None
    ) -> list[SnapshotRow]:
        """One entity's snapshots in a cutoff range, oldest first."""
        return self._read(themes.snapshots, project, entity, cutoff_from, cutoff_to)

    def snapshot(self, project: str, snapshot_id: str) -> SnapshotRow | None:
        """One snapshot."""
        return self._read(themes.snapshot, project, snapshot_id)

    def latest_snapshots(self, project: str) -> dict[Entity, SnapshotRow]:
        """Each entity's newest snapshot."""
        return self._read(themes.latest_snapshots, project)

    def snapshot_themes(
        self, project: str, snapshot_id: str, aspects: Sequence[str] | None
    ) -> list[ThemeRow]:
        """The themes of one snapshot."""
        return self._read(themes.snapshot_themes, project, snapshot_id, aspects)

    def theme_wordings(
        self, project: str, entity: Entity, aspect: str, before: int
    ) -> tuple[list[ThemeRow], list[ThemeRow]]:
        """The themes a pass at `before` matches its own against."""
        return self._read(themes.theme_wordings, project, entity, aspect, before)

    def theme_entity(self, project: str, theme_id: str) -> Entity | None:
        """The entity of a theme id."""
        return self._read(themes.theme_entity, project, theme_id)

    def theme_history(self, project: str, theme_id: str, aspect: str | None) -> list[HistoryRow]:
        """Every point of a theme's history, oldest first."""
        return self._read(themes.theme_history, project, theme_id, aspect)

    def theme_members(
        self,
        project: str,
        snapshot_id: str,
        aspect: str,
        theme_id: str,
        *,
        after: tuple[int, str] | None,
        limit: int,
    ) -> list[MemberRow]:
        """A page of one theme's notes, most similar to its label first."""
        return self._read(
            themes.theme_members_page, project, snapshot_id, aspect, theme_id, after, limit
        )

    def member_count(self, project: str, snapshot_id: str, aspect: str, theme_id: str) -> int:
        """How many notes one theme of a snapshot holds."""
        return self._read(themes.theme_member_count, project, snapshot_id, aspect, theme_id)

    def snapshot_members(
        self, project: str, snapshot_id: str, aspects: Sequence[str]
    ) -> list[MemberRow]:
        """Every member row of a snapshot along `aspects`."""
        return self._read(themes.snapshot_members, project, snapshot_id, aspects)

    def trace_notes(self, project: str, trace_id: str) -> list[AspectNoteRow]:
        """Every note about one trace."""
        return self._read(themes.trace_notes, project, trace_id)

    def trace_starts(self, project: str, trace_ids: Sequence[str]) -> dict[str, int]:
        """The start time of each stored trace of `trace_ids`."""
        return self._read(themes.trace_starts, project, trace_ids)

    def trace_projects(self) -> list[str]:
        """Every project with a stored trace."""
        return self._read(themes.trace_projects)

    def ended_traces(
        self, project: str, ended: tuple[int, int], *, aspect: str, after: str | None, limit: int
    ) -> list[TraceEnding]:
        """A page of the project's complete traces that ended in the range with no note along
        `aspect`, by trace id."""
        return self._read(themes.ended_traces, project, ended, aspect, after, limit)

    def _read(self, read: Callable[..., T], *args: Any) -> T:
        with read_connection(self._engine) as conn:
            return read(conn, *args)

    def _stored_roots(self, project: str, trace_ids: Sequence[str]) -> dict[str, Root]:
        return self._read(themes.stored_roots, project, trace_ids)


class SqlRunStore(SqlStore):
    """The run store on SQLite or PostgreSQL. On SQLite the transitions of concurrent callers
    share transactions (`group_commit`)."""

    _store = StoreName.RUN

    def __init__(self, engine: Engine) -> None:
        super().__init__(engine)
        self._group = GroupCommit(engine) if self._dialect is SqlDialect.SQLITE else None

    def _write(self, work: Callable[[Connection], T]) -> T:
        """`work` in a write transaction: a shared one on SQLite, its own on PostgreSQL."""
        if self._group is not None:
            return self._group.run(work)
        with self._engine.begin() as conn:
            return work(conn)

    def erase_subject(self, project: str, user_ids: Sequence[str]) -> RunErasure:
        """Erase one subject's ended run trees, in one transaction (`run_erasure`)."""
        if not user_ids:
            return RunErasure()
        with self._engine.begin() as conn:
            return run_erasure.erase_subject(conn, self._dialect, project, user_ids)

    def put_definitions(
        self, project: str, documents: Sequence[NewDefinition], *, now: int
    ) -> list[PlacedDefinition]:
        """Place definition documents under the versioning rule, in one transaction (in id
        order, so that two registrations of the same definitions on PostgreSQL wait for each
        other rather than deadlock)."""
        order = sorted(range(len(documents)), key=lambda index: documents[index].id)
        placed: dict[int, PlacedDefinition] = {}
        with self._engine.begin() as conn:
            for index in order:
                placed[index] = definitions.put_definition(
                    conn, self._dialect, project, documents[index], index, now=now
                )
        return [placed[index] for index in range(len(documents))]

    def start_run(
        self,
        run: RunRow,
        decide: Callable[[RunSnapshot], tuple[RunChanges, object]],
        *,
        now: int,
        key_ttl_ns: int,
    ) -> tuple[RunRow, bool]:
        """Store a new run with its first transition, or answer the run its key names
        (`runs`)."""
        return self._write(
            lambda conn: runs.start_run(
                conn, self._dialect, run, decide, now=now, key_ttl_ns=key_ttl_ns
            )
        )

    def transition(
        self,
        project: str,
        run_id: str,
        decide: Callable[[RunSnapshot], tuple[RunChanges, T]],
        *,
        now: int,
        skip_locked: bool = False,
    ) -> T | None:
        """One transition of the run under its lock (`transitions`)."""
        return self._write(
            lambda conn: transitions.transition(
                conn, self._dialect, project, run_id, decide, now=now, skip_locked=skip_locked
            )
        )

    def lease_transition(
        self,
        project: str,
        lease_id: str,
        decide: Callable[[RunSnapshot], tuple[RunChanges, T]],
        *,
        now: int,
    ) -> T | None:
        """One transition of the run a lease belongs to (`transitions`)."""
        return self._write(
            lambda conn: transitions.lease_transition(
                conn, self._dialect, project, lease_id, decide, now=now
            )
        )

    def claim_each(
        self,
        project: str,
        *,
        run_id: str | None,
        limit: int,
        decide: Callable[[list[tuple[str, int]]], Callable[[RunSnapshot], tuple[RunChanges, T]]],
        now: int,
    ) -> list[T | None]:
        """The offerable attempts read and their runs moved in one transaction (`claim_each`
        of `RunTransitions`). On SQLite a plain read comes first, so a claim that finds nothing
        never takes the database's one write lock; on PostgreSQL an empty claim's transaction
        locks nothing and costs what that read would."""
        if self._group is not None and not self._offerable(project, run_id=run_id):
            return []

        def work(conn: Connection) -> list[T | None]:
            found = transitions.claimable(conn, project, run_id=run_id, limit=limit, lock=True)
            return [
                transitions.transition(
                    conn,
                    self._dialect,
                    project,
                    run,
                    decide([(step_key, attempt) for _, step_key, attempt in group]),
                    now=now,
                    skip_locked=True,
                )
                for run, group in groupby(sorted(found), key=itemgetter(0))
            ]

        return self._write(work)

    def _offerable(self, project: str, *, run_id: str | None) -> bool:
        """Whether the project has an offerable attempt (of `run_id`, when given)."""
        with read_connection(self._engine) as conn:
            return bool(transitions.claimable(conn, project, run_id=run_id, limit=1))

    def due_timers(self, *, now: int, limit: int) -> list[tuple[str, TimerRow]]:
        """Timers come due, soonest first."""
        with read_connection(self._engine) as conn:
            return transitions.due_timers(conn, now=now, limit=limit)

    def waiting(self, project: str, event: str, key: str) -> list[tuple[str, str]]:
        """The open waits on (event, key), soonest to expire first."""
        with read_connection(self._engine) as conn:
            return transitions.waiting(conn, project, event, key)

    def park_event(self, project: str, parked: ParkedEventRow, *, supplied: bool, now: int) -> str:
        """Park an event no run waits for (`transitions.park_event`)."""
        return self._write(
            lambda conn: transitions.park_event(
                conn, self._dialect, project, parked, supplied=supplied, now=now
            )
        )

    def queued_spans(self, *, limit: int) -> list[tuple[str, Any]]:
        """Spans waiting for ingest, oldest first."""
        with read_connection(self._engine) as conn:
            return transitions.queued_spans(conn, limit=limit)

    def sent_spans(self, outbox_ids: Sequence[str]) -> None:
        """Forget spans ingest has."""
        self._write(lambda conn: transitions.sent_spans(conn, outbox_ids))

    def run_detail(self, project: str, run_id: str) -> RunDetailRecord | None:
        """The run with its attempts, timers and waits, or None."""
        with read_connection(self._engine) as conn:
            return runs.run_detail(conn, project, run_id)

    def list_runs(
        self,
        project: str,
        *,
        statuses: Sequence[str],
        definition_id: str | None,
        after: tuple[int, str] | None,
        limit: int,
    ) -> list[RunRow]:
        """A page of the project's runs, newest first."""
        with read_connection(self._engine) as conn:
            return runs.list_runs(
                conn,
                project,
                statuses=statuses,
                definition_id=definition_id,
                after=after,
                limit=limit,
            )

    def run_events(
        self, project: str, run_id: str, *, after: int | None, limit: int
    ) -> list[RunEventRow]:
        """The run's event log after `after`, in order."""
        with read_connection(self._engine) as conn:
            return runs.run_events_after(conn, project, run_id, after=after, limit=limit)

    def run_shapes(
        self, project: str, *, start: int, end: int, limit: int, baseline: int
    ) -> RunShapes:
        """The shapes of a window's runs and their versions' baselines (`run_shapes`)."""
        with read_connection(self._engine) as conn:
            return run_shapes.run_shapes(
                conn, self._dialect, project, start=start, end=end, limit=limit, baseline=baseline
            )

    def definition(
        self, project: str, definition_id: str, version: int | None = None
    ) -> StoredDefinition | None:
        """One version of a definition (the highest without `version`), or None."""
        with read_connection(self._engine) as conn:
            return definitions.definition(conn, project, definition_id, version)

    def list_definitions(
        self, project: str, *, after: str | None, limit: int
    ) -> list[StoredDefinition]:
        """The highest version of each definition, in id order after `after`."""
        with read_connection(self._engine) as conn:
            return definitions.list_definitions(conn, project, after=after, limit=limit)


def _rows_written(batches: Sequence[SignalBatch], written: Sequence[bool]) -> Counter[str]:
    """Rows the written batches add to each table (traces: one per trace their spans touch)."""
    counts: Counter[str] = Counter()
    for batch, ok in zip(batches, written, strict=True):
        if not ok:
            continue
        counts["spans"] += len(batch.spans)
        counts["traces"] += len({span["trace_id"] for span in batch.spans})
        counts["held_spans"] += len(batch.held_spans)
        counts["logs"] += len(batch.logs)
        counts["metrics"] += len(batch.metrics)
        counts["scores"] += len(batch.scores)
        counts["feedback"] += len(batch.feedback)
        counts["aspect_notes"] += len(batch.aspect_notes)
    return counts
