"""Runs in the run store on SQLite and PostgreSQL: a start stores the run, its first events and
its timers together; an idempotency key makes one run however many starts race for it, per
project and for as long as it lives; the event log is numbered from 0 without gaps; the listing
pages newest first under its filters; nothing crosses projects."""

from __future__ import annotations

import threading
from typing import Any, cast

import pytest

from mcpd.storage.run_records import NewDefinition, RunChanges, RunRow, RunSnapshot, TimerRow
from mcpd.storage.sql.stores import SqlRunStore

T = 1_767_225_600_000_000_000
HOUR_NS = 3600 * 1_000_000_000
STARTED = [
    ("run_started", {"definition_id": "flow", "definition_version": 1}),
    ("run_cursor", {"index": 0, "construct": "task", "step_key": "a"}),
]


@pytest.fixture
def run_store(run_store: SqlRunStore) -> SqlRunStore:
    """The run store with the definitions the runs here pin (a run's version is a foreign key)."""
    body = {"steps": [{"id": "a", "kind": "task"}]}
    for project in ("p", "q"):
        documents = [NewDefinition(name, "workflow", body, None) for name in ("flow", "other")]
        run_store.put_definitions(project, documents, now=T)
    return run_store


def run_row(
    run_id: str,
    *,
    project: str = "p",
    key: str | None = None,
    at: int = T,
    status: str = "running",
    definition_id: str = "flow",
) -> RunRow:
    fields: dict[str, Any] = {
        "run_id": run_id,
        "project": project,
        "definition_id": definition_id,
        "definition_version": 1,
        "status": status,
        "cursor_index": 0,
        "cursor_construct": "task",
        "cursor_step_key": "a",
        "input": {"ticket": "refund please", "n": [1, 2]},
        "output": None,
        "state": None,
        "error": None,
        "environment": "prod",
        "service_name": None,
        "service_version": None,
        "session_id": "s-1",
        "thread_id": None,
        "user_id": "u-1",
        "resource_id": None,
        "request_id": None,
        "experiment_id": None,
        "release": None,
        "trace_id": "0" * 31 + "1",
        "steps_used": 0,
        "max_steps": 10,
        "cost_usd": 0.0,
        "max_cost_usd": None,
        "deadline_at": at + HOUR_NS,
        "idempotency_key": key,
        "root_run_id": run_id,
        "parent_run_id": None,
        "parent_step_key": None,
        "depth": 0,
        "next_event_seq": 0,
        "created_at": at,
        "updated_at": at,
        "ended_at": None,
    }
    return cast(RunRow, fields)


def timeout(run_id: str, at: int = T) -> TimerRow:
    return {
        "run_id": run_id,
        "kind": "run_timeout",
        "step_key": "",
        "attempt": None,
        "due_at": at + HOUR_NS,
    }


def start(
    store: SqlRunStore, run: RunRow, *, now: int = T, ttl: int = 24 * HOUR_NS
) -> tuple[RunRow, bool]:
    changes = RunChanges(events=list(STARTED), timers_set=[timeout(run["run_id"], now)])
    return store.start_run(run, writing(changes), now=now, key_ttl_ns=ttl)


def writing(changes: RunChanges) -> Any:
    """A first transition that writes `changes`."""
    return lambda snapshot: (changes, None)


def test_a_start_stores_the_run_its_first_events_and_its_timers(run_store: SqlRunStore) -> None:
    stored, created = start(run_store, run_row("r1"))
    assert created
    assert stored["next_event_seq"] == 2
    assert {k: v for k, v in stored.items() if k != "next_event_seq"} == {
        k: v for k, v in run_row("r1").items() if k != "next_event_seq"
    }
    detail = run_store.run_detail("p", "r1")
    assert detail is not None
    assert detail.run == stored
    assert detail.attempts == []
    assert detail.waits == []
    assert detail.timers == [timeout("r1")]
    events = run_store.run_events("p", "r1", after=None, limit=10)
    assert [(e["seq"], e["kind"], e["payload"], e["at"]) for e in events] == [
        (0, "run_started", {"definition_id": "flow", "definition_version": 1}, T),
        (1, "run_cursor", {"index": 0, "construct": "task", "step_key": "a"}, T),
    ]


def test_a_held_key_answers_its_run_and_stores_nothing_more(run_store: SqlRunStore) -> None:
    first, created = start(run_store, run_row("r1", key="k"))
    again, created_again = start(run_store, run_row("r2", key="k"), now=T + HOUR_NS)
    assert created
    assert not created_again
    assert again == first
    assert run_store.run_detail("p", "r2") is None
    assert run_store.run_events("p", "r2", after=None, limit=10) == []
    listed = run_store.list_runs("p", statuses=[], definition_id=None, after=None, limit=10)
    assert [r["run_id"] for r in listed] == ["r1"]


