"""Erasing one subject's durable runs: each matched run with its whole tree, once the tree ended.

A run is matched on the `user_id` of the correlation it was started with. Whole trees, because
a subworkflow run is the body of one step of its parent: the person's data flows through both,
and removing half a tree would leave a parent whose step points at nothing. Ended trees only,
because removing a live run would corrupt the workflow it belongs to; a tree with a run still
`running` is left in place, counted, and named by its root so the operator can cancel it or let
it end and ask again.

What goes with a run: its step attempts, run events, timers and waits through their foreign
keys (ON DELETE CASCADE: one DELETE of the runs removes them in the same statement); the
events it consumed, found through the `event_id` of its `run_resumed` events, from
`parked_events` and with their `event` idempotency keys; and every idempotency key whose
target is the run (a start's key would otherwise hand a repost the id of a run that is gone).
Definitions are not personal and stay.
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import Connection, delete, select

from mcpd.storage.run_records import RunErasure
from mcpd.storage.sql.dialect import SqlDialect
from mcpd.storage.sql.schema.run import idempotency_keys, parked_events, run_events, runs
from mcpd.storage.sql.signals.reproject import chunks

TERMINAL_STATUSES = frozenset({"succeeded", "failed", "timed_out", "cancelled"})
"""RunStatus values a run never leaves. Anything else (`running`, or a status this code does
not know) counts as live, so an unknown status never gets a run erased."""

_EVENT_SCOPE = "event"


def erase_subject(
    conn: Connection, dialect: SqlDialect, project: str, user_ids: Sequence[str]
) -> RunErasure:
    """`RunStore.erase_subject` inside the caller's transaction (see the module docstring)."""
    matched = _matched_runs(conn, project, sorted(set(user_ids)))
    if not matched:
        return RunErasure()
    trees = _trees(conn, project, sorted(set(matched.values())))
    live = {
        root
        for root, statuses in trees.items()
        if any(status not in TERMINAL_STATUSES for status in statuses.values())
    }
    doomed = sorted(run_id for root, tree in trees.items() if root not in live for run_id in tree)
    _forget_consumed_events(conn, project, doomed)
    _forget_keys_of(conn, project, doomed)
    erased = _delete_runs(conn, project, doomed)
    return RunErasure(
        runs_erased=erased,
        runs_in_flight=sum(1 for root in matched.values() if root in live),
        in_flight_roots=tuple(sorted(live)),
    )


def _matched_runs(conn: Connection, project: str, user_ids: Sequence[str]) -> dict[str, str]:
    """run_id -> root_run_id of the project's runs started for one of `user_ids`."""
    found: dict[str, str] = {}
    for chunk in chunks(user_ids):
        result = conn.execute(
            select(runs.c.run_id, runs.c.root_run_id).where(
                runs.c.project == project, runs.c.user_id.in_(chunk)
            )
        )
        found.update({str(run_id): str(root) for run_id, root in result})
    return found


def _trees(conn: Connection, project: str, roots: Sequence[str]) -> dict[str, dict[str, str]]:
    """root_run_id -> {run_id: status} of every run in those trees."""
    trees: dict[str, dict[str, str]] = {root: {} for root in roots}
    for chunk in chunks(roots):
        result = conn.execute(
            select(runs.c.root_run_id, runs.c.run_id, runs.c.status).where(
                runs.c.project == project, runs.c.root_run_id.in_(chunk)
            )
        )
        for root, run_id, status in result:
            trees[str(root)][str(run_id)] = str(status)
    return trees


def _forget_consumed_events(conn: Connection, project: str, run_ids: Sequence[str]) -> None:
    """Remove the parked events the runs took, and the idempotency keys of their ids."""
    event_id = run_events.c.payload["event_id"].as_string()
    consumed: set[str] = set()
    for chunk in chunks(run_ids):
        result = conn.execute(
            select(event_id).where(
                run_events.c.run_id.in_(chunk),
                run_events.c.kind == "run_resumed",
                event_id.is_not(None),
            )
        )
        consumed.update(str(found) for (found,) in result)
    for chunk in chunks(sorted(consumed)):
        conn.execute(
            delete(parked_events).where(
                parked_events.c.project == project, parked_events.c.event_id.in_(chunk)
            )
        )
        conn.execute(
            delete(idempotency_keys).where(
                idempotency_keys.c.project == project,
                idempotency_keys.c.scope == _EVENT_SCOPE,
                idempotency_keys.c.key.in_(chunk),
            )
        )


def _forget_keys_of(conn: Connection, project: str, run_ids: Sequence[str]) -> None:
    for chunk in chunks(run_ids):
        conn.execute(
            delete(idempotency_keys).where(
                idempotency_keys.c.project == project, idempotency_keys.c.target.in_(chunk)
            )
        )


def _delete_runs(conn: Connection, project: str, run_ids: Sequence[str]) -> int:
    """Delete the runs (their journals follow by cascade); return how many went."""
    erased = 0
    for chunk in chunks(run_ids):
        result = conn.execute(
            delete(runs).where(runs.c.project == project, runs.c.run_id.in_(chunk))
        )
        erased += result.rowcount
    return erased
