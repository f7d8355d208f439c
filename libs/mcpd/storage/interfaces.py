"""The three stores (trace, run, control), each the union of the narrow Protocols its consumers use.

Each store has one implementation per backend (SQLite and PostgreSQL through SQLAlchemy Core;
the trace store also on ClickHouse), and that one class implements every part. A consumer is
typed with the parts it uses (the ingest writer with `BatchWrites`, the retention sweeper with
`SignalRetention` and `ProjectCatalog`...), so a feature that adds operations adds a part, and
what each service may do to a store reads from its constructor. The unions (`TraceStore`,
`RunStore`, `ControlStore`) are for the composition root that opens the stores.

Every method is SYNCHRONOUS and blocking: database drivers block. Async callers (gRPC servicers,
the gateway) run them in a worker thread, e.g. with `asyncio.to_thread`, never on the event
loop. Implementations are safe to call from several threads at once (connections come from a
pool, one per call).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any, Protocol, TypeVar, runtime_checkable

from mcpd.model.v1 import account_pb2, query_pb2
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
from mcpd.storage.aspect_records import AspectRecord
from mcpd.storage.evaluation_records import (
    DatasetItemRow,
    DatasetRow,
    ExperimentCost,
    ExperimentItemRow,
    ExperimentRow,
    ExperimentScore,
)
from mcpd.storage.records import (
    AuditPage,
    StoredAccount,
    StoredKey,
    StoredSession,
    WatchState,
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


@runtime_checkable
class MigratedStore(Protocol):
    """The lifecycle every store shares: its backend, its schema migrations, closing."""

    @property
    def backend(self) -> str:
        """Which backend this is: `sqlite`, `postgres` or (the trace store only) `clickhouse`."""
        ...

    def migrate(self) -> list[str]:
        """Apply pending schema migrations; return what was applied, oldest first.

        Returns an empty list, and issues no schema statement, when nothing is pending.
        """
        ...

    def pending_migrations(self) -> list[str]:
        """Migrations not yet applied, oldest first; changes nothing."""
        ...

    def close(self) -> None:
        """Release connections. Idempotent; the store is unusable afterwards."""
        ...


# --- the parts of the trace store ---------------------------------------------------------------


@runtime_checkable
class CapabilityReport(Protocol):
    """What the trace store's backend can do (the query service's GetCapabilities)."""

    def capabilities(self) -> query_pb2.StoreCapabilities:
        """What this backend can and cannot do, reported truthfully (see `capabilities`)."""
        ...


@runtime_checkable
class BatchWrites(Protocol):
    """Ingest's group-committed writes of signal batches."""

    def write_batches(self, batches: Sequence[SignalBatch]) -> list[bool]:
        """Write several batches as ONE transaction (group commit); all of it or none of it.

        Returns, per batch in order, True when it was written and False when its
        `(key_project, ingest_key)` was already stored (by an earlier call, or by an earlier
        batch of this call): nothing of such a batch is written. Rows replace rows with the
        same primary key (a span re-sent when it ends). In the same transaction the store
        records the ingest keys, writes `held_spans` to its holding table, re-projects the
        trace row of every (project, trace_id) that a written span, score or feedback touches
        (`mcpd.signals.projection`), and upserts the facet values the rows carry
        (`mcpd.signals.facets`).
        """
        ...


@runtime_checkable
class HeldSpans(Protocol):
    """Tail sampling's holding table: the traces waiting for a decision, and the decision."""

    def held_traces(self) -> list[HeldTrace]:
        """A summary of every trace with spans in the holding table (tail sampling)."""
        ...

    def release_held(self, project: str, keep: Sequence[str], drop: Sequence[str]) -> int:
        """Tail sampling's decision, in one transaction: the held spans of the `keep` traces
        move into `spans` (projection and facets maintained as in `write_batches`), those of
        the `drop` traces are deleted. Returns how many spans moved."""
        ...


@runtime_checkable
class FacetCounts(Protocol):
    """How many values a facet holds (ingest bounds metric label cardinality with it)."""

    def facet_value_count(self, project: str, facet: str, key: str) -> int:
        """How many distinct values the facet table holds for (project, facet, key); `key` is
        '' for every facet but `metric_label_value`."""
        ...


