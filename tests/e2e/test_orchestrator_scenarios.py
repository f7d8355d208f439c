"""Orchestrator scenarios end to end: a real `mcpd serve` on SQLite and on PostgreSQL, real worker
processes (tests/e2e/scenario_worker.py, the SDK's `Worker`) running every step body, and the
test driving the runs over REST and over gRPC alike (the `driver` fixture: one interface, both
transports, answers compared in the spec's JSON).

What it proves, each through both transports on both backends:

- every construct walks to the right end with the worker doing the step work: task and agent,
  a `when` guard that is false (skipped), the state merged shallowly, the output template;
  `sleep` and `sleep_until`; `wait_event` resumed by a published event, by a signal, by an event
  parked before the run with `accept_parked`, and timed out under `on_timeout` continue and
  fail, with every event outcome (`delivered`, `parked`, `duplicate` of a supplied id and of a
  derived one while parked) and a signal with no open wait refused; `parallel`; `foreach`
  within its concurrency; `loop` ending by `until` and by `max_iterations`; `subworkflow` two
  levels deep (parent, root and depth on the children, the output flowing back);
- retries after their exponential backoff ending succeeded, retries exhausted ending failed,
  `on_error: continue`;
- the `max_steps` and `max_cost_usd` ceilings of a root bounding its whole tree (cost priced
  from the shipped price book);
- one run for one idempotency key started by many threads at once;
- a cancel reaching a running child, and a cancelled child failing its parent, while a worker
  is in the child's body (the worker's late report is refused `RUN_TERMINAL`);
- a cause chain naming the silent producers of a step the worker failed;
- gapless, duplicate-free event logs over many runs completed concurrently by two workers;
- a run timeout and a step timeout while a worker's body outlives them (the step timeout's late
  report is refused `FENCED`);
- every timer kind fires: `sleep`, `retry`, `step_timeout`, `wait_timeout`, `run_timeout` above,
  and `lease_expiry` and `reclaim` in the last test.

A worker process heartbeats its leases and never reports twice, so it cannot lapse a lease on
purpose, post a second complete or skip `started`: the last test holds leases with in-test
lease calls (in project `beta`, where no worker process claims) to lapse one into its reclaim
window and restore it with a heartbeat, to see a second complete answered `ALREADY_APPLIED`,
and to let the other window close, after which its old lease is `FENCED` (that test makes its
calls over REST and gRPC both, so it is not parametrised over the driver). `NOT_STARTED` is
covered by tests/e2e/test_leases.py (over REST and gRPC) with in-test lease calls too.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import threading
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Protocol, cast

import grpc
import httpx
import pytest

from gateway.rest.errors import http_status
from mcpd import codec
from mcpd.model.v1 import enums_pb2, runs_pb2
from mcpd.orchestrator.v1 import orchestrator_service_pb2 as rpc
from mcpd.orchestrator.v1.orchestrator_service_pb2_grpc import OrchestratorServiceStub
from mcpd.runtime.errors import McpdError
from mcpd.runtime.errors_grpc import rpc_failure_from
from mcpd.sdk import Client
from mcpd.testing.daemon import DaemonProcess
from mcpd.testing.eventually import eventually
from tests.e2e.conftest import ORCHESTRATOR_LEASE_TTL_MS
from tests.e2e.scenario_worker import DEFINITIONS
from tests.e2e.security_fixture import bearer, bearer_metadata, key_secret

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[2]
WORKERS = 2
ENDED = 20.0  # seconds a run may take to end before a test fails
LEASE_S = ORCHESTRATOR_LEASE_TTL_MS / 1000


# The driver: the calls a test makes, over REST or gRPC, answered in the spec's JSON.


class Refused(Exception):  # noqa: N818  # a daemon's refusal, as either transport reports it
    """A refused call: its HTTP status (the gRPC code's for gRPC), reason and field."""

    def __init__(self, status: int, reason: str, field: str | None, message: str) -> None:
        super().__init__(f"{status} {reason} {field}: {message}")
        self.status, self.reason, self.field, self.message = status, reason, field, message


class Driver(Protocol):
    transport: str

    def start(
        self, definition_id: str, run_input: Any = None, *, idempotency_key: str | None = None
    ) -> dict[str, Any]: ...

    def get(self, run_id: str) -> dict[str, Any]: ...

    def events(self, run_id: str, *, after: int | None, limit: int) -> dict[str, Any]: ...

    def cancel(self, run_id: str) -> dict[str, Any]: ...

    def publish(
        self, event: str, key: str, payload: Any = None, *, event_id: str | None = None
    ) -> dict[str, Any]: ...

    def signal(
        self, run_id: str, event: str, payload: Any = None, *, event_id: str | None = None
    ) -> dict[str, Any]: ...

    def cause(self, run_id: str, step_key: str) -> dict[str, Any]: ...

    def runs(self, definition_id: str, cursor: str | None) -> dict[str, Any]: ...


class RestDriver:
    """The calls over REST (`/v1/api`), with alpha's `execute` and `read` keys."""

    transport = "rest"

    def __init__(self, daemon: DaemonProcess) -> None:
        self.http = httpx.Client(base_url=f"{daemon.http_url}/v1/api", timeout=20)

    def close(self) -> None:
        self.http.close()

    def _call(
        self, verb: str, path: str, scope: str, body: Any = None, **params: Any
    ) -> dict[str, Any]:
        query = {name: value for name, value in params.items() if value is not None}
        answer = self.http.request(
            verb, path, json=body, params=query, headers=bearer("alpha", scope)
        )
        if answer.status_code != 200:
            error = answer.json()["error"]
            raise Refused(answer.status_code, error["reason"], error.get("field"), error["message"])
        return cast(dict[str, Any], answer.json())

    def start(
        self, definition_id: str, run_input: Any = None, *, idempotency_key: str | None = None
    ) -> dict[str, Any]:
        body: dict[str, Any] = {"definition_id": definition_id}
        if run_input is not None:
            body["input"] = run_input
        if idempotency_key is not None:
            body["idempotency_key"] = idempotency_key
        return self._call("POST", "/runs", "execute", body)

    def get(self, run_id: str) -> dict[str, Any]:
        return self._call("GET", f"/runs/{run_id}", "read")

    def events(self, run_id: str, *, after: int | None, limit: int) -> dict[str, Any]:
        return self._call("GET", f"/runs/{run_id}/events", "read", after=after, limit=limit)

    def cancel(self, run_id: str) -> dict[str, Any]:
        return self._call("POST", f"/runs/{run_id}/cancel", "execute")

    def publish(
        self, event: str, key: str, payload: Any = None, *, event_id: str | None = None
    ) -> dict[str, Any]:
        body = _without_none({"event": event, "key": key, "payload": payload, "event_id": event_id})
        return self._call("POST", "/events", "execute", body)

    def signal(
        self, run_id: str, event: str, payload: Any = None, *, event_id: str | None = None
    ) -> dict[str, Any]:
        body = _without_none({"event": event, "payload": payload, "event_id": event_id})
        return self._call("POST", f"/runs/{run_id}/signal", "execute", body)

    def cause(self, run_id: str, step_key: str) -> dict[str, Any]:
        return self._call("GET", f"/runs/{run_id}/steps/{step_key}/cause", "read")

    def runs(self, definition_id: str, cursor: str | None) -> dict[str, Any]:
        return self._call(
            "GET", "/runs", "read", definition_id=definition_id, limit=100, cursor=cursor
        )


class GrpcDriver:
    """The calls over gRPC with the SDK's Client, answers encoded as the gateway encodes them."""

    transport = "grpc"

    def __init__(self, daemon: DaemonProcess) -> None:
        self.executor = Client(daemon.grpc_addr, api_key=key_secret("alpha", "execute"))
        self.reader = Client(daemon.grpc_addr, api_key=key_secret("alpha", "read"))

    def close(self) -> None:
        self.executor.close()
        self.reader.close()

    @staticmethod
    def _json(call: Callable[[], Any]) -> dict[str, Any]:
        try:
            return codec.encode(call())
        except McpdError as error:
            raise Refused(
                http_status(error.code), error.reason, error.field, error.message
            ) from None

    def start(
        self, definition_id: str, run_input: Any = None, *, idempotency_key: str | None = None
    ) -> dict[str, Any]:
        return self._json(
            lambda: self.executor.start(definition_id, run_input, idempotency_key=idempotency_key)
        )

    def get(self, run_id: str) -> dict[str, Any]:
        return self._json(lambda: self.reader.get(run_id))

    def events(self, run_id: str, *, after: int | None, limit: int) -> dict[str, Any]:
        request = rpc.ListRunEventsRequest(run_id=run_id, limit=limit)
        if after is not None:
            request.after = after
        return self._json(lambda: self.reader.call("ListRunEvents", request))

    def cancel(self, run_id: str) -> dict[str, Any]:
        return self._json(lambda: self.executor.cancel(run_id))

    def publish(
        self, event: str, key: str, payload: Any = None, *, event_id: str | None = None
    ) -> dict[str, Any]:
        return self._json(lambda: self.executor.publish(event, key, payload, event_id=event_id))

    def signal(
        self, run_id: str, event: str, payload: Any = None, *, event_id: str | None = None
    ) -> dict[str, Any]:
        return self._json(lambda: self.executor.signal(run_id, event, payload, event_id=event_id))

    def cause(self, run_id: str, step_key: str) -> dict[str, Any]:
        request = rpc.GetStepCauseRequest(run_id=run_id, step_key=step_key)
        return self._json(lambda: self.reader.call("GetStepCause", request))

    def runs(self, definition_id: str, cursor: str | None) -> dict[str, Any]:
        request = rpc.ListRunsRequest(definition_id=definition_id, limit=100)
        if cursor is not None:
            request.cursor = cursor
        return self._json(lambda: self.reader.call("ListRuns", request))


def _without_none(body: dict[str, Any]) -> dict[str, Any]:
    return {name: value for name, value in body.items() if value is not None}


# What the worker processes recorded, and the daemon with them.


@dataclass
class Scenario:
    daemon: DaemonProcess
    log: Path
    workers: list[subprocess.Popen[bytes]]
    ghost: Future[None]

    def records(self) -> list[dict[str, Any]]:
        """Every line the workers have written whole (one still being written is left out)."""
        text = self.log.read_text() if self.log.exists() else ""
        return [json.loads(line) for line in text.split("\n")[:-1]]

    def bodies(self, run_id: str) -> list[tuple[str, int]]:
        """(step key, attempt) of every body a worker ran for the run, in the order run."""
        return [
            (r["step_key"], r["attempt"])
            for r in self.records()
            if r["what"] == "body" and r["run_id"] == run_id
        ]

    def report(self, lease_id: str) -> dict[str, Any]:
        """The last report a worker posted for the lease (once it has)."""
        reports = [r for r in self.records() if r["what"] == "report" and r["lease_id"] == lease_id]
        assert reports, f"no report for lease {lease_id} yet"
        return reports[-1]

    def lease_of(self, run_id: str, step_key: str, attempt: int) -> str:
        """The lease a worker ran the attempt's body under (once it has)."""
        found = [
            r["lease_id"]
            for r in self.records()
            if r["what"] == "body"
            and (r["run_id"], r["step_key"], r["attempt"]) == (run_id, step_key, attempt)
        ]
        assert len(found) == 1, f"{step_key} attempt {attempt} of {run_id} ran {len(found)} times"
        return str(found[0])


@pytest.fixture(scope="module")
def scenario(
    orchestrator_daemon: DaemonProcess, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Scenario]:
    """The daemon with DEFINITIONS stored in alpha and WORKERS worker processes serving them,
    claiming by the time a first run has been served; the ghost's leases of the last test are
    taken first, so that their lease lengths pass while the other tests run."""
    daemon = orchestrator_daemon
    with httpx.Client(base_url=f"{daemon.http_url}/v1/api", timeout=20) as http:
        ghost = _haunt(daemon, http)
        documents = [{"id": name, "body": body} for name, body in sorted(DEFINITIONS.items())]
        registered = http.post(
            "/workers/register",
            json={"worker_id": "setup", "definitions": documents},
            headers=bearer("alpha", "worker"),
        )
        assert registered.status_code == 200, registered.text
        assert registered.json()["lease_ttl_ms"] == ORCHESTRATOR_LEASE_TTL_MS
        assert registered.json()["registered"] == [
            {"id": name, "version": 1, "assigned": True} for name in sorted(DEFINITIONS)
        ]
    log = tmp_path_factory.mktemp("scenarios") / "worker.log"
    workers = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tests.e2e.scenario_worker",
                daemon.grpc_addr,
                key_secret("alpha", "worker"),
                str(log),
                f"scenario-{n}",
            ],
            cwd=REPO,
        )
        for n in range(WORKERS)
    ]
    try:
        rest = RestDriver(daemon)
        try:
            # The workers register the same bodies (versions unchanged), then claim.
            ping = rest.start("once", "ping")["run_id"]
            assert finished(rest, ping, timeout=60)["run"]["output"] == "ping"
        finally:
            rest.close()
        yield Scenario(daemon, log, workers, ghost)
    finally:
        for worker in workers:
            worker.kill()
            worker.wait()


