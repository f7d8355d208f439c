"""The orchestrator's domain objects over a real run store and a manual clock, for its tests."""

from __future__ import annotations

from contextlib import ExitStack
from datetime import timedelta
from pathlib import Path
from typing import Any

from mcpd.model.v1 import enums_pb2, runs_pb2
from mcpd.orchestrator.v1 import orchestrator_service_pb2 as rpc
from mcpd.pricing import load_price_book
from mcpd.runtime.clock import ManualClock
from mcpd.signals.messages import value_of
from mcpd.storage.run_records import NewDefinition
from mcpd.storage.sql.control_store import SqlControlStore
from mcpd.storage.sql.engine import Synchronous, create_postgres_engine, create_sqlite_engine
from mcpd.storage.sql.stores import SqlRunStore
from mcpd.testing.templates import PostgresTemplates, SqliteTemplates
from mcpd.workflows import check_definition
from services.orchestrator.causes import Causes
from services.orchestrator.events import Events
from services.orchestrator.leases import Leases
from services.orchestrator.mover import Mover
from services.orchestrator.prices import Prices
from services.orchestrator.runs import Runs
from services.orchestrator.timers import Timers
from services.orchestrator.wakeups import Wakeups

LEASE_MS = 1000
PROJECT = "p"


class Daemon:
    """The orchestrator's domain objects over one store and clock."""

    def __init__(self, store: SqlRunStore, control: SqlControlStore, clock: ManualClock) -> None:
        self.store = store
        self.control = control
        self.clock = clock
        mover = Mover(store, clock, Wakeups(), lease_ttl_ms=LEASE_MS)
        self.runs = Runs(store, mover)
        self.leases = Leases(mover, Prices(control, load_price_book(), monotonic=clock.monotonic))
        self.events = Events(store, store, mover)
        self.causes = Causes(store, mover.bodies)
        self.timers = Timers(mover)

    def define(self, name: str, body: dict[str, Any]) -> None:
        """Store `body` as `name`, checked as a posted definition is."""
        checked = check_definition(name, body)
        self.store.put_definitions(PROJECT, [NewDefinition(name, "workflow", checked, None)], now=0)

    def start(self, name: str) -> str:
        run = self.runs.start(runs_pb2.StartRunRequest(project=PROJECT, definition_id=name))
        return run.run_id

    async def claim(
        self, run_id: str | None, *, worker_id: str = "w", most: int = 10
    ) -> list[runs_pb2.StepLease]:
        request = runs_pb2.ClaimRequest(project=PROJECT, worker_id=worker_id, max=most, wait_ms=0)
        if run_id is not None:
            request.run_id = run_id
        return list((await self.leases.claim(request, None)).leases)

    def later(self, ms: int) -> int:
        """Move the clock on by `ms` and fire what came due; how many timers were due."""
        self.clock.advance(timedelta(milliseconds=ms))
        return self.timers.fire_due()

    def detail(self, run_id: str) -> runs_pb2.RunDetail:
        return self.runs.get(rpc.GetRunRequest(project=PROJECT, run_id=run_id))

    def lease(self, lease_id: str) -> rpc.LeaseRequest:
        return rpc.LeaseRequest(project=PROJECT, lease_id=lease_id)

    def complete(self, lease_id: str, output: Any = None, state: Any = None) -> runs_pb2.StepAck:
        result = runs_pb2.StepResult()
        if output is not None:
            result.output.CopyFrom(value_of(output))
        if state is not None:
            result.state.CopyFrom(value_of(state))
        request = rpc.CompleteStepRequest(project=PROJECT, lease_id=lease_id, result=result)
        return self.leases.complete(request)

    def fail(self, lease_id: str, kind: int, message: str = "it broke") -> runs_pb2.StepAck:
        error = runs_pb2.StepError(message=message)
        setattr(error, "class", kind)
        failure = runs_pb2.StepFailure(error=error)
        request = rpc.FailStepRequest(project=PROJECT, lease_id=lease_id, failure=failure)
        return self.leases.fail(request)


def open_daemon(
    stack: ExitStack,
    directory: Path,
    clock: ManualClock,
    sqlite: SqliteTemplates,
    postgres: PostgresTemplates | None = None,
) -> Daemon:
    """A daemon on an empty migrated run store, an emptied copy of the PostgreSQL template when
    `postgres` is given (milliseconds, not a migration) and a SQLite copy in `directory`
    otherwise, with a SQLite control store there (prices and audit read it); `stack` closes
    them."""
    if postgres is None:
        path = sqlite.copy("run", directory / "run.db")
        store = SqlRunStore(create_sqlite_engine(path, synchronous=Synchronous.NORMAL))
    else:
        store = SqlRunStore(create_postgres_engine(stack.enter_context(postgres.database("run"))))
    stack.callback(store.close)
    control_path = sqlite.copy("control", directory / "control.db")
    engine = create_sqlite_engine(control_path, synchronous=Synchronous.NORMAL)
    control = SqlControlStore(engine, clock=clock)
    stack.callback(control.close)
    return Daemon(store, control, clock)


def statuses(detail: runs_pb2.RunDetail) -> list[tuple[int, str]]:
    return [(a.attempt, enums_pb2.AttemptStatus.Name(a.status)) for a in detail.attempts]


def timer_kinds(detail: runs_pb2.RunDetail) -> list[str]:
    return sorted(enums_pb2.TimerKind.Name(t.kind) for t in detail.timers)