@runtime_checkable
class TraceReads(Protocol):
    """One trace with what hangs off it (the query service's GetTrace)."""

    def trace_records(
        self, project: str, trace_id: str, *, logs: bool, scores: bool, feedback: bool
    ) -> TraceRecords | None:
        """One trace of one project with its spans (and, as asked, logs, scores and
        feedback), in the order `TraceRecords` documents; None when the project holds no
        trace row with this id."""
        ...

    def trace_detail_json(
        self, project: str, trace_id: str, *, logs: bool, scores: bool, feedback: bool
    ) -> bytes | None:
        """The spec's JSON of the TraceDetail of `trace_records(...)` with the same arguments
        (what `GET /v1/api/traces/{trace_id}` serves), equal to the codec's encoding of that
        message; None when there is no such trace. A backend may put it together from text it
        stored with each span rather than from decoded rows (`mcpd.signals.documents`)."""
        ...


@runtime_checkable
class SignalLists(Protocol):
    """Pages of stored signals, metric points, facet values and deltas (`mcpd.signals.queries`
    documents each question)."""

    def list_traces(self, project: str, query: TraceQuery) -> Page[TraceRow]:
        """One page of the project's trace rows, filtered and ordered as `query` says."""
        ...

    def list_spans(self, project: str, query: SpanQuery) -> Page[SpanRow]:
        """One page of the project's spans (held spans excluded), newest first."""
        ...

    def list_logs(self, project: str, query: LogQuery) -> Page[LogRow]:
        """One page of the project's log records, newest first."""
        ...

    def list_scores(self, project: str, query: ScoreQuery) -> Page[ScoreRow]:
        """One page of the project's scores, newest first."""
        ...

    def list_feedback(self, project: str, query: FeedbackQuery) -> Page[FeedbackRow]:
        """One page of the project's feedback, newest first."""
        ...

    def metric_points(
        self, project: str, name: str, window: Window, *, limit: int
    ) -> list[MetricRow]:
        """The project's points of metric `name` with timestamp in `window`, oldest first
        (then metric_id); at most `limit` (the oldest ones)."""
        ...

    def discover(
        self, project: str, facet: str, key: str, prefix: str | None, limit: int
    ) -> list[tuple[str, int]]:
        """(value, last_seen ns) from the facet table for (project, facet, key), values that
        start with `prefix` (case-sensitive) when given, ordered by value, at most `limit`."""
        ...

    def deltas(
        self, project: str, signal: str, after: DeltaPosition | None, *, limit: int
    ) -> DeltaPage:
        """Rows of `signal` (traces, spans or logs) that arrived after `after`, in arrival order,
        at most `limit`. `after` None answers no rows and the current end as the position. A
        row re-written (a trace re-projected, a span re-sent) arrives again with a later
        position. Never skips a committed row, never repeats one for one position. Raises
        Unimplemented (field `signal`) on a backend whose capabilities deny delta_polling."""
        ...


@runtime_checkable
class SignalAnalytics(Protocol):
    """Figures, spend and score statistics over a window (the query service's analytics)."""

    def group_figures(
        self, project: str, window: Window, group_by: str | None
    ) -> list[GroupFigures]:
        """Analytics over `window` (see `GroupFigures`): one row with key None when `group_by`
        is None, else one row per group value, ordered by key. `group_by` is one of
        `SPAN_GROUPS | TRACE_GROUPS` (the caller has checked)."""
        ...

    def cost_points(
        self, project: str, window: Window, group_by: str | None, bucket_ns: int
    ) -> list[CostPoint]:
        """Spend per `bucket_ns`-wide bucket and group key over `window`, ordered by bucket
        start then key; buckets without rows are left out."""
        ...

    def score_stats(self, project: str, scorer_id: str, window: Window) -> ScoreStats:
        """How many scores of `scorer_id` have a `timestamp` in `window`, and their values'
        sum (a score sent again under its id counts once, as it is stored). Whole hours and
        days come from rollups kept at ingest, so a month costs about as much as an hour."""
        ...


@runtime_checkable
class SignalErasure(Protocol):
    """Deleting one trace, and erasing one subject, from the trace store."""

    def delete_trace(self, project: str, trace_id: str) -> int:
        """Delete one trace: its trace row, spans, held spans, and the logs, metrics, scores,
        feedback and aspect notes that name it. Returns how many records were removed
        (0 when there is no such trace)."""
        ...

    def erase_subject(self, project: str, subject: ErasureSubject) -> ErasureCounts:
        """Erase every record of one subject in one project (see `ErasureCounts`), including
        the session read model's sessions built from the erased traces or named by
        `subject.session_id`."""
        ...


