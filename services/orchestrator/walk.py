"""The walk: what a run does next, decided from its snapshot and written as `RunChanges`.

`Moves` is one transition's view of a run: the snapshot with the changes decided so far laid
over it, and the operations the orchestrator's transitions share (add or update an attempt, set
or clear a timer, move the cursor, end the run). `advance` walks the cursor forward from where
it stands: a node whose `when` guard is false is written `skipped`; a claimable node (`task`,
`agent`) gets its first attempt, `pending`, with its input rendered, and the walk stops there
until that node has ended; a node that ended `succeeded` or `skipped` moves the cursor on; one
that `failed` (or `timed_out`) with no retry left ends the run under `on_error: fail_run` and
moves on under `continue`. Past the last node the run ends `succeeded` with the definition's
`output` template rendered.

Ending a run keeps the terminal invariant in the same transaction: its live attempts are marked
`failed`, its timers and waits are dropped and `deadline_at` is cleared.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, cast

from mcpd.runtime.errors import Unimplemented
from mcpd.runtime.ids import new_span_id
from mcpd.storage.run_records import (
    AttemptRow,
    RunChanges,
    RunSnapshot,
    TimerRow,
    WaitRow,
)
from mcpd.workflows import render
from services.orchestrator import constructs
from services.orchestrator.constructs import CLAIMABLE, LIVE, SERVED

KINDS = (
    "task",
    "agent",
    "sleep",
    "sleep_until",
    "wait_event",
    "parallel",
    "foreach",
    "loop",
    "subworkflow",
)

__all__ = [
    "ENDED",
    "Moves",
    "check_served",
    "step_error",
]

ENDED = frozenset({"succeeded", "failed", "timed_out", "skipped"})
DEFAULT_ATTEMPTS = 1


def check_served(body: Mapping[str, Any]) -> None:
    """Unimplemented naming the first node whose construct the walk does not serve yet."""
    for index, node in enumerate(body["steps"]):
        if node["kind"] not in SERVED:
            raise Unimplemented(
                f"steps[{index}] is a {node['kind']} node: this daemon does not walk "
                f"{', '.join(sorted(set(KINDS) - SERVED))} nodes yet",
                field=f"steps[{index}].kind",
            )


def step_error(kind: str, message: str) -> dict[str, Any]:
    """A StepError object as the journal stores it."""
    return {"class": kind, "message": message}


class Moves:
    """One transition of one run: its snapshot with the changes decided so far."""

    def __init__(self, snapshot: RunSnapshot, body: Mapping[str, Any], now: int) -> None:
        self.body = body
        self.now = now
        self.changes = RunChanges()
        self.run: dict[str, Any] = dict(snapshot.run)
        self.attempts: list[AttemptRow] = list(snapshot.attempts)
        self.lease = snapshot.lease
        self.wait_keys = snapshot.wait_keys
        self.waits: dict[str, WaitRow] = {w["step_key"]: w for w in snapshot.waits}
        # Whether this transition left an attempt offerable, so held claims should look again.
        self.offered = False
        self.timers: dict[tuple[str, str], TimerRow] = {
            (t["kind"], t["step_key"]): t for t in snapshot.timers
        }

    # The run.

    @property
    def status(self) -> str:
        return str(self.run["status"])

    def set_run(self, **columns: Any) -> None:
        """Set columns of the run row (and `updated_at`)."""
        columns["updated_at"] = self.now
        self.changes.run.update(columns)
        self.run.update(columns)

    def event(self, kind: str, payload: Mapping[str, Any] | None) -> None:
        self.changes.events.append((kind, None if payload is None else dict(payload)))

    def end_run(self, status: str, *, error: str | None = None, output: Any = None) -> None:
        """End the run `status`, keeping the terminal invariant (see the module docstring)."""
        for row in self.attempts:
            if row["status"] in LIVE:
                self.update_attempt(
                    row,
                    status="failed",
                    error=step_error(
                        "fatal", f"the run ended {status} while this attempt was live"
                    ),
                    lease_until=None,
                    ended_at=self.now,
                )
        self.set_run(status=status, error=error, output=output, deadline_at=None, ended_at=self.now)
        self.changes.timers_set = []
        self.changes.timers_cleared = []
        self.changes.new_waits = []
        self.changes.drop_timers_and_waits = True
        self.timers = {}
        self.waits = {}
        payload: dict[str, Any] = {"status": status}
        if error is not None:
            payload["error"] = error
        self.event("run_ended", payload)

    # Attempts.

    def latest(self, step_key: str) -> AttemptRow | None:
        """The latest attempt at `step_key`, or None."""
        found = None
        for row in self.attempts:
            if row["step_key"] == step_key and (found is None or row["attempt"] > found["attempt"]):
                found = row
        return found

    def attempt(self, step_key: str, attempt: int) -> AttemptRow | None:
        for row in self.attempts:
            if row["step_key"] == step_key and row["attempt"] == attempt:
                return row
        return None

    def add_attempt(
        self, node: Mapping[str, Any], step_key: str, number: int, **columns: Any
    ) -> AttemptRow:
        """Write attempt `number` at `step_key` of a node, pending unless `columns` say
        otherwise, with the node's input rendered (or the run's input when it declares none)."""
        retry = node.get("retry", {})
        kind = node.get("kind", "task")
        claimable = kind in CLAIMABLE
        row: dict[str, Any] = {
            "run_id": self.run["run_id"],
            "step_key": step_key,
            "attempt": number,
            "kind": kind if claimable else "wait",
            "effect": node.get("effect", "at_least_once"),
            "status": "pending",
            "input": self.render_input(node),
            "output": None,
            "error": None,
            "usage": None,
            "cost_usd": None,
            "span_id": new_span_id(),
            "lease_owner": None,
            "lease_id": None,
            "lease_until": None,
            "started_at": None,
            "orphaned_at": None,
            "reclaim_until": None,
            "attempts_left": retry.get("attempts", DEFAULT_ATTEMPTS) - number
            if claimable
            else None,
            "ended_at": None,
            "created_at": self.now,
            **columns,
        }
        attempt = cast(AttemptRow, row)
        self.offered |= attempt["status"] == "pending"
        self.attempts.append(attempt)
        self.changes.new_attempts.append(attempt)
        return attempt

    def update_attempt(self, row: AttemptRow, **columns: Any) -> None:
        """Set columns of an attempt already in the journal or added in this transition."""
        cast(dict[str, Any], row).update(columns)
        if columns.get("status") == "pending" and not self.has_timer("retry", row["step_key"]):
            self.offered = True
        if any(added is row for added in self.changes.new_attempts):
            return
        self.changes.attempt_updates.append((row["step_key"], row["attempt"], columns))

    # Timers.

    def set_timer(self, kind: str, step_key: str, attempt: int | None, due_at: int) -> None:
        timer: TimerRow = {
            "run_id": self.run["run_id"],
            "kind": kind,
            "step_key": step_key,
            "attempt": attempt,
            "due_at": due_at,
        }
        self._unset_timer(kind, step_key)
        self.changes.timers_set.append(timer)
        self.timers[(kind, step_key)] = timer

    def clear_timer(self, kind: str, step_key: str) -> None:
        if self.timers.pop((kind, step_key), None) is None:
            return
        self._unset_timer(kind, step_key)
        self.changes.timers_cleared.append((kind, step_key))

    def _unset_timer(self, kind: str, step_key: str) -> None:
        """Forget a timer set earlier in this transition."""
        self.changes.timers_set = [
            t for t in self.changes.timers_set if (t["kind"], t["step_key"]) != (kind, step_key)
        ]

    def has_timer(self, kind: str, step_key: str) -> bool:
        return (kind, step_key) in self.timers

    # Waits.

    def open_wait(self, step_key: str, event: str, key: str, expires_at: int) -> None:
        wait: WaitRow = {
            "run_id": self.run["run_id"],
            "step_key": step_key,
            "event": event,
            "key": key,
            "expires_at": expires_at,
        }
        self.changes.new_waits.append(wait)
        self.waits[step_key] = wait

    def close_wait(self, step_key: str) -> None:
        """Close the open wait of `step_key` and drop its timeout."""
        if self.waits.pop(step_key, None) is None:
            return
        self.changes.new_waits = [w for w in self.changes.new_waits if w["step_key"] != step_key]
        self.changes.waits_closed.append(step_key)
        self.clear_timer("wait_timeout", step_key)

    # Templates.

    def scope(self) -> dict[str, Any]:
        """What templates and guards read: the run's input and state, and the latest ended
        attempt of every node that has one."""
        steps: dict[str, Any] = {}
        for node in self.body["steps"]:
            ended = self.latest(node["id"])
            if ended is not None and ended["status"] in ENDED:
                steps[node["id"]] = _result(ended)
            if node["kind"] == "loop":
                iteration = constructs.last_ended_iteration(self, node)
                if iteration is not None:
                    steps[node["body"]["id"]] = _result(iteration)
        return {"input": self.run["input"], "state": self.run["state"] or {}, "steps": steps}

    def render_input(self, node: Mapping[str, Any]) -> Any:
        if "input" not in node:
            return self.run["input"]
        return render(node["input"], self.scope())

    def prior(self) -> dict[str, Any]:
        """The ended attempts of the nodes, keyed by node id: {status, output?, error?} of the
        latest of each (StepLease.prior)."""
        prior: dict[str, Any] = {}
        for step_id, step in self.scope()["steps"].items():
            entry = {"status": step["status"]}
            for name in ("output", "error"):
                if step[name] is not None:
                    entry[name] = step[name]
            prior[step_id] = entry
        return prior

    # The walk.

    def move_cursor(self, index: int) -> None:
        """Put the cursor on node `index` (or the end of the graph) and log it."""
        steps: Sequence[Mapping[str, Any]] = self.body["steps"]
        if index < len(steps):
            construct, step_key = steps[index]["kind"], steps[index]["id"]
        else:
            construct, step_key = "end", None
        self.set_run(cursor_index=index, cursor_construct=construct, cursor_step_key=step_key)
        payload: dict[str, Any] = {"index": index, "construct": construct}
        if step_key is not None:
            payload["step_key"] = step_key
        self.event("run_cursor", payload)

    def advance(self) -> None:
        """Walk the cursor forward as far as the journal allows (`constructs`)."""
        constructs.advance(self)


def _result(row: AttemptRow) -> dict[str, Any]:
    return {"output": row["output"], "status": row["status"], "error": row["error"]}
