"""The walk over a definition's nodes: what each construct writes when the cursor reaches it,
and when it has ended.

Every node the cursor reaches gets one attempt row at its own id (`node.id`, attempt 1): for
`task` and `agent` it is the claimable attempt itself; for every other construct it is a frame
of kind `wait`, never offered to a worker, which stays `pending` while the node runs and ends
with the node's status, output and error, so `steps.<id>` reads the same for every construct.

- `sleep` / `sleep_until`: a `sleep` timer; its firing ends the frame `succeeded`. An `until`
  that does not render to an RFC 3339 instant fails the node; one already past ends it at once.
- `parallel`: one claimable attempt per branch (`node/branch`), all offered at once.
- `foreach`: `items` rendered once, on entry, and kept as the frame's input; at most
  `concurrency` items (`node[i]`) live at a time; the output is an array in item order.
- `wait_event`: takes the oldest parked event on its (event, key) when it accepts parked ones,
  else opens a wait (and a `wait_timeout` timer with `timeout_ms`); the event's payload is the
  node's output. A key renders to text: a string as it is, anything else as compact JSON.
- `subworkflow`: a child run of the named definition (its version pinned now when the node
  names none), started in the same transaction with the node's rendered input, this run's
  correlation and trace, and this run as its parent; the node ends with the child, its output
  the child's output, failed with the child's error when the child ends otherwise.
- `loop`: one body attempt per iteration (`node[i]/body`); after each, `until` is evaluated
  with `iteration` and `steps.<body id>` set to the iteration that just ended; true, or
  `max_iterations` reached, ends the loop with that iteration's output.

A branch or item that fails after its retries fails its node: under `on_error: fail_run` the run
ends failed at once (ending it marks the live siblings failed); under `continue` the node waits
for every sibling, ends `failed`, and its output holds null where a branch or item failed.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, cast

from mcpd.runtime.clock import epoch_nanos
from mcpd.runtime.errors import InvalidArgument, quoted
from mcpd.storage.run_records import AttemptRow, RunRow
from mcpd.workflows import branch_key, holds, item_key, iteration_key, render
from services.orchestrator.bodies import step_at
from services.orchestrator.new_runs import CORRELATION, check_input, new_run_row

if TYPE_CHECKING:
    from services.orchestrator.walk import Moves

__all__ = [
    "CLAIMABLE",
    "LIVE",
    "MAX_DEPTH",
    "advance",
    "last_ended_iteration",
    "resume",
    "retry_attempt",
    "time_out_wait",
    "wait_key",
]

CLAIMABLE = frozenset({"task", "agent"})
# How deep a tree of subworkflows may grow: a definition cannot run itself, but two can run
# each other.
MAX_DEPTH = 32
# How long a wait_event without `timeout_ms` waits: the bound on every duration in a definition.
LONGEST_WAIT_MS = 3650 * 24 * 3600 * 1000
LIVE = frozenset({"pending", "leased", "started", "orphaned"})
FAILED = frozenset({"failed", "timed_out"})
_NS_PER_MS = 1_000_000


def advance(moves: Moves) -> None:
    """Walk the cursor forward as far as the journal allows."""
    steps: Sequence[Mapping[str, Any]] = moves.body["steps"]
    while moves.status == "running":
        index = moves.run["cursor_index"]
        if index >= len(steps):
            output = render(moves.body["output"], moves.scope()) if "output" in moves.body else None
            moves.end_run("succeeded", output=output)
            return
        node = steps[index]
        frame = moves.latest(node["id"])
        if frame is None:
            if "when" in node and not holds(node["when"], moves.scope()):
                moves.add_attempt(node, node["id"], 1, status="skipped", ended_at=moves.now)
                moves.event("step_skipped", {"step_key": node["id"]})
                moves.move_cursor(index + 1)
                continue
            frame = _enter(moves, node)
        if _running(moves, frame):
            _progress(moves, node, frame)
            if moves.status != "running" or _running(moves, frame):
                return
        if frame["status"] in FAILED and node.get("on_error") != "continue":
            moves.end_run("failed", error=_message(frame))
            return
        moves.move_cursor(index + 1)


def retry_attempt(moves: Moves, step_key: str, number: int) -> None:
    """Write attempt `number` of a claimable step, its input rendered for that attempt."""
    found = step_at(moves.body, step_key)
    moves.add_attempt(
        found.step,
        step_key,
        number,
        input=_child_input(moves, found.node, found.step, found.number),
    )


def _running(moves: Moves, row: AttemptRow) -> bool:
    return row["status"] in LIVE or moves.has_timer("retry", row["step_key"])


def _enter(moves: Moves, node: Mapping[str, Any]) -> AttemptRow:
    """Write what the cursor reaching `node` starts; the node's own attempt row."""
    kind, node_id = node["kind"], node["id"]
    if kind in CLAIMABLE:
        return moves.add_attempt(node, node_id, 1)
    if kind == "foreach":
        items = render(node["items"], moves.scope())
        frame = moves.add_attempt(node, node_id, 1, input=items)
        if not isinstance(items, list):
            _fail(moves, frame, f"items rendered to {quoted(items)}, not an array")
        return frame
    frame = moves.add_attempt(node, node_id, 1, input=None)
    if kind == "sleep":
        moves.set_timer("sleep", node_id, 1, moves.now + node["duration_ms"] * _NS_PER_MS)
    elif kind == "sleep_until":
        until = render(node["until"], moves.scope())
        due = _instant(until)
        if due is None:
            _fail(moves, frame, f"until rendered to {quoted(until)}, not an RFC 3339 instant")
        elif due <= moves.now:
            moves.update_attempt(frame, status="succeeded", ended_at=moves.now)
        else:
            moves.set_timer("sleep", node_id, 1, due)
    elif kind == "wait_event":
        _open_wait(moves, node)
    elif kind == "parallel":
        for branch in node["branches"]:
            key = branch_key(node_id, branch["id"])
            moves.add_attempt(branch, key, 1, input=_child_input(moves, node, branch, None))
    elif kind == "loop":
        _open_iteration(moves, node, 0)
    elif kind == "subworkflow":
        _start_child(moves, node, frame)
    return frame