@runtime_checkable
class SignalRetention(Protocol):
    """What the retention sweeper deletes: aged records and forgotten ingest keys."""

    def apply_retention(self, project: str, cutoffs: Mapping[str, int]) -> dict[str, int]:
        """Delete the project's records whose `received_at` is before the cutoff (ns) of their
        signal (`STAT_SIGNALS`; `spans` also covers traces, held spans and aspect notes).
        Returns rows removed (or matched, where deletes are deferred) per signal."""
        ...

    def expire_ingest_keys(self, project: str, before: int) -> int:
        """Forget the project's ingest keys recorded before `before` (ns): a batch sent again
        with such a key is written again. Returns the keys removed (or matched, where deletes
        are deferred)."""
        ...


# --- the evaluation service's part of the trace store -------------------------------------------


@runtime_checkable
class DatasetRecords(Protocol):
    """Datasets and their items. Pages: datasets newest first by (created_at, dataset_id), items
    in the order they were added by (created_at, item_id); `after` is the previous page's last
    key."""

    def create_dataset(self, project: str, dataset: DatasetRow) -> None:
        """Store a new dataset; AlreadyExists (field `name`) when the project has one of that
        name."""
        ...

    def datasets(
        self, project: str, *, after: tuple[int, str] | None, limit: int
    ) -> list[DatasetRow]:
        """A page of the project's datasets, with their item counts."""
        ...

    def dataset(self, project: str, dataset_id: str) -> DatasetRow | None:
        """One dataset with its item count; None when the project has none of that id."""
        ...

    def add_dataset_items(self, project: str, items: Sequence[DatasetItemRow]) -> int:
        """Store items (an item of a stored id in its dataset replaces it, keeping its place);
        how many were written."""
        ...

    def dataset_items(
        self, project: str, dataset_id: str, *, after: tuple[int, str] | None, limit: int
    ) -> list[DatasetItemRow]:
        """A page of one dataset's items."""
        ...


@runtime_checkable
class ExperimentRecords(Protocol):
    """Experiments, the items of the runs mcpd drives for them, and what their traces and scores
    say. Pages: newest first by (created_at, experiment_id)."""

    def create_experiment(self, project: str, experiment: ExperimentRow) -> None:
        """Store a new experiment."""
        ...

    def experiment(self, project: str, experiment_id: str) -> ExperimentRow | None:
        """One experiment; None when the project has none of that id."""
        ...

    def experiments(
        self,
        project: str,
        *,
        dataset_id: str | None,
        after: tuple[int, str] | None,
        limit: int,
    ) -> list[ExperimentRow]:
        """A page of the project's experiments, only those over `dataset_id` when given."""
        ...

    def change_experiment(
        self, project: str, experiment: ExperimentRow, *, expected: Sequence[str]
    ) -> bool:
        """Replace a stored experiment's row with `experiment` when its stored status is one of
        `expected`; whether it did."""
        ...

    def driven_experiments(self, statuses: Sequence[str]) -> list[tuple[str, ExperimentRow]]:
        """(project, experiment) of every experiment mcpd drives whose status is one of
        `statuses`, oldest first."""
        ...

    def put_experiment_items(
        self, project: str, experiment_id: str, items: Sequence[ExperimentItemRow]
    ) -> None:
        """Store where the runs of an experiment's items got to (one row per item, replaced)."""
        ...

    def experiment_items(self, project: str, experiment_id: str) -> list[ExperimentItemRow]:
        """Every item row of one experiment, by item id."""
        ...

    def experiment_scores(self, project: str, experiment_id: str) -> list[ExperimentScore]:
        """Every score whose correlation carries the experiment id, with the item its trace ran
        when an item row names that trace."""
        ...

    def experiment_cost(self, project: str, experiment_id: str) -> ExperimentCost:
        """The count and summed cost of the traces whose correlation carries the experiment id."""
        ...


# --- the intelligence service's part of the trace store -----------------------------------------


