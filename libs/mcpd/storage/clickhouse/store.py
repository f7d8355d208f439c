"""The trace store on ClickHouse."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from mcpd.model.v1 import query_pb2
from mcpd.runtime.errors import Unimplemented
from mcpd.sessions.traces import TraceWriteFollower
from mcpd.signals import documents
from mcpd.signals.batch import HeldTrace, SignalBatch, TraceRecords
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
from mcpd.storage.clickhouse import evaluation, themes
from mcpd.storage.clickhouse import migrate as clickhouse_migrate
from mcpd.storage.clickhouse.executor import ClickHouseExecutor
from mcpd.storage.clickhouse.signals import ClickHouseSignals, erasure, lists, score_rollups
from mcpd.storage.evaluation_records import (
    DatasetItemRow,
    DatasetRow,
    ExperimentCost,
    ExperimentItemRow,
    ExperimentRow,
    ExperimentScore,
)
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


class ClickHouseTraceStore:
    """The trace store on ClickHouse, behind a `ClickHouseExecutor` (server or chdb)."""

    def __init__(self, executor: ClickHouseExecutor) -> None:
        self._executor = executor
        self._signals = ClickHouseSignals(executor)

    @property
    def backend(self) -> str:
        """Always `clickhouse`."""
        return capabilities.CLICKHOUSE.backend

    @property
    def executor(self) -> ClickHouseExecutor:
        """The executor, for the feature code built on this store."""
        return self._executor

    def capabilities(self) -> query_pb2.StoreCapabilities:
        """ClickHouse's row of `mcpd.storage.capabilities`."""
        return capabilities.CLICKHOUSE.to_proto()

    def migrate(self) -> list[str]:
        """Apply pending SQL migrations; return the versions applied."""
        return clickhouse_migrate.migrate(self._executor)

    def pending_migrations(self) -> list[str]:
        """Versions not yet applied; nothing is changed."""
        return clickhouse_migrate.pending(self._executor)

    def follow_writes(self, follower: TraceWriteFollower[Any]) -> None:
        """Have `follower` told every write of spans (the sessions of ingested traces), within
        the write: see `mcpd.storage.clickhouse.signals` for when."""
        self._signals.follow_writes(follower)

    def write_batches(self, batches: Sequence[SignalBatch]) -> list[bool]:
        """Write the batches; per batch, False for a replayed ingest key.

        Not one transaction on ClickHouse: see `mcpd.storage.clickhouse.signals` for what is
        guaranteed instead (one INSERT per table, ingest keys last, replacing engines).
        """
        return self._signals.write_batches(batches)

    def held_traces(self) -> list[HeldTrace]:
        """A summary of every trace with spans in the holding table."""
        return self._signals.held_traces()

    def release_held(self, project: str, keep: Sequence[str], drop: Sequence[str]) -> int:
        """Move the kept traces' held spans into `spans`, delete the dropped traces' ones;
        return how many spans moved."""
        return self._signals.release_held(project, keep, drop)

    def trace_records(
        self, project: str, trace_id: str, *, logs: bool, scores: bool, feedback: bool
    ) -> TraceRecords | None:
        """One trace of one project with its spans and, as asked, logs, scores, feedback."""
        return self._signals.trace_records(
            project, trace_id, logs=logs, scores=scores, feedback=feedback
        )

    def trace_detail_json(
        self, project: str, trace_id: str, *, logs: bool, scores: bool, feedback: bool
    ) -> bytes | None:
        """The spec JSON of one trace's TraceDetail, rendered from its rows."""
        records = self.trace_records(project, trace_id, logs=logs, scores=scores, feedback=feedback)
        return None if records is None else documents.trace_detail_json(records)

    def facet_value_count(self, project: str, facet: str, key: str) -> int:
        """How many distinct values the facet table holds for (project, facet, key)."""
        return self._signals.facet_value_count(project, facet, key)

    # --- the query service's reads (`TraceStore` documents each) -----------------------------

    def list_traces(self, project: str, query: TraceQuery) -> Page[TraceRow]:
        """One page of trace rows."""
        return lists.list_traces(self._executor, project, query)

    def list_spans(self, project: str, query: SpanQuery) -> Page[SpanRow]:
        """One page of spans, newest first."""
        return lists.list_spans(self._executor, project, query)

    def list_logs(self, project: str, query: LogQuery) -> Page[LogRow]:
        """One page of log records, newest first."""
        return lists.list_logs(self._executor, project, query)

    def list_scores(self, project: str, query: ScoreQuery) -> Page[ScoreRow]:
        """One page of scores, newest first."""
        return lists.list_scores(self._executor, project, query)

    def list_feedback(self, project: str, query: FeedbackQuery) -> Page[FeedbackRow]:
        """One page of feedback, newest first."""
        return lists.list_feedback(self._executor, project, query)

    def metric_points(
        self, project: str, name: str, window: Window, *, limit: int
    ) -> list[MetricRow]:
        """One metric's points in a window, oldest first."""
        return lists.metric_points(self._executor, project, name, window, limit=limit)

    def discover(
        self, project: str, facet: str, key: str, prefix: str | None, limit: int
    ) -> list[tuple[str, int]]:
        """Distinct values of one facet, ordered by value."""
        return lists.discover(self._executor, project, facet, key, prefix, limit)

    def group_figures(
        self, project: str, window: Window, group_by: str | None
    ) -> list[GroupFigures]:
        """Analytics over a window, whole or per group."""
        return lists.group_figures(self._executor, project, window, group_by)

    def cost_points(
        self, project: str, window: Window, group_by: str | None, bucket_ns: int
    ) -> list[CostPoint]:
        """Spend per bucket and group."""
        return lists.cost_points(self._executor, project, window, group_by, bucket_ns)

    def score_stats(self, project: str, scorer_id: str, window: Window) -> ScoreStats:
        """The count and sum of one scorer's scores in a window (each score id once)."""
        return score_rollups.score_stats(self._executor, project, scorer_id, window)

    def deltas(
        self, project: str, signal: str, after: DeltaPosition | None, *, limit: int
    ) -> DeltaPage:
        """Refused: ClickHouse cannot order arrivals with visibility (capability delta_polling)."""
        raise Unimplemented(
            "delta polling is not available on the clickhouse backend (capability "
            "delta_polling is false): list again with a time window instead",
            reason="CAPABILITY_UNAVAILABLE",
            field="signal",
            metadata={"capability": "delta_polling"},
        )

    def delete_trace(self, project: str, trace_id: str) -> int:
        """Delete one trace and what names it (applied asynchronously); returns what matched."""
        return erasure.delete_trace(self._executor, project, trace_id)

    def erase_subject(self, project: str, subject: ErasureSubject) -> ErasureCounts:
        """Erase one subject's records (deletes_pending: applied asynchronously)."""
        return erasure.erase_subject(self._executor, project, subject)

    def apply_retention(self, project: str, cutoffs: Mapping[str, int]) -> dict[str, int]:
        """Drop or delete the project's records older than their signal's cutoff."""
        return erasure.apply_retention(self._executor, project, cutoffs)

    def expire_ingest_keys(self, project: str, before: int) -> int:
        """Forget the project's ingest keys recorded before `before` (ns)."""
        return erasure.expire_ingest_keys(self._executor, project, before)

    # --- the evaluation service's records (`DatasetRecords`, `ExperimentRecords`) -------------
    # Not atomic on ClickHouse: see `mcpd.storage.clickhouse.evaluation` for what holds instead.

    def create_dataset(self, project: str, dataset: DatasetRow) -> None:
        """Store a new dataset; AlreadyExists when its name is taken (checked, not indexed)."""
        evaluation.create_dataset(self._executor, project, dataset)

    def datasets(
        self, project: str, *, after: tuple[int, str] | None, limit: int
    ) -> list[DatasetRow]:
        """A page of datasets, newest first."""
        return evaluation.datasets_page(self._executor, project, after, limit)

    def dataset(self, project: str, dataset_id: str) -> DatasetRow | None:
        """One dataset with its item count."""
        return evaluation.dataset(self._executor, project, dataset_id)

    def add_dataset_items(self, project: str, items: Sequence[DatasetItemRow]) -> int:
        """Store items, a re-sent one keeping its place."""
        return evaluation.add_dataset_items(self._executor, project, items)

    def dataset_items(
        self, project: str, dataset_id: str, *, after: tuple[int, str] | None, limit: int
    ) -> list[DatasetItemRow]:
        """A page of one dataset's items, in the order they were added."""
        return evaluation.dataset_items_page(self._executor, project, dataset_id, after, limit)

    def create_experiment(self, project: str, experiment: ExperimentRow) -> None:
        """Store a new experiment."""
        evaluation.create_experiment(self._executor, project, experiment)

    def experiment(self, project: str, experiment_id: str) -> ExperimentRow | None:
        """One experiment."""
        return evaluation.experiment(self._executor, project, experiment_id)

    def experiments(
        self,
        project: str,
        *,
        dataset_id: str | None,
        after: tuple[int, str] | None,
        limit: int,
    ) -> list[ExperimentRow]:
        """A page of experiments, newest first."""
        return evaluation.experiments_page(self._executor, project, dataset_id, after, limit)

    def change_experiment(
        self, project: str, experiment: ExperimentRow, *, expected: Sequence[str]
    ) -> bool:
        """Replace an experiment's row when its status is one of `expected` (compare-and-set
        within the process)."""
        return evaluation.change_experiment(self._executor, project, experiment, expected)

    def driven_experiments(self, statuses: Sequence[str]) -> list[tuple[str, ExperimentRow]]:
        """The experiments mcpd drives in one of `statuses`, oldest first."""
        return evaluation.driven_experiments(self._executor, statuses)

    def put_experiment_items(
        self, project: str, experiment_id: str, items: Sequence[ExperimentItemRow]
    ) -> None:
        """Store where an experiment's item runs got to."""
        evaluation.put_experiment_items(self._executor, project, experiment_id, items)

    def experiment_items(self, project: str, experiment_id: str) -> list[ExperimentItemRow]:
        """An experiment's item rows."""
        return evaluation.experiment_items_of(self._executor, project, experiment_id)

    def experiment_scores(self, project: str, experiment_id: str) -> list[ExperimentScore]:
        """An experiment's scores with their items."""
        return evaluation.experiment_scores(self._executor, project, experiment_id)

    def experiment_cost(self, project: str, experiment_id: str) -> ExperimentCost:
        """An experiment's trace count and cost."""
        return evaluation.experiment_cost(self._executor, project, experiment_id)

    # --- the intelligence service's records (`ThemeRecords`) ---------------------------------
    # A snapshot is written once without a transaction: see `mcpd.storage.clickhouse.themes`.

    def noted_entities(self, window_from: int, window_to: int) -> list[tuple[str, Entity]]:
        """Every (project, entity) with a note created in the window."""
        return themes.noted_entities(self._executor, window_from, window_to)

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
        return themes.pass_notes(self._executor, project, entity, aspect, window, before, limit)

    def note_texts(self, project: str, note_ids: Sequence[str]) -> dict[str, str]:
        """The text of each stored note of `note_ids`."""
        return themes.note_texts(self._executor, project, note_ids)

    def aspect_tallies(self, project: str, entity: Entity | None) -> list[AspectTally]:
        """Per entity and aspect, the notes stored."""
        return themes.aspect_tallies(self._executor, project, entity)

    def entity_tallies(self, project: str, kind: str | None) -> list[EntityTally]:
        """Per entity, the notes stored."""
        return themes.entity_tallies(self._executor, project, kind)

    def write_snapshot(self, project: str, write: SnapshotWrite) -> bool:
        """Store a pass's snapshot whole, unless it is stored already."""
        return themes.write_snapshot(self._executor, project, write)

    def snapshots(
        self, project: str, entity: Entity, *, cutoff_from: int | None, cutoff_to: int | None
    ) -> list[SnapshotRow]:
        """One entity's snapshots in a cutoff range, oldest first."""
        return themes.snapshots(self._executor, project, entity, cutoff_from, cutoff_to)

    def snapshot(self, project: str, snapshot_id: str) -> SnapshotRow | None:
        """One snapshot."""
        return themes.snapshot(self._executor, project, snapshot_id)

    def latest_snapshots(self, project: str) -> dict[Entity, SnapshotRow]:
        """Each entity's newest snapshot."""
        return themes.latest_snapshots(self._executor, project)

    def snapshot_themes(
        self, project: str, snapshot_id: str, aspects: Sequence[str] | None
    ) -> list[ThemeRow]:
        """The themes of one snapshot."""
        return themes.snapshot_themes(self._executor, project, snapshot_id, aspects)

    def theme_wordings(
        self, project: str, entity: Entity, aspect: str, before: int
    ) -> tuple[list[ThemeRow], list[ThemeRow]]:
        """The themes a pass at `before` matches its own against."""
        return themes.theme_wordings(self._executor, project, entity, aspect, before)

    def theme_entity(self, project: str, theme_id: str) -> Entity | None:
        """The entity of a theme id."""
        return themes.theme_entity(self._executor, project, theme_id)

    def theme_history(self, project: str, theme_id: str, aspect: str | None) -> list[HistoryRow]:
        """Every point of a theme's history, oldest first."""
        return themes.theme_history(self._executor, project, theme_id, aspect)

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
        return themes.theme_members_page(
            self._executor, project, snapshot_id, aspect, theme_id, after, limit
        )

    def member_count(self, project: str, snapshot_id: str, aspect: str, theme_id: str) -> int:
        """How many notes one theme of a snapshot holds."""
        return themes.theme_member_count(self._executor, project, snapshot_id, aspect, theme_id)

    def snapshot_members(
        self, project: str, snapshot_id: str, aspects: Sequence[str]
    ) -> list[MemberRow]:
        """Every member row of a snapshot along `aspects`."""
        return themes.snapshot_members(self._executor, project, snapshot_id, aspects)

    def trace_notes(self, project: str, trace_id: str) -> list[AspectNoteRow]:
        """Every note about one trace."""
        return themes.trace_notes(self._executor, project, trace_id)

    def trace_starts(self, project: str, trace_ids: Sequence[str]) -> dict[str, int]:
        """The start time of each stored trace of `trace_ids`."""
        return themes.trace_starts(self._executor, project, trace_ids)

    def trace_projects(self) -> list[str]:
        """Every project with a stored trace, sorted."""
        return themes.trace_projects(self._executor)

    def ended_traces(
        self, project: str, ended: tuple[int, int], *, aspect: str, after: str | None, limit: int
    ) -> list[TraceEnding]:
        """A page of the project's complete traces that ended in the range with no note along
        `aspect`, by trace id."""
        return themes.ended_traces(self._executor, project, ended, aspect, after, limit)

    def close(self) -> None:
        """Close the executor. Idempotent."""
        self._executor.close()