@pytest.fixture(params=["rest", "grpc"])
def driver(request: pytest.FixtureRequest, scenario: Scenario) -> Iterator[Driver]:
    made: RestDriver | GrpcDriver = (
        RestDriver(scenario.daemon) if request.param == "rest" else GrpcDriver(scenario.daemon)
    )
    try:
        yield made
    finally:
        made.close()


# Helpers over a driver.


def finished(driver: Driver, run_id: str, *, timeout: float = ENDED) -> dict[str, Any]:
    """The run's detail once it has ended."""

    def ended() -> dict[str, Any]:
        detail = driver.get(run_id)
        assert detail["run"]["status"] != "running", detail["run"]
        return detail

    return eventually(ended, timeout=timeout, interval=0.05)


def log_of(driver: Driver, run_id: str, *, page: int = 100) -> list[dict[str, Any]]:
    """The run's whole event log, read `page` at a time after the last seq read; checked to run
    from 0 without a gap or a repeat."""
    events: list[dict[str, Any]] = []
    after: int | None = None
    while True:
        answer = driver.events(run_id, after=after, limit=page)
        events += answer["events"]
        if not answer["has_more"]:
            break
        after = events[-1]["seq"]
    assert [event["seq"] for event in events] == list(range(len(events)))
    assert {event["run_id"] for event in events} == {run_id}
    return events


