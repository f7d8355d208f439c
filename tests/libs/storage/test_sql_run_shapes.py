"""The run shapes the run watches read, on SQLite and PostgreSQL: the window holds the runs that
ended in it and the running ones that moved in it, newest first and bounded; a run's most
attempts at one node count retries and loop iterations of a node alike, and the items of a
foreach apart, without wait frames or skipped steps; each version among the window's runs gets
the step counts of its newest succeeded runs; nothing crosses projects."""

from __future__ import annotations

from typing import Any, cast

import pytest

from mcpd.storage.run_records import AttemptRow, NewDefinition, RunChanges, RunShape, RunShapes
from mcpd.storage.sql.stores import SqlRunStore
from tests.libs.storage.test_sql_runs import run_row

T = 1_767_225_600_000_000_000
S = 1_000_000_000
START, END = T + 100 * S, T + 200 * S


@pytest.fixture
def run_store(run_store: SqlRunStore) -> SqlRunStore:
    """The run store with versions 1 and 2 of `flow` in projects p and q."""
    for project in ("p", "q"):
        for steps in (["a"], ["a", "b"]):
            body = {"steps": [{"id": step, "kind": "task"} for step in steps]}
            run_store.put_definitions(
                project, [NewDefinition("flow", "workflow", body, None)], now=T
            )
    return run_store


def attempt(run_id: str, step_key: str, number: int = 1, **columns: Any) -> AttemptRow:
    row: dict[str, Any] = {
        "run_id": run_id,
        "step_key": step_key,
        "attempt": number,
        "kind": "task",
        "effect": "at_least_once",
        "status": "succeeded",
        "input": None,
        "output": None,
        "error": None,
        "usage": None,
        "cost_usd": None,
        "span_id": f"{abs(hash((run_id, step_key, number))):016x}"[:16],
        "lease_owner": None,
        "lease_id": None,
        "lease_until": None,
        "started_at": None,
        "orphaned_at": None,
        "reclaim_until": None,
        "attempts_left": None,
        "ended_at": None,
        "created_at": T,
        **columns,
    }
    return cast(AttemptRow, row)


def put(
    store: SqlRunStore,
    run_id: str,
    *,
    ended_at: int | None,
    status: str = "succeeded",
    steps: int = 1,
    version: int = 1,
    created_at: int = T,
    updated_at: int | None = None,
    project: str = "p",
    attempts: tuple[AttemptRow, ...] = (),
) -> None:
    row = run_row(run_id, project=project, at=created_at, status=status)
    row["definition_version"] = version
    row["steps_used"] = steps
    row["ended_at"] = ended_at
    row["updated_at"] = updated_at if updated_at is not None else (ended_at or created_at)
    changes = RunChanges(new_attempts=list(attempts))
    _, made = store.start_run(row, lambda _: (changes, None), now=created_at, key_ttl_ns=S)
    assert made


def shape(
    run_id: str,
    steps: int,
    ended_at: int | None,
    most: int,
    *,
    status: str = "succeeded",
    version: int = 1,
) -> RunShape:
    return RunShape(run_id, "flow", version, status, steps, ended_at, most)


def test_the_window_holds_runs_that_ended_in_it_and_running_ones_that_moved(
    run_store: SqlRunStore,
) -> None:
    put(run_store, "before", ended_at=START - 1)
    put(run_store, "first", ended_at=START, status="failed", steps=3)
    put(run_store, "last", ended_at=END - 1, steps=2, version=2)
    put(run_store, "after", ended_at=END)
    put(run_store, "moving", ended_at=None, status="running", steps=7, updated_at=START + 50 * S)
    put(run_store, "still", ended_at=None, status="running", updated_at=START - S)
    put(run_store, "elsewhere", ended_at=START + S, project="q")

    found = run_store.run_shapes("p", start=START, end=END, limit=10, baseline=0)

    assert found == RunShapes(
        runs=(
            shape("last", 2, END - 1, 0, version=2),
            shape("moving", 7, None, 0, status="running"),
            shape("first", 3, START, 0, status="failed"),
        ),
        truncated=False,
        baselines={("flow", 1): (), ("flow", 2): ()},
    )
    newest = run_store.run_shapes("p", start=START, end=END, limit=2, baseline=0)
    assert ([run.run_id for run in newest.runs], newest.truncated) == (["last", "moving"], True)
    assert run_store.run_shapes("q", start=T, end=START, limit=10, baseline=5) == RunShapes()


def test_retries_and_loop_iterations_of_a_node_count_alike_and_foreach_items_apart(
    run_store: SqlRunStore,
) -> None:
    put(
        run_store,
        "looping",
        ended_at=START,
        attempts=(
            attempt("looping", "a", 1, status="failed"),
            attempt("looping", "a", 2, status="failed"),
            attempt("looping", "a", 3),
            attempt("looping", "poll", kind="wait"),  # the loop's frame: no attempt at work
            attempt("looping", "poll[0]/check"),
            attempt("looping", "poll[1]/check", 1, status="failed"),
            attempt("looping", "poll[1]/check", 2),
            attempt("looping", "poll[2]/check"),
            attempt("looping", "poll[10]/check"),
            attempt("looping", "skipped", status="skipped"),
        ),
    )
    put(
        run_store,
        "fanning",
        ended_at=START + S,
        attempts=(
            attempt("fanning", "each", kind="wait"),
            *(attempt("fanning", f"each[{item}]") for item in range(12)),
            attempt("fanning", "refund/issue", 1, status="failed"),
            attempt("fanning", "refund/issue", 2),
            attempt("fanning", "refund/notify"),
        ),
    )
    put(
        run_store,
        "napping",
        ended_at=START + 2 * S,
        attempts=(attempt("napping", "nap", kind="wait"),),
    )

    found = run_store.run_shapes("p", start=START, end=END, limit=10, baseline=0)

    # looping: poll/check ran five times (four iterations, one retried), `a` three times.
    assert {run.run_id: run.max_node_attempts for run in found.runs} == {
        "looping": 5,
        "fanning": 2,
        "napping": 0,
    }


def test_each_version_in_the_window_gets_its_newest_succeeded_step_counts(
    run_store: SqlRunStore,
) -> None:
    for n in range(5):
        put(run_store, f"old-{n}", ended_at=T + n, steps=10 + n, created_at=T + n)
    put(run_store, "failed", ended_at=T + 9, status="failed", steps=99, created_at=T + 9)
    put(run_store, "running", ended_at=None, status="running", steps=98, created_at=T + 9)
    put(run_store, "other", ended_at=T + 9, steps=97, version=2, created_at=T + 9)
    put(run_store, "other-p", ended_at=T + 9, steps=96, created_at=T + 9, project="q")
    put(run_store, "now", ended_at=START, steps=30, created_at=START - S)

    found = run_store.run_shapes("p", start=START, end=END, limit=10, baseline=4)

    assert [run.run_id for run in found.runs] == ["now"]
    assert found.baselines == {("flow", 1): (30, 14, 13, 12)}
    wide = run_store.run_shapes("p", start=START, end=END, limit=10, baseline=100)
    assert wide.baselines == {("flow", 1): (30, 14, 13, 12, 11, 10)}