def _open_wait(moves: Moves, node: Mapping[str, Any]) -> None:
    """Take a parked event when the node accepts one, else open the wait (and its timeout)."""
    node_id, event = node["id"], node["event"]
    key = wait_key(render(node.get("key", ""), moves.scope()))
    parked = None
    if moves.wait_keys is not None:
        if node.get("accept_parked", False):
            parked = moves.wait_keys.take_parked(event, key, now=moves.now)
        else:
            moves.wait_keys.hold(event, key)
    if parked is not None:
        resume(moves, node_id, parked["payload"], parked["event_id"])
        return
    timeout_ms = node.get("timeout_ms")
    expires = moves.now + (timeout_ms or LONGEST_WAIT_MS) * _NS_PER_MS
    moves.open_wait(node_id, event, key, expires)
    if timeout_ms is not None:
        moves.set_timer("wait_timeout", node_id, 1, expires)
    moves.event(
        "run_waiting",
        {"step_key": node_id, "event": event, "key": key, "expires_at": rfc3339(expires)},
    )


def resume(moves: Moves, step_key: str, payload: Any, event_id: str) -> None:
    """An event resumed the wait of `step_key`: its payload is the step's output."""
    moves.close_wait(step_key)
    frame = moves.latest(step_key)
    assert frame is not None
    moves.update_attempt(frame, status="succeeded", output=payload, ended_at=moves.now)
    moves.event("run_resumed", {"step_key": step_key, "event_id": event_id})