@runtime_checkable
class ThemeRecords(Protocol):
    """Notes filed under entities, and what clustering passes wrote about them: snapshots, their
    themes, the notes each theme holds and the themes that ended. A snapshot's `ordinal` is
    counted when read, among the entity's stored snapshots, oldest first from one."""

    def noted_entities(self, window_from: int, window_to: int) -> list[tuple[str, Entity]]:
        """(project, entity) of every entity with a note created in [window_from, window_to),
        sorted."""
        ...

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
        """A page of the entity's notes along `aspect` created in [window), newest first by
        (created_at, note_id), those before `before` (the previous page's last key)."""
        ...

    def note_texts(self, project: str, note_ids: Sequence[str]) -> dict[str, str]:
        """The text of each stored note of `note_ids`."""
        ...

    def aspect_tallies(self, project: str, entity: Entity | None) -> list[AspectTally]:
        """Per entity (only `entity` when given) and aspect, the notes stored."""
        ...

    def entity_tallies(self, project: str, kind: str | None) -> list[EntityTally]:
        """Per entity (of `kind` when given), the notes stored, every aspect together."""
        ...

    def write_snapshot(self, project: str, write: SnapshotWrite) -> bool:
        """Store a pass's snapshot with its themes, members and endings in one transaction;
        False (and nothing written) when the snapshot id is stored already."""
        ...

    def snapshots(
        self, project: str, entity: Entity, *, cutoff_from: int | None, cutoff_to: int | None
    ) -> list[SnapshotRow]:
        """The entity's snapshots with a cutoff in [cutoff_from, cutoff_to), oldest first."""
        ...

    def snapshot(self, project: str, snapshot_id: str) -> SnapshotRow | None:
        """One snapshot; None when the project has none of that id."""
        ...

    def latest_snapshots(self, project: str) -> dict[Entity, SnapshotRow]:
        """Each entity's newest snapshot."""
        ...

    def snapshot_themes(
        self, project: str, snapshot_id: str, aspects: Sequence[str] | None
    ) -> list[ThemeRow]:
        """The themes of one snapshot (along `aspects` when given), by aspect then theme id."""
        ...

    def theme_wordings(
        self, project: str, entity: Entity, aspect: str, before: int
    ) -> tuple[list[ThemeRow], list[ThemeRow]]:
        """What a pass at cutoff `before` matches its themes against, along `aspect`: the themes
        of the entity's newest snapshot before it that covered the aspect, and the newest row of
        every theme of older snapshots absent from that one."""
        ...

    def theme_entity(self, project: str, theme_id: str) -> Entity | None:
        """The entity a theme id was minted for; None when the project never had it."""
        ...

    def theme_history(self, project: str, theme_id: str, aspect: str | None) -> list[HistoryRow]:
        """Every point of a theme's history (its rows and its endings), oldest cutoff first."""
        ...

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
        """A page of one theme's notes, most similar to its label first by (similarity desc,
        note_id); `after` is the previous page's last key."""
        ...

    def member_count(self, project: str, snapshot_id: str, aspect: str, theme_id: str) -> int:
        """How many notes one theme (or the noise) of a snapshot holds."""
        ...

    def snapshot_members(
        self, project: str, snapshot_id: str, aspects: Sequence[str]
    ) -> list[MemberRow]:
        """Every member row of a snapshot along `aspects` (what a flow links traces with)."""
        ...

    def trace_notes(self, project: str, trace_id: str) -> list[AspectNoteRow]:
        """Every note stored about one trace."""
        ...

    def trace_starts(self, project: str, trace_ids: Sequence[str]) -> dict[str, int]:
        """The start time of each stored trace of `trace_ids`."""
        ...

    def trace_projects(self) -> list[str]:
        """Every project with a stored trace, sorted."""
        ...

    def ended_traces(
        self, project: str, ended: tuple[int, int], *, aspect: str, after: str | None, limit: int
    ) -> list[TraceEnding]:
        """A page of the project's complete traces that ended in [ended) and that no note along
        `aspect` is about, by trace id, those after `after`."""
        ...


@runtime_checkable
class TraceStore(
    MigratedStore,
    CapabilityReport,
    BatchWrites,
    HeldSpans,
    FacetCounts,
    TraceReads,
    SignalLists,
    SignalAnalytics,
    SignalErasure,
    SignalRetention,
    DatasetRecords,
    ExperimentRecords,
    ThemeRecords,
    Protocol,
):
    """Spans, traces, logs, metrics, scores, feedback, aspect notes, themes and facets, datasets
    and experiments: every part above, for the composition root."""


