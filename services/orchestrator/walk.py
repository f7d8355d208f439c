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

from mcpd.runtime.ids import new_span_id
from mcpd.storage.run_records import (
    AttemptRow,
    RunChanges,
    RunRow,
    RunSnapshot,
    TimerRow,
    WaitRow,
)
from mcpd.workflows import render
from services.orchestrator import constructs, new_runs, spans
from services.orchestrator.bodies import Bodies, step_at
from services.orchestrator.constructs import CLAIMABLE, LIVE

__all__ = [
    "ENDED",
    "Moves",
    "step_error",
]

ENDED = frozenset({"succeeded", "failed", "timed_out", "skipped"})
DEFAULT_ATTEMPTS = 1


def step_error(kind: str, message: str) -> dict[str, Any]:
    """A StepError object as the journal stores it."""
    return {"class": kind, "message": message}


class Moves:
    """One transition of one run: its snapshot with the changes decided so far. The runs of its
    tree the transition moves too (a child it starts, a parent a child's end resumes) are
    `family`, shared by all of them and written with the transition (`collect`)."""

    def __init__(
        self,
        snapshot: RunSnapshot,
        body: Mapping[str, Any],
        now: int,
        *,
        bodies: Bodies | None = None,
        family: dict[str, Moves] | None = None,
        new: bool = False,
    ) -> None:
        self.body = body
        self.now = now
        self.changes = RunChanges()
        self.tree = snapshot.tree
        self.bodies = bodies
        self.new = new
        self.family = family if family is not None else {}
        self.family[snapshot.run["run_id"]] = self
        self._advancing = False
        self.run: dict[str, Any] = dict(snapshot.run)
        self.attempts: list[AttemptRow] = list(snapshot.attempts)
        # The journal by step key and attempt number: the walk asks for attempts all the time.
        self._by_key: dict[str, dict[int, AttemptRow]] = {}
        for row in self.attempts:
            self._index(row)
        self.lease = snapshot.lease
        self.wait_keys = snapshot.wait_keys
        self.waits: dict[str, WaitRow] = {w["step_key"]: w for w in snapshot.waits}
        # Whether this transition left an attempt offerable, so held claims should look again.
        self.offered = False
        self.timers: dict[tuple[str, str], TimerRow] = {
            (t["kind"], t["step_key"]): t for t in snapshot.timers
        }
        self.stored_steps = snapshot.run["steps_used"] if not new else 0
        self.stored_cost = snapshot.run["cost_usd"] if not new else 0.0

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
        """End the run `status`, keeping the terminal invariant (see the module docstring);
        its running children are cancelled and its parent's subworkflow step ends with it."""
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
        self.changes.spans.append(spans.run_span(self.run, self._parent_span_id()))
        for child in self._running_children():
            child.end_run("cancelled", error=f"its parent run ended {status}")
        parent = self.run["parent_run_id"]
        if parent is not None:
            moves = self.other(parent)
            if moves is not None and moves.status == "running":
                moves.child_ended(self.run["parent_step_key"], self)

    # The tree.

    def other(self, run_id: str) -> Moves | None:
        """The moves of another run of the tree, read under the tree's lock when first asked."""
        if run_id in self.family:
            return self.family[run_id]
        if self.tree is None or self.bodies is None:
            return None
        snapshot = self.tree.snapshot(run_id)
        if snapshot is None:
            return None
        body = self.bodies.of(snapshot.run)
        return Moves(snapshot, body, self.now, bodies=self.bodies, family=self.family)

    def root(self) -> Moves:
        """The moves of the tree's root (this run's own on a root)."""
        found = self.other(self.run["root_run_id"])
        return self if found is None else found

    def tree_totals(self) -> tuple[int, float]:
        """Steps completed and cost spent across the tree, with this transition's changes."""
        steps, cost = self.tree.totals(self.run["root_run_id"]) if self.tree else (0, 0.0)
        for moves in self.family.values():
            if moves.run["root_run_id"] == self.run["root_run_id"]:
                steps += moves.run["steps_used"] - moves.stored_steps
                cost += moves.run["cost_usd"] - moves.stored_cost
        return steps, cost

    def start_child(self, run: RunRow, body: Mapping[str, Any]) -> Moves:
        """Start a child run of this one in the same transition (its first transition too)."""
        assert self.tree is not None, "a child is started inside a stored run's transition"
        child = Moves(
            self.tree.new(run), body, self.now, bodies=self.bodies, family=self.family, new=True
        )
        new_runs.first_transition(child)
        return child

    def child_ended(self, step_key: str, child: Moves) -> None:
        """A child run ended: the subworkflow step it is the body of ends with it."""
        frame = self.latest(step_key)
        if frame is None or frame["status"] not in LIVE:
            return
        if child.status == "succeeded":
            self.update_attempt(
                frame, status="succeeded", output=child.run["output"], ended_at=self.now
            )
        else:
            message = child.run["error"] or f"child run {child.run['run_id']} ended {child.status}"
            self.update_attempt(
                frame, status="failed", error=step_error("fatal", message), ended_at=self.now
            )
        if not self._advancing:
            self.advance()

    def _parent_span_id(self) -> str | None:
        """The span a child run's own hangs under: its parent's subworkflow step."""
        parent = self.run["parent_run_id"]
        moves = None if parent is None else self.other(parent)
        frame = None if moves is None else moves.latest(self.run["parent_step_key"])
        return None if frame is None else frame["span_id"]

    def _running_children(self) -> list[Moves]:
        run_id = self.run["run_id"]
        stored = self.tree.running_children(run_id) if self.tree and not self.new else []
        found = [moves for child in stored if (moves := self.other(child)) is not None]
        found += [
            moves
            for moves in self.family.values()
            if moves.run["parent_run_id"] == run_id and moves not in found
        ]
        return [moves for moves in found if moves.status == "running"]

    def collect(self) -> RunChanges:
        """This transition's changes, with those of the runs it started and moved."""
        for run_id, moves in self.family.items():
            if moves is self:
                continue
            if moves.new:
                row = cast(RunRow, {**moves.run})
                moves.changes.run = {}
                self.changes.new_runs.append((row, moves.changes))
            else:
                self.changes.others[run_id] = moves.changes
        return self.changes

    # Attempts.

    def latest(self, step_key: str) -> AttemptRow | None:
        """The latest attempt at `step_key`, or None."""
        numbered = self._by_key.get(step_key)
        return numbered[max(numbered)] if numbered else None

    def attempt(self, step_key: str, attempt: int) -> AttemptRow | None:
        return self._by_key.get(step_key, {}).get(attempt)

    def _index(self, row: AttemptRow) -> None:
        self._by_key.setdefault(row["step_key"], {})[row["attempt"]] = row

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
            "created_at": self._next_created_at(),
            **columns,
        }
        attempt = cast(AttemptRow, row)
        self.offered |= attempt["status"] == "pending"
        self.attempts.append(attempt)
        self._index(attempt)
        self.changes.new_attempts.append(attempt)
        return attempt

    def _next_created_at(self) -> int:
        """`now`, or a nanosecond past the newest attempt of the run: attempts written in one
        transition keep the order they were written in (the journal is read in that order)."""
        newest = max((row["created_at"] for row in self.attempts), default=self.now - 1)
        return max(self.now, newest + 1)

    def update_attempt(self, row: AttemptRow, **columns: Any) -> None:
        """Set columns of an attempt already in the journal or added in this transition; an
        attempt that ends queues its span."""
        ending = row["status"] not in ENDED and columns.get("status") in ENDED
        cast(dict[str, Any], row).update(columns)
        if ending:
            construct = step_at(self.body, row["step_key"]).node["kind"]
            self.changes.spans.append(spans.attempt_span(self.run, row, construct))
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
        if self._advancing:
            return
        self._advancing = True
        try:
            constructs.advance(self)
        finally:
            self._advancing = False


def _result(row: AttemptRow) -> dict[str, Any]:
    return {"output": row["output"], "status": row["status"], "error": row["error"]}