def test_a_key_is_per_project_and_lapses_after_its_ttl(run_store: SqlRunStore) -> None:
    start(run_store, run_row("r1", key="k"), ttl=HOUR_NS)
    other, created = start(run_store, run_row("q1", key="k", project="q"))
    assert created
    assert other["run_id"] == "q1"
    # Still held a nanosecond before it lapses, taken afresh at the moment it does.
    held, created = start(run_store, run_row("r2", key="k"), now=T + HOUR_NS - 1, ttl=HOUR_NS)
    assert not created
    assert held["run_id"] == "r1"
    fresh, created = start(run_store, run_row("r3", key="k", at=T + HOUR_NS), now=T + HOUR_NS)
    assert created
    assert fresh["run_id"] == "r3"
    again, created = start(run_store, run_row("r4", key="k"), now=T + HOUR_NS + 1)
    assert not created
    assert again["run_id"] == "r3"


def test_simultaneous_starts_of_one_key_make_one_run(run_store: SqlRunStore) -> None:
    barrier = threading.Barrier(6)
    answers: list[tuple[str, bool]] = []
    failures: list[BaseException] = []

    def racer(n: int) -> None:
        try:
            barrier.wait()
            stored, created = start(run_store, run_row(f"race{n}", key="same"))
            answers.append((stored["run_id"], created))
        except BaseException as error:  # surfaced by the assertion below
            failures.append(error)

    threads = [threading.Thread(target=racer, args=(n,)) for n in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []
    assert len({run_id for run_id, _ in answers}) == 1
    assert sorted(created for _, created in answers) == [False] * 5 + [True]
    listed = run_store.list_runs("p", statuses=[], definition_id=None, after=None, limit=10)
    assert len(listed) == 1
    winner = listed[0]["run_id"]
    assert [e["seq"] for e in run_store.run_events("p", winner, after=None, limit=10)] == [0, 1]


def test_transitions_continue_the_event_sequence_and_page_after_a_seq(
    run_store: SqlRunStore,
) -> None:
    start(run_store, run_row("r1"))

    def logging(*events: tuple[str, Any]) -> Any:
        def decide(snapshot: RunSnapshot) -> tuple[RunChanges, int]:
            return RunChanges(events=list(events)), snapshot.run["next_event_seq"]

        return decide

    seen = run_store.transition("p", "r1", logging(("step_skipped", {"step_key": "a"})), now=T + 1)
    assert seen == 2
    two = logging(("run_cursor", {"index": 1, "construct": "end"}), ("run_ended", None))
    assert run_store.transition("p", "r1", two, now=T + 2) == 3
    every = run_store.run_events("p", "r1", after=None, limit=100)
    assert [(e["seq"], e["kind"], e["at"]) for e in every] == [
        (0, "run_started", T),
        (1, "run_cursor", T),
        (2, "step_skipped", T + 1),
        (3, "run_cursor", T + 2),
        (4, "run_ended", T + 2),
    ]
    assert every[4]["payload"] is None
    page = run_store.run_events("p", "r1", after=1, limit=2)
    assert [e["seq"] for e in page] == [2, 3]
    assert run_store.run_events("p", "r1", after=4, limit=2) == []
    detail = run_store.run_detail("p", "r1")
    assert detail is not None
    assert detail.run["next_event_seq"] == 5
    # Another project's run is not there to move.
    assert run_store.transition("q", "r1", logging(("run_ended", None)), now=T + 3) is None


def test_the_listing_pages_newest_first_under_its_filters(run_store: SqlRunStore) -> None:
    start(run_store, run_row("a", at=T))
    start(run_store, run_row("c", at=T + 1, status="succeeded"))
    start(run_store, run_row("b", at=T + 1))
    start(run_store, run_row("d", at=T + 2, definition_id="other"))
    start(run_store, run_row("e", at=T + 3, project="q"))

    def listed(**filters: Any) -> list[str]:
        found = run_store.list_runs(
            "p",
            statuses=filters.get("statuses", []),
            definition_id=filters.get("definition_id"),
            after=filters.get("after"),
            limit=filters.get("limit", 10),
        )
        return [r["run_id"] for r in found]

    # created_at descending, ties broken by run_id descending.
    assert listed() == ["d", "c", "b", "a"]
    assert listed(limit=2) == ["d", "c"]
    assert listed(after=(T + 1, "c")) == ["b", "a"]
    assert listed(after=(T + 1, "b"), limit=1) == ["a"]
    assert listed(statuses=["succeeded"]) == ["c"]
    assert listed(statuses=["succeeded", "running"], definition_id="flow") == ["c", "b", "a"]
    assert listed(definition_id="missing") == []


def test_nothing_is_read_across_projects(run_store: SqlRunStore) -> None:
    start(run_store, run_row("r1"))
    assert run_store.run_detail("q", "r1") is None
    assert run_store.run_events("q", "r1", after=None, limit=10) == []
    assert run_store.list_runs("q", statuses=[], definition_id=None, after=None, limit=10) == []


@pytest.mark.parametrize("events", [[], STARTED])
def test_a_start_writes_exactly_the_events_it_is_given(
    run_store: SqlRunStore, events: list[tuple[str, Any]]
) -> None:
    changes = RunChanges(events=list(events))
    stored, _ = run_store.start_run(run_row("r1"), writing(changes), now=T, key_ttl_ns=HOUR_NS)
    assert stored["next_event_seq"] == len(events)
    assert len(run_store.run_events("p", "r1", after=None, limit=10)) == len(events)
    detail = run_store.run_detail("p", "r1")
    assert detail is not None
    assert detail.timers == []