# --- the parts of the run store -----------------------------------------------------------------


@runtime_checkable
class RunSubjectErasure(Protocol):
    """Erasing one subject's runs (the orchestrator's part of an erasure request)."""

    def erase_subject(self, project: str, user_ids: Sequence[str]) -> RunErasure:
        """Erase, in one transaction, the project's runs started with a correlation `user_id`
        among `user_ids`, each with its whole tree of subworkflow runs, its step attempts, run
        events, timers, waits, the parked events it consumed and the idempotency keys pointing
        at it; a tree in which some run has not ended is left whole and counted instead (see
        `RunErasure`). No `user_ids` erases nothing."""
        ...


@runtime_checkable
class DefinitionWrites(Protocol):
    """Storing definitions under the versioning rule (the spec's DefinitionDocument)."""

    def put_definitions(
        self, project: str, documents: Sequence[NewDefinition], *, now: int
    ) -> list[PlacedDefinition]:
        """Place each document as a version of its definition, in order, all in one transaction
        (atomically, whoever else posts at the same moment): none is stored when one is
        refused. Without a version: the highest version whose body is identical (`assigned`
        false), else one past the highest stored (`assigned` true). With one: taken when free,
        confirmed when it holds an identical body (`assigned` false either way); Conflict (field
        `version`, metadata `index` = the document's position) when it holds a different body,
        because a stored version never changes."""
        ...


@runtime_checkable
class DefinitionReads(Protocol):
    """Reading stored definitions."""

    def definition(
        self, project: str, definition_id: str, version: int | None = None
    ) -> StoredDefinition | None:
        """That version of the definition (the highest without `version`), or None."""
        ...

    def list_definitions(
        self, project: str, *, after: str | None, limit: int
    ) -> list[StoredDefinition]:
        """Up to `limit` of the project's definitions, the highest version of each, in id order,
        from the first id above `after`."""
        ...


@runtime_checkable
class RunStarts(Protocol):
    """Starting runs."""

    def start_run(
        self,
        run: RunRow,
        decide: Callable[[RunSnapshot], tuple[RunChanges, object]],
        *,
        now: int,
        key_ttl_ns: int,
    ) -> tuple[RunRow, bool]:
        """Store a new run and, in the same transaction, its first transition (`decide` over a
        snapshot with no journal; events numbered from 0), and answer it with True. With an
        `idempotency_key` on the run, atomically whoever else starts at the same moment: a key
        another run of the project took less than `key_ttl_ns` before `now` answers that run
        with False and stores nothing."""
        ...


@runtime_checkable
class RunReads(Protocol):
    """Reading runs, their journal and their event log."""

    def run_detail(self, project: str, run_id: str) -> RunDetailRecord | None:
        """The project's run with its attempts (in the order written), timers and waits."""
        ...

    def list_runs(
        self,
        project: str,
        *,
        statuses: Sequence[str],
        definition_id: str | None,
        after: tuple[int, str] | None,
        limit: int,
    ) -> list[RunRow]:
        """Up to `limit` of the project's runs, newest first (created_at, then run_id, both
        descending), after the (created_at, run_id) `after`, with one of `statuses` (any when
        empty) and of `definition_id` when given."""
        ...

    def run_events(
        self, project: str, run_id: str, *, after: int | None, limit: int
    ) -> list[RunEventRow]:
        """Up to `limit` rows of the project's run's event log with seq above `after`, in order."""
        ...

    def run_shapes(
        self, project: str, *, start: int, end: int, limit: int, baseline: int
    ) -> RunShapes:
        """The shapes of the project's runs that ended in [start, end) or, still running, last
        changed in it: up to `limit` of them, newest first by that instant (`truncated` when
        there were more), each with its step count and the most attempts it made at any one
        node of its definition; and, for each definition version among them, the steps_used of
        its newest `baseline` succeeded runs (by start), newest first."""
        ...