def time_out_wait(moves: Moves, step_key: str) -> None:
    """A wait's deadline passed with no event: `on_timeout` decides."""
    node = step_at(moves.body, step_key).node
    moves.close_wait(step_key)
    frame = moves.latest(step_key)
    assert frame is not None
    if node.get("on_timeout", "fail") == "continue":
        moves.update_attempt(frame, status="succeeded", ended_at=moves.now)
    else:
        message = f"no {node['event']} event within timeout_ms {node['timeout_ms']}"
        moves.update_attempt(
            frame,
            status="failed",
            error={"class": "fatal", "message": message},
            ended_at=moves.now,
        )


def wait_key(rendered: Any) -> str:
    """A rendered key as the text events are matched on: a string as it is, else compact JSON
    (null as the empty key)."""
    if rendered is None:
        return ""
    if isinstance(rendered, str):
        return rendered
    return json.dumps(rendered, separators=(",", ":"), sort_keys=True)


def rfc3339(ns: int) -> str:
    """Epoch nanoseconds as the RFC 3339 UTC instant the JSON codec writes."""
    moment = datetime.fromtimestamp(ns / 1e9, tz=UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def _start_child(moves: Moves, node: Mapping[str, Any], frame: AttemptRow) -> None:
    """Start the child run a subworkflow node runs, in this transition; a child that cannot
    start (its definition missing, its input refused, the tree too deep) fails the node."""
    assert moves.bodies is not None
    run = moves.run
    if run["depth"] + 1 > MAX_DEPTH:
        _fail(moves, frame, f"a run tree is at most {MAX_DEPTH} subworkflows deep")
        return
    definition = moves.bodies.definition(run["project"], node["definition_id"], node.get("version"))
    if definition is None:
        which = f" version {node['version']}" if "version" in node else ""
        _fail(moves, frame, f"definition {quoted(node['definition_id'])}{which} is not stored")
        return
    document = render(node["input"], moves.scope()) if "input" in node else None
    try:
        check_input(definition.body.get("input_schema"), document)
    except InvalidArgument as refused:
        _fail(moves, frame, refused.message)
        return
    child = new_run_row(
        definition,
        project=run["project"],
        document=document,
        correlation={name: run[name] for name in CORRELATION},
        now=moves.now,
        parent=cast(RunRow, run),
        parent_step_key=node["id"],
    )
    moves.start_child(child, definition.body)


def _progress(moves: Moves, node: Mapping[str, Any], frame: AttemptRow) -> None:
    """Move a running fan-out on from what its children have done."""
    if frame["status"] not in LIVE:
        return
    match node["kind"]:
        case "parallel":
            keys = [branch_key(node["id"], branch["id"]) for branch in node["branches"]]
            ended = _gather(moves, node, frame, keys)
            if ended is not None:
                outputs = {branch["id"]: ended[n] for n, branch in enumerate(node["branches"])}
                _settle(moves, frame, keys, outputs)
        case "foreach":
            items: list[Any] = frame["input"]
            keys = [item_key(node["id"], index) for index in range(len(items))]
            _open_items(moves, node, keys)
            ended = _gather(moves, node, frame, keys)
            if ended is not None:
                _settle(moves, frame, keys, ended)
        case "loop":
            _next_iteration(moves, node, frame)


def _gather(
    moves: Moves, node: Mapping[str, Any], frame: AttemptRow, keys: Sequence[str]
) -> list[Any] | None:
    """The children's outputs (null for a failed one) once every child has ended, else None.
    A child that failed for good under `fail_run` ends the run instead."""
    outputs: list[Any] = []
    waiting = False
    for key in keys:
        child = moves.latest(key)
        if child is None or _running(moves, child):
            waiting = True
            outputs.append(None)
            continue
        if child["status"] in FAILED and node.get("on_error") != "continue":
            moves.end_run("failed", error=_message(child))
            return None
        outputs.append(child["output"] if child["status"] == "succeeded" else None)
    return None if waiting else outputs


def _settle(moves: Moves, frame: AttemptRow, keys: Sequence[str], output: Any) -> None:
    """End a fan-out whose children have all ended: failed when one of them failed."""
    failed = [row for key in keys if (row := moves.latest(key)) and row["status"] in FAILED]
    moves.update_attempt(
        frame,
        status="failed" if failed else "succeeded",
        output=output,
        error=failed[0]["error"] if failed else None,
        ended_at=moves.now,
    )


def _open_items(moves: Moves, node: Mapping[str, Any], keys: Sequence[str]) -> None:
    """Offer the next items while fewer than `concurrency` are live."""
    live = sum(1 for key in keys if (row := moves.latest(key)) and _running(moves, row))
    opened = sum(1 for key in keys if moves.latest(key) is not None)
    while live < node.get("concurrency", 1) and opened < len(keys):
        step = node["body"]
        moves.add_attempt(step, keys[opened], 1, input=_child_input(moves, node, step, opened))
        opened += 1
        live += 1


def _open_iteration(moves: Moves, node: Mapping[str, Any], iteration: int) -> None:
    step = node["body"]
    key = iteration_key(node["id"], iteration, step["id"])
    moves.add_attempt(step, key, 1, input=_child_input(moves, node, step, iteration))


def _next_iteration(moves: Moves, node: Mapping[str, Any], frame: AttemptRow) -> None:
    """After an iteration ends: the next one, or the loop's end."""
    iteration, row = _last_iteration(moves, node)
    if row is None or _running(moves, row):
        return
    if row["status"] in FAILED:
        if node.get("on_error") != "continue":
            moves.end_run("failed", error=_message(row))
        else:
            moves.update_attempt(frame, status="failed", error=row["error"], ended_at=moves.now)
        return
    scope = {**moves.scope(), "iteration": iteration}
    if iteration + 1 >= node["max_iterations"] or holds(node["until"], scope):
        moves.update_attempt(frame, status="succeeded", output=row["output"], ended_at=moves.now)
        return
    _open_iteration(moves, node, iteration + 1)


def _last_iteration(moves: Moves, node: Mapping[str, Any]) -> tuple[int, AttemptRow | None]:
    """The latest iteration of a loop that has one, and its latest attempt."""
    body_id = node["body"]["id"]
    iteration, row = -1, None
    while (found := moves.latest(iteration_key(node["id"], iteration + 1, body_id))) is not None:
        iteration, row = iteration + 1, found
    return iteration, row


def _child_input(
    moves: Moves, node: Mapping[str, Any], step: Mapping[str, Any], number: int | None
) -> Any:
    """A claimable step's input for one attempt: rendered with `item` and `index` in a foreach
    body, `iteration` in a loop body; the run's input when the step declares none."""
    if "input" not in step:
        return moves.run["input"]
    scope = moves.scope()
    if node["kind"] == "foreach" and number is not None:
        frame = moves.latest(node["id"])
        items = frame["input"] if frame is not None else []
        scope = {**scope, "item": items[number], "index": number}
    elif node["kind"] == "loop" and number is not None:
        scope = {**scope, "iteration": number}
    return render(step["input"], scope)


def last_ended_iteration(moves: Moves, node: Mapping[str, Any]) -> AttemptRow | None:
    """`steps.<body id>` inside a loop: the latest attempt of the latest ended iteration."""
    iteration, row = _last_iteration(moves, node)
    while row is not None and _running(moves, row):
        iteration -= 1
        key = iteration_key(node["id"], iteration, node["body"]["id"])
        row = moves.latest(key) if iteration >= 0 else None
    return row


def _fail(moves: Moves, frame: AttemptRow, message: str) -> None:
    moves.update_attempt(
        frame,
        status="failed",
        error={"class": "invalid_input", "message": message},
        ended_at=moves.now,
    )


def _instant(value: Any) -> int | None:
    """Epoch nanoseconds of an RFC 3339 instant with its offset, else None."""
    if not isinstance(value, str):
        return None
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    if moment.tzinfo is None:
        return None
    return epoch_nanos(moment)


def _message(row: AttemptRow) -> str:
    """The run's error when a step ended it: the step's own message (spec, OnError)."""
    error = row["error"] or {}
    return str(error.get("message") or f"step {row['step_key']} {row['status']}")
