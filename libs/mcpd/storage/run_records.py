"""What the run store keeps and answers, as plain records.

`RunErasure` is the run store's part of an erasure request: the spec's ErasureResult carries
its counts (`runs_erased`, `runs_in_flight`) and turns `in_flight_roots` into the note that
tells an operator which run trees to cancel or wait for before sending the request again.
`RunShapes` is what the evaluation service's run watches read of a window's runs.
`StoredDefinition` and `PlacedDefinition` are the spec's Definition and DefinitionVersion;
`NewDefinition` is a checked DefinitionDocument. The run rows (`RunRow`, `AttemptRow`,
`LeaseRow`, `TimerRow`, `WaitRow`, `RunEventRow`) are the run store's tables as the orchestrator
reads and writes them; a transition reads a `RunSnapshot` and answers the `RunChanges` the store
applies in the same transaction.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol, TypedDict


@dataclass(frozen=True, slots=True)
class RunErasure:
    """What erasing one subject did in the run store.

    `runs_erased` counts every run removed, the subject's own and the other runs of their
    trees. `runs_in_flight` counts the subject's runs left in place because some run of their
    tree has not ended, and `in_flight_roots` names those trees by root run id, sorted.
    """

    runs_erased: int = 0
    runs_in_flight: int = 0
    in_flight_roots: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class RunShape:
    """What the run watches read of one run: its definition version, status, step count, end
    (None while it runs) and `max_node_attempts`, the most attempts it made at any one node of
    its definition (retries and loop iterations of a node alike; 0 when it made none)."""

    run_id: str
    definition_id: str
    definition_version: int
    status: str
    steps_used: int
    ended_at: int | None
    max_node_attempts: int


@dataclass(frozen=True, slots=True)
class RunShapes:
    """A window's runs, newest first (`truncated`: more were in it than asked for), and for
    each definition version among them the step counts of its newest succeeded runs, newest
    first (`baselines`, by (definition id, version))."""

    runs: tuple[RunShape, ...] = ()
    truncated: bool = False
    baselines: dict[tuple[str, int], tuple[int, ...]] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class StoredDefinition:
    """One stored version of a definition (the spec's Definition). `body` is the document as
    posted, normalised, without its version."""

    project: str
    id: str
    version: int
    kind: str
    body: dict[str, Any]
    created_at: int


@dataclass(frozen=True, slots=True)
class NewDefinition:
    """A checked definition document to place: its id, kind, normalised body and the version
    it names (None: the store chooses)."""

    id: str
    kind: str
    body: dict[str, Any]
    version: int | None


@dataclass(frozen=True, slots=True)
class PlacedDefinition:
    """Where a posted definition landed (the spec's DefinitionVersion)."""

    id: str
    version: int
    assigned: bool


class RunRow(TypedDict):
    """One `runs` row: the spec's Run with its cursor and correlation flattened (the
    correlation's `run_id` is the run's own and `project` the row's). Times in epoch ns."""

    run_id: str
    project: str
    definition_id: str
    definition_version: int
    status: str
    cursor_index: int
    cursor_construct: str
    cursor_step_key: str | None
    input: Any
    output: Any
    state: Any
    error: str | None
    environment: str | None
    service_name: str | None
    service_version: str | None
    session_id: str | None
    thread_id: str | None
    user_id: str | None
    resource_id: str | None
    request_id: str | None
    experiment_id: str | None
    release: str | None
    trace_id: str
    steps_used: int
    max_steps: int | None
    cost_usd: float
    max_cost_usd: float | None
    deadline_at: int | None
    idempotency_key: str | None
    root_run_id: str
    parent_run_id: str | None
    parent_step_key: str | None
    depth: int
    next_event_seq: int
    created_at: int
    updated_at: int
    ended_at: int | None


class RunEventRow(TypedDict):
    """One row of a run's event log."""

    run_id: str
    seq: int
    kind: str
    payload: Any
    at: int


class AttemptRow(TypedDict):
    """One `step_attempts` row (the spec's StepAttempt)."""

    run_id: str
    step_key: str
    attempt: int
    kind: str
    effect: str
    status: str
    input: Any
    output: Any
    error: Any
    usage: Any
    cost_usd: float | None
    span_id: str
    lease_owner: str | None
    lease_id: str | None
    lease_until: int | None
    started_at: int | None
    orphaned_at: int | None
    reclaim_until: int | None
    attempts_left: int | None
    ended_at: int | None
    created_at: int


class TimerRow(TypedDict):
    """One deadline the daemon holds for a run; `step_key` '' for a run-level one."""

    run_id: str
    kind: str
    step_key: str
    attempt: int | None
    due_at: int


class WaitRow(TypedDict):
    """One open wait of a run for an event."""

    run_id: str
    step_key: str
    event: str
    key: str
    expires_at: int


@dataclass(frozen=True, slots=True)
class RunDetailRecord:
    """A run and everything the daemon holds for it."""

    run: RunRow
    attempts: list[AttemptRow]
    timers: list[TimerRow]
    waits: list[WaitRow]


class LeaseRow(TypedDict):
    """One lease handed to a worker; `outcome` is 'completed' or 'failed' once its own complete
    or fail landed."""

    lease_id: str
    run_id: str
    step_key: str
    attempt: int
    worker_id: str
    issued_at: int
    outcome: str | None


class ParkedEventRow(TypedDict):
    """An event no run was waiting for, held for a later wait that accepts parked events."""

    event_id: str
    event: str
    key: str
    payload: Any
    parked_at: int
    expires_at: int


class WaitKeys(Protocol):
    """The events of one project, for a transition opening a wait: `hold` serialises everyone
    opening or publishing on one (event, key) until the transaction ends, and `take_parked`
    removes and answers the oldest unexpired event parked on it."""

    def hold(self, event: str, key: str) -> None: ...

    def take_parked(self, event: str, key: str, *, now: int) -> ParkedEventRow | None: ...


class RunTree(Protocol):
    """The other runs of a run's tree, inside a transition that holds the tree's root: their
    snapshots (locked in turn), the running children of one, the steps and cost of the whole
    tree as stored, and the snapshot of a run not stored yet (a child being started)."""

    def snapshot(self, run_id: str) -> RunSnapshot | None: ...

    def running_children(self, run_id: str) -> list[str]: ...

    def totals(self, root_run_id: str) -> tuple[int, float]: ...

    def new(self, run: RunRow) -> RunSnapshot: ...


@dataclass(frozen=True, slots=True)
class RunSnapshot:
    """What a transition of one run reads, under the lock of its tree: the run, its journal in
    the order written, its timers and waits, the lease the call addresses (when it addresses
    one), the project's wait keys and the rest of the tree."""

    run: RunRow
    attempts: list[AttemptRow]
    timers: list[TimerRow]
    waits: list[WaitRow]
    lease: LeaseRow | None = None
    wait_keys: WaitKeys | None = None
    tree: RunTree | None = None


@dataclass(slots=True)
class RunChanges:
    """What one transition writes, applied by the store in the transaction that read the
    snapshot: columns of the run row, attempts added and updated ((step_key, attempt, columns)),
    event log rows (kind, payload) numbered from the run header, timers set (replacing one of the
    same kind and step) and cleared ((kind, step_key)), waits opened and closed (by step key),
    every timer and wait of the run dropped (a terminal run holds none), leases added and their
    outcomes ((lease_id, outcome)), published event ids taken ((event_id, run_id), for 24
    hours: one taken already aborts the transition with AlreadyExists), spans queued for ingest
    (Span messages in the spec's JSON shape), runs started by this
    one (a subworkflow's child, with its first transition) and changes of other runs of the
    tree (by run id)."""

    run: dict[str, Any] = field(default_factory=dict)
    new_attempts: list[AttemptRow] = field(default_factory=list)
    attempt_updates: list[tuple[str, int, dict[str, Any]]] = field(default_factory=list)
    events: list[tuple[str, Any]] = field(default_factory=list)
    timers_set: list[TimerRow] = field(default_factory=list)
    timers_cleared: list[tuple[str, str]] = field(default_factory=list)
    new_waits: list[WaitRow] = field(default_factory=list)
    waits_closed: list[str] = field(default_factory=list)
    drop_timers_and_waits: bool = False
    new_leases: list[LeaseRow] = field(default_factory=list)
    lease_outcomes: list[tuple[str, str]] = field(default_factory=list)
    event_ids: list[tuple[str, str]] = field(default_factory=list)
    spans: list[Any] = field(default_factory=list)
    new_runs: list[tuple[RunRow, RunChanges]] = field(default_factory=list)
    others: dict[str, RunChanges] = field(default_factory=dict)