@runtime_checkable
class RunTransitions(Protocol):
    """Moving runs: each change of a run is one transaction that reads it under its tree's lock
    and writes what the orchestrator decided from that read."""

    def transition(
        self,
        project: str,
        run_id: str,
        decide: Callable[[RunSnapshot], tuple[RunChanges, T]],
        *,
        now: int,
        skip_locked: bool = False,
    ) -> T | None:
        """Lock the project's run's tree (its root, then the run), hand its snapshot (with the
        rest of the tree) to `decide`, write the changes it answers in the same transaction
        (events `at` `now`) and return the rest of its answer. None, deciding nothing, when the
        run does not exist or, with `skip_locked`, another transaction holds its tree."""
        ...

    def lease_transition(
        self,
        project: str,
        lease_id: str,
        decide: Callable[[RunSnapshot], tuple[RunChanges, T]],
        *,
        now: int,
    ) -> T | None:
        """`transition` of the run the project's lease `lease_id` belongs to, found in the same
        transaction, with the lease in the snapshot; None when there is no such lease."""
        ...

    def claim_each(
        self,
        project: str,
        *,
        run_id: str | None,
        limit: int,
        decide: Callable[[list[tuple[str, int]]], Callable[[RunSnapshot], tuple[RunChanges, T]]],
        now: int,
    ) -> list[T | None]:
        """In one transaction: read up to `limit` of the project's offerable attempts (pending,
        no retry timer holding the step; of one run when `run_id` is given), oldest first, then
        `transition` (with SKIP LOCKED) each of their runs, in run id order, decided by `decide`
        of that run's `[(step_key, attempt), ...]`. Reading inside the write transaction keeps
        concurrent claims from picking the same attempt: writers on one SQLite file take turns
        (and the claims of one group commit see each other's leases), and on PostgreSQL a run
        another claim holds is skipped. Where a write transaction would hold up every other
        writer (SQLite), a claim looks without it first and answers [] when nothing is
        offerable."""
        ...

    def due_timers(self, *, now: int, limit: int) -> list[tuple[str, TimerRow]]:
        """Up to `limit` (project, timer) come due by `now`, across projects, soonest first."""
        ...


@runtime_checkable
class RunEvents(Protocol):
    """Routing published events to the runs waiting for them."""

    def waiting(self, project: str, event: str, key: str) -> list[tuple[str, str]]:
        """(run_id, step_key) of the project's open waits on (event, key), soonest to expire
        first."""
        ...

    def park_event(self, project: str, parked: ParkedEventRow, *, supplied: bool, now: int) -> str:
        """Hold an event no run waits for, in one transaction serialised with every wait opened
        on its (event, key): 'parked'; 'duplicate' for an id seen before (a `supplied` one among
        published ids, a derived one among parked events); 'waiting' when a matching wait is
        open by now (deliver to it instead)."""
        ...


@runtime_checkable
class RunSpans(Protocol):
    """The outbox of spans the orchestrator writes for runs: queued by transitions, sent to
    ingest, then forgotten."""

    def queued_spans(self, *, limit: int) -> list[tuple[str, Any]]:
        """Up to `limit` (outbox_id, span in the spec's JSON shape), oldest first, across
        projects."""
        ...

    def sent_spans(self, outbox_ids: Sequence[str]) -> None:
        """Forget the spans ingest has."""
        ...


@runtime_checkable
class RunStore(
    MigratedStore,
    RunSubjectErasure,
    DefinitionWrites,
    DefinitionReads,
    RunStarts,
    RunReads,
    RunTransitions,
    RunEvents,
    RunSpans,
    Protocol,
):
    """Definitions, runs, step attempts, run events, timers, waits, parked events, idempotency:
    every part above, for the composition root (the orchestrator role owns this store)."""


# --- the parts of the control store -------------------------------------------------------------


@runtime_checkable
class CredentialReads(Protocol):
    """What authentication reads: key and session digests, and whether any credential exists."""

    def find_key(self, digest: str) -> StoredKey | None:
        """The key whose secret has this SHA-256 digest, revoked or not, or None."""
        ...

    def find_session(self, token_digest: str) -> StoredSession | None:
        """The session whose token has this SHA-256 digest, expired or not, or None."""
        ...

    def has_credentials(self) -> bool:
        """Whether any account or unrevoked key exists (local mode ends when one does)."""
        ...


@runtime_checkable
class AuditWrites(Protocol):
    """Appending to the audit log (the auth interceptor's sink)."""

    def append_audit(self, events: Sequence[account_pb2.AuditEvent]) -> None:
        """Append audit events in one transaction. Nothing ever deletes them."""
        ...


