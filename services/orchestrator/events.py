"""Published events and signals: routing an event to the run waiting for it, or parking it.

An event goes to the open wait on its (event, key) that expires soonest, in a transition of
that run which closes the wait, makes the payload the step's output and walks the run on. With
no run waiting it is parked for 24 hours, for the next wait on that (event, key) that accepts
parked events; parking is serialised with every wait opened on the same (event, key), so an
event and a wait arriving at the same moment always meet.

Ids: a supplied `event_id` seen in the last 24 hours answers `duplicate` and writes nothing,
whether or not a run waits. Without one the daemon derives the id, the lowercase hex SHA-256 of
the canonical JSON of `[project, event, key, payload]`; a derived id is a duplicate only of an
event still parked, because two identical approvals for two runs waiting on one key are two
events.

A signal names a run instead of a key: the run's open wait on the event gives the key, and the
event is routed as a published one (so it reaches the matching wait that expires soonest).
"""

from __future__ import annotations

import hashlib
import json
from functools import partial
from typing import Any

from mcpd.model.v1 import enums_pb2, runs_pb2
from mcpd.orchestrator.v1 import orchestrator_service_pb2 as rpc
from mcpd.runtime.errors import (
    AlreadyExists,
    Conflict,
    InvalidArgument,
    NotFound,
    Unavailable,
    quoted,
)
from mcpd.signals.messages import python_of
from mcpd.storage.interfaces import RunEvents, RunReads
from mcpd.storage.run_records import ParkedEventRow
from services.orchestrator.constructs import resume
from services.orchestrator.mover import Mover
from services.orchestrator.walk import Moves

__all__ = ["PARK_TTL_NS", "Events", "derived_event_id"]

PARK_TTL_NS = 24 * 3600 * 1_000_000_000
# Rounds of routing before giving up: each lost round means a wait closed or opened meanwhile.
ROUNDS = 8
_OUTCOMES = {
    "delivered": enums_pb2.EVENT_OUTCOME_DELIVERED,
    "parked": enums_pb2.EVENT_OUTCOME_PARKED,
    "duplicate": enums_pb2.EVENT_OUTCOME_DUPLICATE,
}


class Events:
    """Publishing events and signalling runs."""

    def __init__(self, store: RunEvents, reads: RunReads, mover: Mover) -> None:
        self._store = store
        self._reads = reads
        self._mover = mover

    def publish(self, request: runs_pb2.PublishEventRequest) -> runs_pb2.EventReceipt:
        """Deliver the event to the run waiting for it, or park it (see the module docstring)."""
        if not request.event:
            raise InvalidArgument("event is required", field="event")
        payload = python_of(request.payload) if request.HasField("payload") else None
        supplied = request.event_id if request.HasField("event_id") else None
        return self._route(request.project, request.event, request.key, payload, supplied)

    def signal(self, request: rpc.SignalRunRequest) -> runs_pb2.EventReceipt:
        """Route an event to the key of the run's open wait on it; 409 when it holds none."""
        signal = request.signal
        if not signal.event:
            raise InvalidArgument("signal.event is required", field="signal.event")
        detail = self._reads.run_detail(request.project, request.run_id)
        if detail is None:
            raise NotFound(f"run {quoted(request.run_id)} does not exist", field="run_id")
        wait = next((w for w in detail.waits if w["event"] == signal.event), None)
        if wait is None:
            raise Conflict(
                f"run {quoted(request.run_id)} holds no open wait on event {quoted(signal.event)}",
                field="signal.event",
                reason="NO_OPEN_WAIT",
            )
        payload = python_of(signal.payload) if signal.HasField("payload") else None
        supplied = signal.event_id if signal.HasField("event_id") else None
        return self._route(request.project, signal.event, wait["key"], payload, supplied)

    def _route(
        self, project: str, event: str, key: str, payload: Any, supplied: str | None
    ) -> runs_pb2.EventReceipt:
        event_id = (
            supplied if supplied is not None else derived_event_id(project, event, key, payload)
        )
        for _ in range(ROUNDS):
            for run_id, step_key in self._store.waiting(project, event, key):
                deliver = partial(
                    _deliver,
                    step_key=step_key,
                    event=event,
                    key=key,
                    payload=payload,
                    event_id=event_id,
                    supplied=supplied is not None,
                )
                try:
                    delivered = self._mover.move(project, run_id, deliver)
                except AlreadyExists:
                    return _receipt("duplicate", event_id)
                if delivered:
                    return _receipt("delivered", event_id)
            now = self._mover.now()
            parked: ParkedEventRow = {
                "event_id": event_id,
                "event": event,
                "key": key,
                "payload": payload,
                "parked_at": now,
                "expires_at": now + PARK_TTL_NS,
            }
            outcome = self._store.park_event(
                project, parked, supplied=supplied is not None, now=now
            )
            if outcome != "waiting":
                return _receipt(outcome, event_id)
        raise Unavailable("the waits on this event kept changing; publish it again")


def _deliver(
    moves: Moves,
    *,
    step_key: str,
    event: str,
    key: str,
    payload: Any,
    event_id: str,
    supplied: bool,
) -> bool:
    """Resume the run's wait with the event, when it is still open for it."""
    wait = moves.waits.get(step_key)
    if moves.status != "running" or wait is None or (wait["event"], wait["key"]) != (event, key):
        return False
    if supplied:
        moves.changes.event_ids.append((event_id, moves.run["run_id"]))
    resume(moves, step_key, payload, event_id)
    moves.advance()
    return True


def derived_event_id(project: str, event: str, key: str, payload: Any) -> str:
    """The id of an event published without one (see the module docstring)."""
    canonical = json.dumps(
        [project, event, key, payload], sort_keys=True, separators=(",", ":"), ensure_ascii=False
    )
    return hashlib.sha256(canonical.encode()).hexdigest()


def _receipt(outcome: str, event_id: str) -> runs_pb2.EventReceipt:
    return runs_pb2.EventReceipt(outcome=_OUTCOMES[outcome], event_id=event_id)
