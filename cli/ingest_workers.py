"""Ingest worker processes: `mcpd serve` (every role) ingests on every core.

One Python process ingests on one core at most (the interpreter lock), and ingest is CPU work
per record: mapping, validation, redaction, pricing, rendering rows. So `mcpd serve` runs
`ingest.workers` children (`cli.children`), each `mcpd serve --service ingest` with its own
pipeline and group-commit writer on the same storage, and its gateway sends every ingest request
it relays (native REST, OTLP/HTTP) to them in turn (one channel with grpc's `round_robin`
policy, `mcpd.runtime.channels.open_replicas_channel`), as the parent's OTLP/gRPC port does
(`cli.otlp_relay`). The parent keeps its own ingest role for clients of its main gRPC port and
everything that must happen once: the sessions of ingested traces (the session search index has
one writer), the tail-sampling sweep, transcript tailing and retention.

Storage is shared the way replicas share it: on SQLite every process writes the one file, each
group commit in a `BEGIN IMMEDIATE` transaction, which serialises writers (rows are bound
before the transaction, `mcpd.storage.sql.signals.writes`, so it holds the lock only for the
database's own work); PostgreSQL and a ClickHouse server take concurrent writers anyway. An
embedded ClickHouse (chdb) belongs to one process, so it gets no workers. Nothing is
acknowledged before it is durable in any of them, so a crash of any process loses nothing
acknowledged.

Over the socket pair:

- parent -> worker, once the parent has migrated storage and serves: `{"start": true, "host":
  "127.0.0.1", "listening": [...]}` (loopback: the workers' ports are private). The worker
  opens storage (without migrating), builds its authentication for the parent's listening
  addresses (so it grants local mode exactly when the parent does), and serves ingest on
  `host:0`;
- worker -> parent, once it serves: `{"grpc": "127.0.0.1:41234"}`;
- worker -> parent, after each stored batch with session ids: `{"sessions": [[project,
  session_id], ...]}`, which the parent's `TraceSessions` rebuilds; and every
  `LAG_INTERVAL_S`: `{"lag": {"pending_records": n, "oldest_age_s": s}}`, which the parent's
  health report adds to its own;
- parent -> worker, after each tail-sampling sweep that decided something: `{"decided":
  [[project, [kept trace ids], [dropped trace ids]], ...]}`, which the worker remembers so the
  stragglers it receives follow the decisions (`services.ingest.tail`).

A worker that dies stops the parent with status 1, as a dead gateway does: whatever supervises
mcpd restarts all of it.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import os
from collections.abc import Callable, Sequence
from contextlib import AsyncExitStack
from pathlib import Path

from cli.children import ChildProcess, Message, ParentLink, private_host, unsupported_reason
from mcpd.runtime.config import Settings
from mcpd.signals.batch import IngestLag, SignalBatch
from services.ingest import Decision

log = logging.getLogger("mcpd.serve")

# How long a worker may take to open storage and serve (mostly imports).
START_TIMEOUT_S = 60.0
# How often a worker reports its lag.
LAG_INTERVAL_S = 0.5
# The most workers `ingest.workers` unset gives, whatever the core count.
MAX_AUTO_WORKERS = 4

SessionKeys = list[tuple[str, str]]


def worker_count(settings: Settings, roles: Sequence[str]) -> int:
    """How many ingest workers `mcpd serve` runs for `roles` (see the module docstring)."""
    if "gateway" not in roles or "ingest" not in roles:
        return 0
    storage = settings.storage
    if storage.backend == "clickhouse" and (storage.clickhouse_url or "").startswith("chdb:"):
        return 0
    if unsupported_reason() is not None:
        return 0
    if settings.ingest.workers is not None:
        return settings.ingest.workers
    return min(os.cpu_count() or 1, MAX_AUTO_WORKERS)


class IngestWorkers:
    """The parent's side of its ingest workers."""

    def __init__(self, children: Sequence[ChildProcess]) -> None:
        self._children = list(children)
        self._lags: dict[int, IngestLag] = {}
        self._listeners: list[asyncio.Task[None]] = []
        self.addresses: list[str] = []

    @classmethod
    async def spawn(
        cls, settings: Settings, config_path: Path | None, count: int
    ) -> IngestWorkers | None:
        """Start `count` workers (None for none); they import and wait for `start`."""
        if count < 1:
            return None
        workers = cls([ChildProcess("ingest", settings, config_path) for _ in range(count)])
        try:
            for child in workers._children:
                await child.spawn()
        except BaseException:
            await workers.stop()
            raise
        return workers

    @property
    def pids(self) -> list[int]:
        return [child.pid for child in self._children]

    async def start(
        self,
        grpc_address: str,
        listening: Sequence[str],
        on_sessions: Callable[[SessionKeys], None],
    ) -> list[str]:
        """Have every worker serve; their gRPC addresses. Raises OSError when one exits first
        or does not serve within START_TIMEOUT_S."""
        # Private ports on loopback, of the family the parent's own address has (the gateway's
        # one channel to them all names them by address).
        message = {"start": True, "host": private_host(grpc_address), "listening": list(listening)}
        for child in self._children:
            try:
                await child.send(message)
            except ConnectionError:
                raise await child.gone("did not start") from None
        for child in self._children:
            try:
                answer = await asyncio.wait_for(child.receive(), START_TIMEOUT_S)
            except TimeoutError:
                answer = None
            if answer is None:
                raise await child.gone("did not start")
            self.addresses.append(str(answer["grpc"]))
        for index, child in enumerate(self._children):
            self._listeners.append(
                asyncio.create_task(
                    self._listen(index, child, on_sessions), name=f"ingest-worker-{index}"
                )
            )
        return list(self.addresses)

    async def _listen(
        self, index: int, child: ChildProcess, on_sessions: Callable[[SessionKeys], None]
    ) -> None:
        while (message := await child.receive()) is not None:
            if "sessions" in message:
                on_sessions([(str(project), str(key)) for project, key in message["sessions"]])
            elif "lag" in message:
                lag = message["lag"]
                self._lags[index] = IngestLag(
                    pending_records=int(lag["pending_records"]),
                    oldest_age_s=float(lag["oldest_age_s"]),
                )

    def tell_decisions(self, decisions: list[Decision]) -> None:
        """Tell every worker a tail-sampling sweep's decisions."""
        for child in self._children:
            child.send_nowait({"decided": decisions})

    def lag(self) -> IngestLag:
        """What the workers last reported, together: records waiting, the oldest one's age."""
        lags = list(self._lags.values())
        return IngestLag(
            pending_records=sum(lag.pending_records for lag in lags),
            oldest_age_s=max((lag.oldest_age_s for lag in lags), default=0.0),
        )

    async def wait(self) -> tuple[ChildProcess, int]:
        """The first worker to exit, and its exit status."""
        waits = {asyncio.ensure_future(child.wait()): child for child in self._children}
        try:
            done, _ = await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for waiting in waits:
                waiting.cancel()
        finished = next(iter(done))
        return waits[finished], finished.result()

    async def stop(self) -> None:
        """Stop every worker (each commits what it has queued); idempotent."""
        await asyncio.gather(*(child.stop() for child in self._children))
        for listener in self._listeners:
            listener.cancel()