def kinds(events: list[dict[str, Any]]) -> list[str]:
    return [event["kind"] for event in events]


def journal(events: list[dict[str, Any]]) -> list[tuple[str, dict[str, Any]]]:
    """(kind, payload) of every event, without the worker that leased a step and the instant
    a wait expires."""
    volatile = {"worker_id", "expires_at"}
    return [
        (e["kind"], {k: v for k, v in e.get("payload", {}).items() if k not in volatile})
        for e in events
    ]


def attempts(detail: dict[str, Any]) -> list[tuple[str, int, str, str]]:
    """(step key, attempt, kind, status) of every attempt, in the order written."""
    return [(a["step_key"], a["attempt"], a["kind"], a["status"]) for a in detail["attempts"]]


def all_runs(driver: Driver, definition_id: str) -> list[dict[str, Any]]:
    """Every run of the definition, newest first."""
    found: list[dict[str, Any]] = []
    cursor = None
    while True:
        page = driver.runs(definition_id, cursor)
        found += page["runs"]
        if not page["page"]["has_more"]:
            return found
        cursor = page["page"]["next_cursor"]


def children(driver: Driver, run_id: str, definition_id: str) -> list[dict[str, Any]]:
    """The runs of `definition_id` started by the run."""
    return [run for run in all_runs(driver, definition_id) if run.get("parent_run_id") == run_id]


def only_child(driver: Driver, run_id: str, definition_id: str) -> dict[str, Any]:
    def one() -> dict[str, Any]:
        found = children(driver, run_id, definition_id)
        assert len(found) == 1, found
        return found[0]

    return eventually(one, timeout=5)


def instant(text: str) -> datetime:
    return datetime.fromisoformat(text)


def at_of(events: list[dict[str, Any]], kind: str, **payload: Any) -> datetime:
    """When the one event of `kind` whose payload holds `payload` was written."""
    (found,) = [
        e
        for e in events
        if e["kind"] == kind and all(e["payload"].get(k) == v for k, v in payload.items())
    ]
    return instant(found["at"])