@runtime_checkable
class AuditReads(Protocol):
    """Reading the audit log (the query service's ListAuditEvents)."""

    def list_audit(self, project: str, *, cursor: str | None, limit: int) -> AuditPage:
        """A project's audit events, newest first, `limit` per page.

        `cursor` is the opaque `next_cursor` of the previous page; a malformed one raises
        InvalidArgument (field `cursor`).
        """
        ...


@runtime_checkable
class AccountRecords(Protocol):
    """Accounts, their sessions and their API keys (the account service)."""

    def create_account(self, account: StoredAccount, project_name: str) -> None:
        """Store a new account and create its project, in one transaction.

        Raises AlreadyExists (field `email`) when the email is taken.
        """
        ...

    def find_account(self, email: str) -> StoredAccount | None:
        """The account with this normalised email, or None."""
        ...

    def create_session(self, session: StoredSession) -> None:
        """Store a session (its token's digest, never the token)."""
        ...

    def delete_expired_sessions(self, now: datetime) -> int:
        """Remove sessions that expired before `now`; return how many."""
        ...

    def create_key(self, key: StoredKey) -> None:
        """Store an API key (its digest, never the secret)."""
        ...

    def list_keys(self, account_email: str) -> list[StoredKey]:
        """The account's keys that are not revoked, newest first."""
        ...

    def revoke_key(self, account_email: str, key_id: str, now: datetime) -> StoredKey:
        """Revoke one of the account's keys; NotFound (field `id`) when it has no such key."""
        ...


@runtime_checkable
class ProjectCatalog(Protocol):
    """Projects and their configured policies (retention, sampling, redaction, budget)."""

    def ensure_project(self, project_id: str, name: str) -> None:
        """Create the project if it does not exist. An existing project is left as it is."""
        ...

    def get_project(self, project_id: str) -> account_pb2.Project | None:
        """The project, or None when there is none with this id."""
        ...

    def list_projects(self) -> list[account_pb2.Project]:
        """Every project, ordered by project id."""
        ...

    def configure_project(self, project: account_pb2.Project) -> None:
        """Create or update a project's name, retention, sampling, redaction, budget and
        metadata from configuration (absent JSON fields cleared); created_at is kept."""
        ...


@runtime_checkable
class PriceOverrides(Protocol):
    """Each project's overrides of the price book."""

    def set_price_overrides(
        self, project_id: str, prices: Mapping[str, Mapping[str, float]], currency: str = "USD"
    ) -> int:
        """Record the project's price overrides (model -> meter -> price per million tokens)
        as new price-book rows effective now, for the meters whose price changed; return how
        many rows were added. Price rows are never updated."""
        ...

    def price_overrides(self, project_id: str) -> dict[str, dict[str, float]]:
        """The project's current price override per model and meter."""
        ...


@runtime_checkable
class WatchStates(Protocol):
    """The latched condition of each monitor and objective, with its last reading, across
    restarts; `kind` is `monitor` or `slo`."""

    def watch_states(self, kind: str, watch_ids: Sequence[str]) -> dict[str, WatchState]:
        """The stored state of each of `watch_ids` that has one, by id."""
        ...

    def save_watch_state(self, kind: str, watch_id: str, state: WatchState) -> None:
        """Store `state` for the watch, replacing what was there."""
        ...


@runtime_checkable
class AspectRecords(Protocol):
    """Every stored version of each project's aspects: the catalogue the intelligence service
    answers with and ingest checks a note's aspect against (`mcpd.aspects` decides what is
    stored). A stored version is never changed."""

    def aspects(self, project: str) -> list[AspectRecord]:
        """The newest version of each of the project's aspects, by sort_order then name."""
        ...

    def store_aspect_versions(self, records: Sequence[AspectRecord]) -> None:
        """Store the versions, in one transaction, skipping each whose (project, name, version)
        is stored already: replicas storing the same version at once store it once."""
        ...


@runtime_checkable
class ControlStore(
    MigratedStore,
    CredentialReads,
    AuditWrites,
    AuditReads,
    AccountRecords,
    ProjectCatalog,
    PriceOverrides,
    WatchStates,
    AspectRecords,
    Protocol,
):
    """Projects, accounts, API key digests, sessions, the audit log, the price book, the
    monitors' conditions and the aspects: every part above, for the composition root (every role
    opens it, to authenticate)."""