async def serve_worker(settings: Settings, supervisor_fd: int) -> int:
    """Run as an ingest worker of the parent on `supervisor_fd` until it stops us or is gone."""
    from cli.ingest import start_ingest
    from cli.roles import ROLE_STORES
    from cli.security import build_security, service_credential
    from cli.serve import local_address, open_configured_stores, stop_on_signals
    from mcpd.runtime.clock import SystemClock
    from mcpd.runtime.server import GrpcServer
    from services.ingest import sessions_of

    stop = stop_on_signals()
    async with AsyncExitStack() as stack:
        link = await ParentLink.open(supervisor_fd)
        stack.callback(link.close)
        start = await link.first(stop)
        if start is None:
            return 0
        # The parent migrated before it started us; opening without migrating changes nothing.
        stores = await open_configured_stores(settings, migrate=False, stores=ROLE_STORES["ingest"])
        stack.callback(stores.close)
        clock = SystemClock()
        address = f"{start['host']}:0"
        security = await build_security(
            settings.security,
            stores.control,
            clock,
            [*start["listening"], address],
            service=await asyncio.to_thread(service_credential, settings),
        )
        stack.push_async_callback(security.close)

        def stored(batch: SignalBatch) -> None:
            sessions = sessions_of(batch)
            if sessions:
                link.send_nowait({"sessions": sorted(sessions)})

        ingest = await start_ingest(stack, settings, stores, clock, stored=stored, sweep_tail=False)
        server = await stack.enter_async_context(
            GrpcServer(
                address,
                ingest.registrations(clock),
                settings.grpc,
                interceptors=[security.interceptor],
            )
        )
        await link.send({"grpc": local_address(address, server.port)})

        def on_message(message: Message) -> None:
            decided = message.get("decided")
            if decided:
                ingest.tail.remember(
                    (str(project), list(keep), list(drop)) for project, keep, drop in decided
                )

        link.watch(stop, on_message)
        reporting = asyncio.create_task(_report_lag(link, ingest.lag), name="ingest-lag")
        stack.callback(reporting.cancel)
        gc.freeze()
        await stop.wait()
        log.info("ingest worker stopping")
    return 0


async def _report_lag(link: ParentLink, lag: Callable[[], IngestLag]) -> None:
    with contextlib.suppress(ConnectionError):
        while True:
            current = lag()
            link.send_nowait(
                {
                    "lag": {
                        "pending_records": current.pending_records,
                        "oldest_age_s": current.oldest_age_s,
                    }
                }
            )
            await asyncio.sleep(LAG_INTERVAL_S)