def derived_id(event: str, key: str, payload: Any) -> str:
    """The id of an event published in alpha without one (docs/orchestrator.md)."""
    canonical = json.dumps(["alpha", event, key, payload], sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


# 1. Every construct, with the worker processes doing the step work.


def test_tasks_agents_guards_state_and_the_output_template(
    driver: Driver, scenario: Scenario
) -> None:
    refund = driver.start("triage", {"kind": "refund", "urgent": False})
    other = driver.start("triage", {"kind": "question", "urgent": True})
    assert (refund["definition_version"], refund["status"]) == (1, "running")

    done = finished(driver, refund["run_id"])
    run = done["run"]
    assert run["status"] == "succeeded"
    assert run["output"] == {
        "kind": "refund",
        "reply": "reply to refund: refund",
        "escalate": "skipped",
    }
    # Merged shallowly: reply's `seen` replaced classify's whole object.
    assert run["state"] == {"seen": {"by": "reply"}, "kind": "refund", "replied": True}
    assert run["steps_used"] == 2
    assert attempts(done) == [
        ("classify", 1, "task", "succeeded"),
        ("reply", 1, "agent", "succeeded"),
        ("escalate", 1, "task", "skipped"),
    ]
    assert (done["timers"], done["waits"]) == ([], [])
    events = log_of(driver, refund["run_id"])
    assert journal(events) == [
        ("run_started", {"definition_id": "triage", "definition_version": 1}),
        ("run_cursor", {"index": 0, "construct": "task", "step_key": "classify"}),
        ("step_leased", {"step_key": "classify", "attempt": 1}),
        ("step_finished", {"step_key": "classify", "attempt": 1}),
        ("run_cursor", {"index": 1, "construct": "agent", "step_key": "reply"}),
        ("step_leased", {"step_key": "reply", "attempt": 1}),
        ("step_finished", {"step_key": "reply", "attempt": 1}),
        ("run_cursor", {"index": 2, "construct": "task", "step_key": "escalate"}),
        ("step_skipped", {"step_key": "escalate"}),
        ("run_cursor", {"index": 3, "construct": "end"}),
        ("run_ended", {"status": "succeeded"}),
    ]
    leased_by = {
        e["payload"]["step_key"]: e["payload"]["worker_id"]
        for e in events
        if e["kind"] == "step_leased"
    }
    assert set(leased_by) == {"classify", "reply"}
    assert set(leased_by.values()) <= {f"scenario-{n}" for n in range(WORKERS)}
    # The worker ran exactly the bodies of the steps that were not skipped, once each.
    assert scenario.bodies(refund["run_id"]) == [("classify", 1), ("reply", 1)]

    skipped = finished(driver, other["run_id"])
    assert skipped["run"]["status"] == "succeeded"
    assert skipped["run"]["output"] == {"kind": "question", "reply": None, "escalate": "succeeded"}
    assert [(key, status) for key, _, _, status in attempts(skipped)] == [
        ("classify", "succeeded"),
        ("reply", "skipped"),
        ("escalate", "succeeded"),
    ]
    assert scenario.bodies(other["run_id"]) == [("classify", 1), ("escalate", 1)]


def test_sleep_and_sleep_until_hold_the_run_until_their_timers_fire(
    driver: Driver, scenario: Scenario
) -> None:
    soon = datetime.now(UTC) + timedelta(milliseconds=400)
    at = soon.replace(microsecond=soon.microsecond // 1000 * 1000)
    at_text = at.isoformat(timespec="milliseconds").replace("+00:00", "Z")
    run = driver.start("naps", {"at": at_text})
    done = finished(driver, run["run_id"])
    assert done["run"]["status"] == "succeeded"
    assert done["run"]["output"] == "awake"
    assert attempts(done) == [
        ("nap", 1, "wait", "succeeded"),
        ("alarm", 1, "wait", "succeeded"),
        ("woke", 1, "task", "succeeded"),
    ]
    events = log_of(driver, run["run_id"])
    assert journal(events) == [
        ("run_started", {"definition_id": "naps", "definition_version": 1}),
        ("run_cursor", {"index": 0, "construct": "sleep", "step_key": "nap"}),
        ("run_cursor", {"index": 1, "construct": "sleep_until", "step_key": "alarm"}),
        ("run_cursor", {"index": 2, "construct": "task", "step_key": "woke"}),
        ("step_leased", {"step_key": "woke", "attempt": 1}),
        ("step_finished", {"step_key": "woke", "attempt": 1}),
        ("run_cursor", {"index": 3, "construct": "end"}),
        ("run_ended", {"status": "succeeded"}),
    ]
    # The cursor left the nap when its timer fired, 150 ms on (times are kept to the
    # millisecond: at least 149 once both are cut), and the alarm at its instant.
    napped = at_of(events, "run_cursor", step_key="alarm") - at_of(
        events, "run_cursor", step_key="nap"
    )
    assert napped >= timedelta(milliseconds=149)
    assert at_of(events, "run_cursor", step_key="woke") >= at
    assert scenario.bodies(run["run_id"]) == [("woke", 1)]


def test_a_published_event_resumes_the_waiting_run(driver: Driver, scenario: Scenario) -> None:
    order = unique("order")
    run = driver.start("approval", {"order": order})
    # The wait opened in the start's own transaction.
    waits = driver.get(run["run_id"])["waits"]
    assert [(w["step_key"], w["event"], w["key"]) for w in waits] == [
        ("approve", "approved", order)
    ]
    event_id = unique("approval")
    receipt = driver.publish("approved", order, {"by": "ana"}, event_id=event_id)
    assert receipt == {"outcome": "delivered", "event_id": event_id}
    again = driver.publish("approved", order, {"by": "bob"}, event_id=event_id)
    assert again == {"outcome": "duplicate", "event_id": event_id}

    done = finished(driver, run["run_id"])
    assert done["run"]["status"] == "succeeded"
    assert done["run"]["output"] == {"shipped": {"by": "ana"}}
    assert attempts(done) == [
        ("approve", 1, "wait", "succeeded"),
        ("ship", 1, "task", "succeeded"),
    ]
    assert done["attempts"][0]["output"] == {"by": "ana"}
    assert done["waits"] == []
    assert journal(log_of(driver, run["run_id"])) == [
        ("run_started", {"definition_id": "approval", "definition_version": 1}),
        ("run_cursor", {"index": 0, "construct": "wait_event", "step_key": "approve"}),
        ("run_waiting", {"step_key": "approve", "event": "approved", "key": order}),
        ("run_resumed", {"step_key": "approve", "event_id": event_id}),
        ("run_cursor", {"index": 1, "construct": "task", "step_key": "ship"}),
        ("step_leased", {"step_key": "ship", "attempt": 1}),
        ("step_finished", {"step_key": "ship", "attempt": 1}),
        ("run_cursor", {"index": 2, "construct": "end"}),
        ("run_ended", {"status": "succeeded"}),
    ]
    assert scenario.bodies(run["run_id"]) == [("ship", 1)]


def test_a_signal_resumes_the_run_by_its_own_wait(driver: Driver, scenario: Scenario) -> None:
    order = unique("order")
    run = driver.start("approval", {"order": order})
    receipt = driver.signal(run["run_id"], "approved", "by signal")
    # Routed as an event published on the key of the run's wait.
    assert receipt == {
        "outcome": "delivered",
        "event_id": derived_id("approved", order, "by signal"),
    }

    done = finished(driver, run["run_id"])
    assert done["run"]["status"] == "succeeded"
    assert done["run"]["output"] == {"shipped": "by signal"}
    with pytest.raises(Refused) as caught:
        driver.signal(run["run_id"], "approved", "too late")
    assert (caught.value.status, caught.value.reason, caught.value.field) == (
        409,
        "NO_OPEN_WAIT",
        "signal.event",
    )
    assert scenario.bodies(run["run_id"]) == [("ship", 1)]


def test_an_event_parked_before_the_run_is_taken_by_a_wait_that_accepts_it(
    driver: Driver, scenario: Scenario
) -> None:
    order = unique("order")
    payload = {"early": True}
    parked = driver.publish("approved", order, payload)
    # Without an id of its own the event's id is the hash of what it says.
    derived = derived_id("approved", order, payload)
    assert parked == {"outcome": "parked", "event_id": derived}
    assert driver.publish("approved", order, payload) == {
        "outcome": "duplicate",
        "event_id": derived,
    }

    run = driver.start("approval", {"order": order})
    done = finished(driver, run["run_id"])
    assert done["run"]["status"] == "succeeded"
    assert done["run"]["output"] == {"shipped": {"early": True}}
    assert attempts(done)[0] == ("approve", 1, "wait", "succeeded")
    # Taken when the cursor reached the wait, which never opened.
    assert journal(log_of(driver, run["run_id"])) == [
        ("run_started", {"definition_id": "approval", "definition_version": 1}),
        ("run_cursor", {"index": 0, "construct": "wait_event", "step_key": "approve"}),
        ("run_resumed", {"step_key": "approve", "event_id": derived}),
        ("run_cursor", {"index": 1, "construct": "task", "step_key": "ship"}),
        ("step_leased", {"step_key": "ship", "attempt": 1}),
        ("step_finished", {"step_key": "ship", "attempt": 1}),
        ("run_cursor", {"index": 2, "construct": "end"}),
        ("run_ended", {"status": "succeeded"}),
    ]
    # Taken: no longer parked, so the same words are an event of their own again.
    assert driver.publish("approved", order, payload)["outcome"] == "parked"


def test_a_wait_that_times_out_continues_or_fails_by_its_on_timeout(
    driver: Driver, scenario: Scenario
) -> None:
    patient = driver.start("patience", {"order": unique("order")})
    strict = driver.start("impatience", {"order": unique("order")})

    kept_on = finished(driver, patient["run_id"])
    assert kept_on["run"]["status"] == "succeeded"
    assert kept_on["run"]["output"] == {"status": "succeeded", "answer": None}
    assert attempts(kept_on) == [
        ("answer", 1, "wait", "succeeded"),
        ("after", 1, "task", "succeeded"),
    ]
    assert scenario.bodies(patient["run_id"]) == [("after", 1)]

    failed = finished(driver, strict["run_id"])
    assert failed["run"]["status"] == "failed"
    assert failed["run"]["error"] == "no answered event within timeout_ms 100"
    assert attempts(failed) == [("demand", 1, "wait", "failed")]
    assert (failed["timers"], failed["waits"]) == ([], [])
    assert scenario.bodies(strict["run_id"]) == []


def test_parallel_then_foreach_within_its_concurrency(driver: Driver, scenario: Scenario) -> None:
    run = driver.start("fanout")
    done = finished(driver, run["run_id"])
    assert done["run"]["status"] == "succeeded"
    assert done["run"]["output"] == {
        "fan": {"left": "L", "right": ["x", "y", "z"]},
        "each": [
            {"item": "x", "index": 0},
            {"item": "y", "index": 1},
            {"item": "z", "index": 2},
        ],
    }
    assert sorted(attempts(done)) == [
        ("each", 1, "wait", "succeeded"),
        ("each[0]", 1, "task", "succeeded"),
        ("each[1]", 1, "task", "succeeded"),
        ("each[2]", 1, "task", "succeeded"),
        ("fan", 1, "wait", "succeeded"),
        ("fan/left", 1, "task", "succeeded"),
        ("fan/right", 1, "agent", "succeeded"),
    ]
    # Never more than two items held at once, and the third only after one of them ended.
    live, most = 0, 0
    for event in log_of(driver, run["run_id"], page=4):
        key = event.get("payload", {}).get("step_key", "")
        if key.startswith("each["):
            live += {"step_leased": 1, "step_finished": -1}.get(event["kind"], 0)
            most = max(most, live)
    assert (live, most) == (0, 2)
    assert sorted(scenario.bodies(run["run_id"])) == [
        ("each[0]", 1),
        ("each[1]", 1),
        ("each[2]", 1),
        ("fan/left", 1),
        ("fan/right", 1),
    ]


def test_a_loop_ends_by_its_until_or_at_max_iterations(driver: Driver, scenario: Scenario) -> None:
    until = driver.start("polling", {"stop": 2})
    capped = driver.start("polling", {"stop": 99})

    done = finished(driver, until["run_id"])
    assert done["run"]["status"] == "succeeded"
    assert done["run"]["output"] == {"n": 2}
    assert attempts(done) == [
        ("poll", 1, "wait", "succeeded"),
        ("poll[0]/check", 1, "task", "succeeded"),
        ("poll[1]/check", 1, "task", "succeeded"),
        ("poll[2]/check", 1, "task", "succeeded"),
    ]
    assert scenario.bodies(until["run_id"]) == [
        ("poll[0]/check", 1),
        ("poll[1]/check", 1),
        ("poll[2]/check", 1),
    ]

    stopped = finished(driver, capped["run_id"])
    assert stopped["run"]["status"] == "succeeded"
    assert stopped["run"]["output"] == {"n": 3}
    assert [key for key, _, _, _ in attempts(stopped)] == [
        "poll",
        "poll[0]/check",
        "poll[1]/check",
        "poll[2]/check",
        "poll[3]/check",
    ]


def test_subworkflows_two_levels_deep_hand_their_output_back(
    driver: Driver, scenario: Scenario
) -> None:
    top = driver.start("tree", {"n": 21})
    done = finished(driver, top["run_id"])
    assert done["run"]["status"] == "succeeded"
    assert done["run"]["output"] == {"from_child": {"middle": {"got": 21}}}
    assert attempts(done) == [
        ("prep", 1, "task", "succeeded"),
        ("sub", 1, "wait", "succeeded"),
        ("after", 1, "task", "succeeded"),
    ]
    assert done["attempts"][1]["output"] == {"middle": {"got": 21}}

    middle = only_child(driver, top["run_id"], "middle")
    leaf = only_child(driver, middle["run_id"], "leaf")
    expected = [
        (middle, top["run_id"], "sub", 1, {"n": 21}, {"middle": {"got": 21}}),
        (leaf, middle["run_id"], "nest", 2, {"n": 21}, {"got": 21}),
    ]
    for child, parent, step_key, depth, child_input, output in expected:
        assert child["status"] == "succeeded"
        assert (child["parent_run_id"], child["parent_step_key"]) == (parent, step_key)
        assert (child["root_run_id"], child["depth"]) == (top["run_id"], depth)
        assert child["trace_id"] == top["trace_id"]
        assert (child["input"], child["output"]) == (child_input, output)
        assert child["correlation"]["run_id"] == child["run_id"]
    assert scenario.bodies(leaf["run_id"]) == [("work", 1)]
    assert scenario.bodies(middle["run_id"]) == []
    assert scenario.bodies(top["run_id"]) == [("prep", 1), ("after", 1)]


# 2. Retries and on_error.


def test_retries_back_off_exponentially_then_succeed(driver: Driver, scenario: Scenario) -> None:
    run = driver.start("flaky", {"fails": 2})
    done = finished(driver, run["run_id"])
    assert done["run"]["status"] == "succeeded"
    assert done["run"]["output"] == "answered"
    assert [(a["attempt"], a["status"], a["attempts_left"]) for a in done["attempts"]] == [
        (1, "failed", 2),
        (2, "failed", 1),
        (3, "succeeded", 0),
    ]
    assert done["attempts"][0]["error"] == {"class": "retryable", "message": "attempt 1 failed"}
    events = log_of(driver, run["run_id"])
    # initial_ms 60, doubled: the next attempt is leased no sooner than 60, then 120 ms after.
    for attempt, backoff in ((1, 60), (2, 120)):
        failed = at_of(events, "step_failed", step_key="call", attempt=attempt)
        leased = at_of(events, "step_leased", step_key="call", attempt=attempt + 1)
        assert leased - failed >= timedelta(milliseconds=backoff), (attempt, failed, leased)
    assert scenario.bodies(run["run_id"]) == [("call", 1), ("call", 2), ("call", 3)]


def test_retries_exhausted_fail_the_run(driver: Driver, scenario: Scenario) -> None:
    run = driver.start("flaky", {"fails": 5})
    done = finished(driver, run["run_id"])
    assert done["run"]["status"] == "failed"
    assert done["run"]["error"] == "attempt 3 failed"
    assert [(a["attempt"], a["status"]) for a in done["attempts"]] == [
        (1, "failed"),
        (2, "failed"),
        (3, "failed"),
    ]
    assert kinds(log_of(driver, run["run_id"]))[-2:] == ["step_failed", "run_ended"]
    assert "deadline_at" not in done["run"]
    assert done["timers"] == []
    assert scenario.bodies(run["run_id"]) == [("call", 1), ("call", 2), ("call", 3)]


def test_on_error_continue_moves_on_with_the_failure_readable(
    driver: Driver, scenario: Scenario
) -> None:
    run = driver.start("tolerant")
    done = finished(driver, run["run_id"])
    assert done["run"]["status"] == "succeeded"
    assert done["run"]["output"] == {
        "status": "failed",
        "error": {"class": "fatal", "message": "no luck"},
    }
    assert attempts(done) == [
        ("try_it", 1, "task", "failed"),
        ("carry_on", 1, "task", "succeeded"),
    ]
    assert scenario.bodies(run["run_id"]) == [("try_it", 1), ("carry_on", 1)]


# 3. Ceilings over a run tree.


def test_the_step_ceiling_of_the_root_bounds_its_child(driver: Driver, scenario: Scenario) -> None:
    run = driver.start("step_capped")
    done = finished(driver, run["run_id"])
    child = only_child(driver, run["run_id"], "pair")
    assert child["status"] == "failed"
    assert child["error"] == "max_steps spent: 2 of 2 steps used"
    assert done["run"]["status"] == "failed"
    assert done["run"]["error"] == "max_steps spent: 2 of 2 steps used"
    assert attempts(done) == [
        ("opening", 1, "task", "succeeded"),
        ("halves", 1, "wait", "failed"),
    ]
    assert attempts(driver.get(child["run_id"])) == [
        ("first_half", 1, "task", "succeeded"),
        ("second_half", 1, "task", "failed"),
    ]
    assert scenario.bodies(child["run_id"]) == [("first_half", 1)]


def test_the_spend_ceiling_of_the_root_bounds_its_child(driver: Driver, scenario: Scenario) -> None:
    # gpt-4o in the shipped book: 2.5 USD per million input tokens, 10 per million output.
    usage = {"provider": "openai", "model": "gpt-4o", "input_tokens": 2000, "output_tokens": 500}
    run = driver.start("cost_capped", {"usage": usage, "output": "thought"})
    done = finished(driver, run["run_id"])
    think = done["attempts"][0]
    assert (think["step_key"], think["status"]) == ("think", "succeeded")
    assert think["cost_usd"] == pytest.approx(0.01)
    assert think["usage"]["model"] == "gpt-4o"
    assert (think["usage"]["input_tokens"], think["usage"]["output_tokens"]) == (2000, 500)
    assert done["run"]["cost_usd"] == pytest.approx(0.01)
    child = only_child(driver, run["run_id"], "pair")
    assert child["status"] == "failed"
    assert child["error"] == "max_cost_usd spent: 0.01 of 0.01 USD"
    assert (done["run"]["status"], done["run"]["error"]) == ("failed", child["error"])
    assert attempts(driver.get(child["run_id"])) == [("first_half", 1, "task", "failed")]
    assert scenario.bodies(child["run_id"]) == []


# 4. Idempotent start under concurrency.


def test_one_idempotency_key_started_by_many_threads_at_once_is_one_run(
    driver: Driver, scenario: Scenario
) -> None:
    key, threads = unique("order"), 12
    gate = threading.Barrier(threads)

    def start(n: int) -> dict[str, Any]:
        gate.wait(timeout=10)
        return driver.start("once", {"n": n}, idempotency_key=key)

    with ThreadPoolExecutor(threads) as pool:
        answers = list(pool.map(start, range(threads)))
    run_ids = {answer["run_id"] for answer in answers}
    assert len(run_ids) == 1
    (run_id,) = run_ids
    # Every caller got the one run, with the input of whichever start made it.
    assert all(answer["idempotency_key"] == key for answer in answers)
    assert len({json.dumps(answer["input"]) for answer in answers}) == 1

    done = finished(driver, run_id)
    assert done["run"]["status"] == "succeeded"
    assert done["run"]["output"] == answers[0]["input"]
    listed = all_runs(driver, "once")
    assert [run["run_id"] for run in listed if run.get("idempotency_key") == key] == [run_id]
    assert scenario.bodies(run_id) == [("only", 1)]


# 5. Cancel cascade, with a worker in the child's body.


def _child_in_its_body(driver: Driver, scenario: Scenario) -> tuple[dict[str, Any], str, str]:
    """An `umbrella` run whose child's `linger` body a worker is running: (parent, child id,
    the body's lease)."""
    parent = driver.start("umbrella", {"sleep_ms": 1000})
    child = only_child(driver, parent["run_id"], "lingering")
    lease = eventually(lambda: scenario.lease_of(child["run_id"], "linger", 1), timeout=10)
    return parent, child["run_id"], lease


def test_cancelling_a_parent_cancels_its_running_child(driver: Driver, scenario: Scenario) -> None:
    parent, child_id, lease = _child_in_its_body(driver, scenario)
    cancelled = driver.cancel(parent["run_id"])
    assert cancelled["status"] == "cancelled"
    assert "ended_at" in cancelled

    child = driver.get(child_id)
    assert child["run"]["status"] == "cancelled"
    assert attempts(child) == [("linger", 1, "task", "failed")]
    assert (child["timers"], child["waits"]) == ([], [])
    assert child["run"]["error"] == "its parent run ended cancelled"
    assert journal(log_of(driver, child_id)) == [
        ("run_started", {"definition_id": "lingering", "definition_version": 1}),
        ("run_cursor", {"index": 0, "construct": "task", "step_key": "linger"}),
        ("step_leased", {"step_key": "linger", "attempt": 1}),
        ("run_ended", {"status": "cancelled", "error": "its parent run ended cancelled"}),
    ]
    assert attempts(driver.get(parent["run_id"])) == [("below", 1, "wait", "failed")]
    # The worker's report after its body is refused: the run has ended.
    report = eventually(lambda: scenario.report(lease), timeout=10)
    assert (report["call"], report["conflict"]) == ("CompleteStep", "RUN_TERMINAL")
    assert driver.get(child_id)["run"]["status"] == "cancelled"
    # Cancelling what has ended answers it as it is.
    assert driver.cancel(parent["run_id"])["status"] == "cancelled"


def test_cancelling_a_child_fails_its_parent(driver: Driver, scenario: Scenario) -> None:
    parent, child_id, lease = _child_in_its_body(driver, scenario)
    assert driver.cancel(child_id)["status"] == "cancelled"
    done = finished(driver, parent["run_id"], timeout=5)
    assert done["run"]["status"] == "failed"
    assert done["run"]["error"] == f"child run {child_id} ended cancelled"
    assert attempts(done) == [("below", 1, "wait", "failed")]
    report = eventually(lambda: scenario.report(lease), timeout=10)
    assert (report["call"], report["conflict"]) == ("CompleteStep", "RUN_TERMINAL")


# 6. A cause chain over steps the worker ran.


def test_the_cause_chain_names_the_silent_producers(driver: Driver, scenario: Scenario) -> None:
    run = driver.start("explain")
    done = finished(driver, run["run_id"])
    assert done["run"]["status"] == "failed"
    assert done["run"]["error"] == "nothing to answer"
    assert scenario.bodies(run["run_id"]) == [("extract", 1), ("label", 1), ("answer", 1)]

    cause = driver.cause(run["run_id"], "answer")
    assert (cause["run_id"], cause["step_key"], cause["status"], cause["attempts"]) == (
        run["run_id"],
        "answer",
        "failed",
        1,
    )
    assert cause["error"] == {"class": "fatal", "message": "nothing to answer"}
    assert cause["truncated"] is False
    rows = [
        (
            link["depth"],
            link["step_key"],
            link["template_path"],
            link["consumed_by"],
            link["silent_producer"],
            link.get("value_kind"),
            link.get("value_empty"),
        )
        for link in cause["chain"]
    ]
    # By depth, then by where the reader sits, then by template (its `when` before its input),
    # then by the path's text: the input's keys, posted as kind, raw, fail, keep no order.
    assert rows[:3] == [
        (1, "label", "steps.label.output", "answer", True, "object", False),
        (1, "extract", "steps.extract.status", "answer", True, None, None),
        (1, "label", "steps.label.output.kind", "answer", True, "null", True),
    ]
    assert rows[3:] == [(2, "extract", "steps.extract.output.text", "label", True, "string", True)]
    assert driver.cause(run["run_id"], "answer") == cause
    assert {(link["status"], link["attempts"]) for link in cause["chain"]} == {("succeeded", 1)}
    with pytest.raises(Refused) as caught:
        driver.cause(run["run_id"], "nowhere")
    assert (caught.value.status, caught.value.field) == (404, "step_key")


def test_a_failed_run_is_noted_by_the_daemon_with_its_silent_producer(
    driver: Driver, scenario: Scenario
) -> None:
    run = driver.start("explain")
    done = finished(driver, run["run_id"])
    trace_id = done["run"]["trace_id"]
    read = bearer("alpha", "read")

    def outcome() -> str:
        answer = httpx.get(
            f"{scenario.daemon.http_url}/v1/api/traces/{trace_id}/notes", headers=read, timeout=10
        )
        assert answer.status_code == 200, answer.text
        notes: dict[str, str] = {note["aspect"]: note["text"] for note in answer.json()["notes"]}
        assert "outcome" in notes, notes
        return notes["outcome"]

    # Derived before the next pass (every second here): the run's status, the failed step's
    # error class, and the silent producers its cause chain names.
    assert eventually(outcome, timeout=30) == (
        "The workflow run failed: a step failed with a fatal error on what an earlier step"
        " produced."
    )


# 7. Gapless event logs under concurrent workers.


def test_event_logs_stay_gapless_under_concurrent_workers(
    driver: Driver, scenario: Scenario
) -> None:
    run_ids = [driver.start("busy")["run_id"] for _ in range(16)]
    workers: set[str] = set()
    for run_id in run_ids:
        done = finished(driver, run_id)
        assert done["run"]["status"] == "succeeded"
        assert done["run"]["output"] == {"one": 1, "two": 2}
        events = log_of(driver, run_id, page=5)
        assert len({event["seq"] for event in events}) == len(events)
        assert (events[0]["kind"], events[-1]["kind"]) == ("run_started", "run_ended")
        assert Counter(kinds(events)) == {
            "run_started": 1,
            "run_cursor": 3,
            "step_leased": 3,
            "step_finished": 3,
            "run_ended": 1,
        }
        leased = [e["payload"] for e in events if e["kind"] == "step_leased"]
        assert sorted(p["step_key"] for p in leased) == ["join", "split/one", "split/two"]
        workers |= {p["worker_id"] for p in leased}
        assert sorted(scenario.bodies(run_id)) == [("join", 1), ("split/one", 1), ("split/two", 1)]
    # The runs were served by every worker process.
    assert workers == {f"scenario-{n}" for n in range(WORKERS)}


# 8. Deadlines while a worker's body outlives them.


def test_a_run_timeout_ends_the_run_while_the_body_still_runs(
    driver: Driver, scenario: Scenario
) -> None:
    run = driver.start("timeboxed")
    assert "deadline_at" in run
    done = finished(driver, run["run_id"])
    ended = done["run"]
    assert (ended["status"], ended["error"]) == ("timed_out", "run_timeout_ms passed")
    assert instant(ended["ended_at"]) - instant(ended["created_at"]) >= timedelta(milliseconds=299)
    assert "deadline_at" not in ended
    assert attempts(done) == [("overrun", 1, "task", "failed")]
    assert (done["timers"], done["waits"]) == ([], [])
    assert log_of(driver, run["run_id"])[-1]["payload"] == {
        "status": "timed_out",
        "error": "run_timeout_ms passed",
    }
    lease = scenario.lease_of(run["run_id"], "overrun", 1)
    report = eventually(lambda: scenario.report(lease), timeout=10)
    assert (report["call"], report["conflict"]) == ("CompleteStep", "RUN_TERMINAL")


def test_a_step_timeout_retries_the_step_and_fences_the_late_report(
    driver: Driver, scenario: Scenario
) -> None:
    run = driver.start("step_timed")
    done = finished(driver, run["run_id"])
    assert done["run"]["status"] == "succeeded"
    assert done["run"]["output"] == "in time"
    assert [(a["attempt"], a["status"]) for a in done["attempts"]] == [
        (1, "timed_out"),
        (2, "succeeded"),
    ]
    assert done["attempts"][0]["error"] == {
        "class": "retryable",
        "message": "step_timeout_ms 150 passed",
    }
    events = log_of(driver, run["run_id"])
    timed_out = at_of(events, "step_failed", step_key="slowpoke", attempt=1)
    retried = at_of(events, "step_leased", step_key="slowpoke", attempt=2)
    assert retried - timed_out >= timedelta(milliseconds=800)
    # The first body outlived its step timeout; its report came while the run still ran.
    late = eventually(lambda: scenario.report(scenario.lease_of(run["run_id"], "slowpoke", 1)))
    assert (late["call"], late["conflict"]) == ("CompleteStep", "FENCED")
    assert scenario.bodies(run["run_id"]) == [("slowpoke", 1), ("slowpoke", 2)]


# Lease expiry and reclaim with in-test lease calls (see the module docstring).


@dataclass
class Ghost:
    """Two runs of `solo` in beta whose only step is held by a ghost that never heartbeats."""

    restored: tuple[str, str]  # (run id, lease id): heartbeated inside its reclaim window
    abandoned: tuple[str, str]  # left until the window closes


def _haunt(daemon: DaemonProcess, http: httpx.Client) -> Future[None]:
    """Take the ghost's leases now, and play the rest in a thread, so that the lease length
    passes while the other tests run; the last test waits for the outcome."""
    body = {"steps": [{"id": "held", "kind": "task"}]}
    posted = http.post(
        "/definitions", json={"id": "solo", "body": body}, headers=bearer("beta", "execute")
    )
    assert posted.status_code == 200, posted.text
    pairs = []
    for _ in range(2):
        started = http.post(
            "/runs", json={"definition_id": "solo"}, headers=bearer("beta", "execute")
        ).json()
        claim = {"worker_id": "ghost", "max": 1, "wait_ms": 0, "run_id": started["run_id"]}
        (lease,) = http.post("/workers/claim", json=claim, headers=bearer("beta", "worker")).json()[
            "leases"
        ]
        pairs.append((started["run_id"], lease["lease_id"]))
    ghost = Ghost(restored=pairs[0], abandoned=pairs[1])
    outcome: Future[None] = Future()

    def play() -> None:
        try:
            _play(daemon, ghost)
        except BaseException as failure:  # handed to the test that waits for it
            outcome.set_exception(failure)
        else:
            outcome.set_result(None)

    threading.Thread(target=play, name="ghost", daemon=True).start()
    return outcome


def _play(daemon: DaemonProcess, ghost: Ghost) -> None:
    with (
        httpx.Client(base_url=f"{daemon.http_url}/v1/api", timeout=20) as http,
        grpc.insecure_channel(daemon.grpc_addr) as channel,
    ):
        stub = OrchestratorServiceStub(channel)
        worker = bearer_metadata("beta", "worker")

        def detail(run_id: str) -> dict[str, Any]:
            answer = http.get(f"/runs/{run_id}", headers=bearer("beta", "read"))
            return cast(dict[str, Any], answer.json())

        def lease_call(lease_id: str, action: str) -> httpx.Response:
            return http.post(
                f"/leases/{lease_id}/{action}", json={}, headers=bearer("beta", "worker")
            )

        def grpc_conflict(call: Callable[[], Any]) -> runs_pb2.StepConflict:
            with pytest.raises(grpc.RpcError) as caught:
                call()
            assert caught.value.code() is grpc.StatusCode.ABORTED
            failure = rpc_failure_from(cast(grpc.aio.AioRpcError, caught.value))
            (packed,) = failure.details
            conflict = runs_pb2.StepConflict()
            assert packed.Unpack(conflict)
            return conflict

        # lease_expiry: a lease not renewed for its length orphans the attempt, with a reclaim
        # window one lease long; a heartbeat inside the window restores it.
        run_id, lease_id = ghost.restored

        def orphaned() -> dict[str, Any]:
            found = detail(run_id)
            assert found["attempts"][0]["status"] == "orphaned", found["attempts"]
            return found

        found = eventually(orphaned, timeout=3 * LEASE_S, interval=0.1)
        assert [t["kind"] for t in found["timers"]] == ["reclaim"]
        assert "reclaim_until" in found["attempts"][0]
        state = stub.Heartbeat(rpc.LeaseRequest(lease_id=lease_id), metadata=worker, timeout=10)
        assert state.reclaimed is True
        restored = detail(run_id)
        assert restored["attempts"][0]["status"] == "leased"
        assert [t["kind"] for t in restored["timers"]] == ["lease_expiry"]
        done = lease_call(lease_id, "complete")
        assert done.json() == {"run_status": "succeeded", "next": "idle"}, done.text
        twice = grpc_conflict(
            lambda: stub.CompleteStep(
                rpc.CompleteStepRequest(lease_id=lease_id), metadata=worker, timeout=10
            )
        )
        assert (twice.reason, twice.attempt_status, twice.run_status) == (
            enums_pb2.CONFLICT_REASON_ALREADY_APPLIED,
            enums_pb2.ATTEMPT_STATUS_SUCCEEDED,
            enums_pb2.RUN_STATUS_SUCCEEDED,
        )

        # reclaim: the window closed with no contact, the attempt is pending again and its old
        # lease fenced.
        run_id, lease_id = ghost.abandoned

        def requeued() -> dict[str, Any]:
            found = detail(run_id)
            assert found["attempts"][0]["status"] == "pending", found["attempts"]
            return found

        found = eventually(requeued, timeout=4 * LEASE_S, interval=0.1)
        (attempt,) = found["attempts"]
        assert (attempt["attempt"], "orphaned_at" in attempt) == (1, True)
        assert "reclaim_until" not in attempt
        assert "lease_owner" not in attempt
        assert found["timers"] == []
        fenced = lease_call(lease_id, "heartbeat")
        assert fenced.status_code == 409
        assert (fenced.json()["reason"], fenced.json()["attempt_status"]) == ("fenced", "pending")
        over_grpc = grpc_conflict(
            lambda: stub.Heartbeat(rpc.LeaseRequest(lease_id=lease_id), metadata=worker, timeout=10)
        )
        assert over_grpc.reason == enums_pb2.CONFLICT_REASON_FENCED
        claim = {"worker_id": "ghost-2", "max": 1, "wait_ms": 0, "run_id": run_id}
        (again,) = http.post("/workers/claim", json=claim, headers=bearer("beta", "worker")).json()[
            "leases"
        ]
        assert (again["attempt"], again["lease_id"] != lease_id) == (1, True)
        assert lease_call(again["lease_id"], "complete").json()["run_status"] == "succeeded"


def test_a_lapsed_lease_is_orphaned_then_restored_or_requeued_and_fenced(
    scenario: Scenario,
) -> None:
    # Started when the module's daemon came up; waits only for what is left of two lease lengths.
    scenario.ghost.result(timeout=6 * LEASE_S)
