"""`mcpd serve` (every role): a supervisor and N identical server processes.

One Python process serves on one core at most (the interpreter lock), and ingest is CPU work per
record. So `mcpd serve` runs `serve.processes` server processes (one per core, at most
`MAX_AUTO_PROCESSES`, by default), each the whole daemon: every gRPC role and the gateway
(`cli.role_server`), on the same HTTP, gRPC and OTLP/gRPC ports, bound with SO_REUSEPORT so the
kernel spreads connections over them (`cli.listeners`). A request is parsed and served whole by
the process that receives it; the processes share storage the way replicas of a deployment do
(on SQLite each group commit is a `BEGIN IMMEDIATE` transaction, so writers take turns; rows are
bound before it, so it is held only for the database's own work). Server 0 is the primary: it
migrates storage before the others open it, and runs the work that must happen once per daemon
(transcript tailing, the tail-sampling sweep, the retention sweep).

The supervisor does little, in this order: it takes the data directory's lock (a second daemon
fails within a second, naming the holder), proves the ports free and holds them, imports the
server stack once, and forks the servers, which so start without importing anything again
(imported modules are shared copy-on-write; the collector's objects are frozen first so it does
not touch their pages). It opens no database and starts no thread before forking: a forked
child inherits only the thread that forked it. Then it waits for every server to listen, prints
the banner, and supervises: SIGTERM or SIGINT stops every server (each drains and commits what
it has queued); a server that dies stops the others and makes `mcpd serve` exit 1, so whatever
supervises mcpd restarts all of it. A server dies with its supervisor: the kernel kills it
(PR_SET_PDEATHSIG) and it stops when its pipe to the supervisor reaches EOF.

What the processes say to each other is `cli.process_messages`.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import multiprocessing
import multiprocessing.connection
import os
import signal
import sys
from collections.abc import Sequence
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from multiprocessing.context import ForkProcess
from typing import TYPE_CHECKING

from cli.listeners import Reservation, reserve
from cli.process_messages import Failed, Message, Migrated, Open, Proceed, Ready, ServerPlan
from cli.role_names import ROLES
from cli.signals import stop_on_signals
from mcpd.runtime.config import Settings
from mcpd.runtime.data_dir import DataDirLock, LockHolder
from mcpd.runtime.errors import McpdError

if TYPE_CHECKING:
    from cli.role_server import Served

log = logging.getLogger("mcpd.serve")

# The most server processes an unset `serve.processes` gives, whatever the core count.
MAX_AUTO_PROCESSES = 4
# How long a server may take to listen (migrations of a large database included).
START_TIMEOUT_S = 120.0
# How long a server may take to stop after SIGTERM before it is SIGKILLed (uvicorn lets open
# connections finish for 5 s; the ingest writer commits what is queued).
STOP_GRACE_S = 10.0
_PR_SET_PDEATHSIG = 1


def process_count(settings: Settings) -> int:
    """How many server processes `mcpd serve` runs (see the module docstring)."""
    storage = settings.storage
    if storage.backend == "clickhouse" and (storage.clickhouse_url or "").startswith("chdb:"):
        return 1  # an embedded ClickHouse belongs to one process
    if settings.serve.processes is not None:
        return settings.serve.processes
    return max(1, min(os.cpu_count() or 1, MAX_AUTO_PROCESSES))


def supervise(settings: Settings, lock: DataDirLock) -> int:
    """Run `mcpd serve` with every role until SIGTERM or SIGINT; the exit status. `lock` is
    the data directory's, held already."""
    try:
        reservation = reserve([settings.http_addr, settings.grpc_addr, settings.otlp_grpc_addr])
    except OSError as exc:
        print(f"mcpd: cannot start: {exc}", file=sys.stderr)
        return 1
    http, grpc, otlp = reservation.addresses
    count = process_count(settings)
    plans = [ServerPlan(index, count, http, grpc, otlp) for index in range(count)]
    # Imported before forking, so every server starts with it imported.
    import cli.role_server  # noqa: F401

    gc.collect()
    gc.freeze()
    servers = [ServerProcess.fork(plan, settings) for plan in plans]
    try:
        return asyncio.run(_supervise(servers, reservation, settings, lock))
    finally:
        reservation.release()


@dataclass
class ServerProcess:
    """The supervisor's side of one forked server."""

    plan: ServerPlan
    process: ForkProcess
    pipe: multiprocessing.connection.Connection
    ready: Ready | None = None
    failed: Failed | None = None
    _messages: asyncio.Queue[Message | None] = field(default_factory=asyncio.Queue)

    @classmethod
    def fork(cls, plan: ServerPlan, settings: Settings) -> ServerProcess:
        """Fork a server process for `plan`; it starts serving at once."""
        ours, theirs = multiprocessing.Pipe()
        context = multiprocessing.get_context("fork")
        process = context.Process(
            target=_server_main, args=(plan, settings, theirs), name=f"mcpd-server-{plan.index}"
        )
        process.start()
        theirs.close()  # only the child holds it: its EOF means the child is gone
        return cls(plan, process, ours)

    @property
    def pid(self) -> int:
        assert self.process.pid is not None, "started at fork"
        return self.process.pid

    def listen(self) -> None:
        """Queue the server's messages as they arrive (None once it is gone)."""
        loop = asyncio.get_running_loop()
        messages = self._messages = asyncio.Queue()

        def readable() -> None:
            try:
                messages.put_nowait(self.pipe.recv())
            except (EOFError, OSError):
                loop.remove_reader(self.pipe.fileno())
                messages.put_nowait(None)

        loop.add_reader(self.pipe.fileno(), readable)

    async def next_message(self) -> Message | None:
        return await self._messages.get()

    def send(self, message: Message) -> None:
        with contextlib.suppress(OSError):  # it died: its exit is noticed
            self.pipe.send(message)

    async def exited(self) -> int:
        """The exit status, once the process has ended (negative: killed by that signal)."""
        loop = asyncio.get_running_loop()
        ended: asyncio.Future[None] = loop.create_future()
        sentinel = self.process.sentinel

        def readable() -> None:
            if not ended.done():
                ended.set_result(None)

        loop.add_reader(sentinel, readable)
        try:
            await ended
        finally:
            loop.remove_reader(sentinel)
        self.process.join()
        code = self.process.exitcode
        return code if code is not None else 1

    def describe_exit(self) -> str:
        code = self.process.exitcode
        if code is None:
            return ""
        if code < 0:
            with contextlib.suppress(ValueError):
                return f" (killed by {signal.Signals(-code).name})"
        return f" (exit status {code})"

    async def stop(self) -> None:
        """SIGTERM, then SIGKILL after STOP_GRACE_S; returns once it has exited."""
        if self.process.exitcode is None:
            with contextlib.suppress(ProcessLookupError):
                self.process.terminate()
            try:
                await asyncio.wait_for(self.exited(), STOP_GRACE_S)
            except TimeoutError:
                log.warning(
                    f"server {self.plan.index} did not stop in time: killing it",
                    extra={"pid": self.pid, "grace_s": STOP_GRACE_S},
                )
                self.process.kill()
                await self.exited()
        self.pipe.close()


async def _supervise(
    servers: Sequence[ServerProcess],
    reservation: Reservation,
    settings: Settings,
    lock: DataDirLock,
) -> int:
    stop = stop_on_signals()
    for server in servers:
        server.listen()
    try:
        started = await _started(servers, stop)
    except _StartError as failure:
        await asyncio.gather(*(server.stop() for server in servers))
        if failure.reason:
            print(f"mcpd: cannot start: {failure.reason}", file=sys.stderr, flush=True)
        return 1 if failure.reason else 0
    reservation.release()
    lock.announce(LockHolder(os.getpid(), grpc=servers[0].plan.grpc_addr))
    _announce(settings, servers, started)
    for server in servers:
        server.send(Open())
    status = await _until_stopped(stop, servers)
    log.info("stopping")
    await asyncio.gather(*(server.stop() for server in servers))
    log.info("stopped")
    return status


class _StartError(Exception):
    """A server could not start (`reason` empty: we were told to stop while starting)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


async def _started(servers: Sequence[ServerProcess], stop: asyncio.Event) -> list[Ready]:
    """Wait until every server is Ready (telling the others when server 0 has migrated)."""

    async def start(server: ServerProcess) -> Ready:
        while (message := await server.next_message()) is not None:
            match message:
                case Migrated():
                    for other in servers[1:]:
                        other.send(Proceed())
                case Ready():
                    return message
                case Failed(reason=reason):
                    raise _StartError(reason)
        status = await server.exited()
        if status == 0 and stop.is_set():
            raise _StartError("")  # signalled while starting, as we were
        raise _StartError(
            f"server {server.plan.index} exited while starting{server.describe_exit()}"
        )

    starting = asyncio.ensure_future(
        asyncio.wait_for(asyncio.gather(*(start(server) for server in servers)), START_TIMEOUT_S)
    )
    stopping = asyncio.ensure_future(stop.wait())
    try:
        await asyncio.wait({starting, stopping}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        stopping.cancel()
    if not starting.done():
        starting.cancel()
        with contextlib.suppress(asyncio.CancelledError, _StartError):
            await starting
        raise _StartError("")
    try:
        return list(starting.result())
    except TimeoutError:
        raise _StartError(f"the servers did not start within {START_TIMEOUT_S:g} s") from None


async def _until_stopped(stop: asyncio.Event, servers: Sequence[ServerProcess]) -> int:
    """Wait for SIGTERM/SIGINT, or for a server to exit; the exit status.

    A server that exits 0 was signalled (a terminal's Ctrl-C reaches the whole process group,
    often before ours arrives): stop cleanly. Any other exit is a crash: stop with status 1.
    """
    exits = {asyncio.ensure_future(server.exited()): server for server in servers}
    stopping = asyncio.ensure_future(stop.wait())
    try:
        done, _ = await asyncio.wait({stopping, *exits}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for waiting in (stopping, *exits):
            waiting.cancel()
    ended = [exits[waiting] for waiting in done if waiting in exits]
    if stop.is_set() or not ended:
        return 0
    server = ended[0]
    if server.process.exitcode == 0:
        log.info(f"server {server.plan.index} stopped: stopping", extra={"pid": server.pid})
        return 0
    log.error(
        f"server {server.plan.index} died{server.describe_exit()}: stopping with exit status 1, "
        "for a supervisor to restart mcpd",
        extra={"pid": server.pid, "returncode": server.process.exitcode},
    )
    return 1


# --- the server process ----------------------------------------------------------------------


def _server_main(
    plan: ServerPlan, settings: Settings, pipe: multiprocessing.connection.Connection
) -> None:
    """A forked server's whole life: serve until told to stop; its exit status."""
    _die_with_parent()
    from mcpd.runtime.telemetry import configure_telemetry

    # The OpenTelemetry SDK's standard variable; read here, at the edge, and nowhere else.
    shutdown_telemetry = configure_telemetry(
        "mcpd-all", otlp_endpoint=os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT")
    )
    try:
        status = asyncio.run(_serve(plan, settings, pipe))
    finally:
        shutdown_telemetry()
    sys.exit(status)


async def _serve(
    plan: ServerPlan, settings: Settings, pipe: multiprocessing.connection.Connection
) -> int:
    from cli.role_server import run_until_stopped, serve_roles

    stop = stop_on_signals()
    link = _SupervisorLink(pipe, stop)
    async with AsyncExitStack() as stack:
        try:
            if plan.primary:
                served = await serve_roles(
                    stack, settings, ROLES, plan=plan, migrated=link.migrated
                )
            elif await link.proceed():
                served = await serve_roles(stack, settings, ROLES, plan=plan, migrate=False)
            else:
                return 0
        except (McpdError, OSError) as exc:
            link.send(Failed(plan.index, _reason(exc)))
            return 1
        # The primary's lines stand for every server's: they all serve the same.
        link.send(Ready(plan.index, os.getpid(), served.banner if plan.primary else ()))
        link.watch(served)
        await run_until_stopped(stop)
    return 0


def _reason(exc: Exception) -> str:
    # The reason too: what a supervisor's log is searched for (KEYS_REQUIRED).
    if isinstance(exc, McpdError):
        return f"{exc.message} ({exc.reason})"
    return str(exc)


class _SupervisorLink:
    """A server's side of its pipe to the supervisor."""

    def __init__(self, pipe: multiprocessing.connection.Connection, stop: asyncio.Event) -> None:
        self._pipe = pipe
        self._stop = stop

    def send(self, message: Message) -> None:
        with contextlib.suppress(OSError):
            self._pipe.send(message)

    async def migrated(self) -> None:
        self.send(Migrated())

    async def proceed(self) -> bool:
        """Wait for Proceed; False when told to stop first, or when the supervisor is gone."""
        loop = asyncio.get_running_loop()
        told: asyncio.Future[bool] = loop.create_future()

        def readable() -> None:
            try:
                message = self._pipe.recv()
            except (EOFError, OSError):
                message = None
            if not told.done():
                told.set_result(isinstance(message, Proceed))

        loop.add_reader(self._pipe.fileno(), readable)
        stopping: asyncio.Future[bool] = asyncio.ensure_future(self._stop.wait())
        try:
            await asyncio.wait({told, stopping}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            stopping.cancel()
            loop.remove_reader(self._pipe.fileno())
        return told.done() and told.result()

    def watch(self, served: Served) -> None:
        """Open the gateway when told to; stop when the supervisor is gone (its end of the pipe
        closes)."""
        loop = asyncio.get_running_loop()

        def readable() -> None:
            try:
                if isinstance(self._pipe.recv(), Open) and served.gate is not None:
                    served.gate.open()
            except (EOFError, OSError):
                loop.remove_reader(self._pipe.fileno())
                if not self._stop.is_set():
                    log.warning("the supervising mcpd process is gone: stopping")
                    self._stop.set()

        loop.add_reader(self._pipe.fileno(), readable)


def _die_with_parent() -> None:
    """Linux: have the kernel SIGKILL this process when its parent dies (best effort; the
    pipe's EOF stops it on every platform)."""
    if not sys.platform.startswith("linux"):
        return
    import ctypes

    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


def _announce(
    settings: Settings, servers: Sequence[ServerProcess], started: Sequence[Ready]
) -> None:
    from cli.banner import banner

    lines = banner(
        settings,
        roles=ROLES,
        http=servers[0].plan.http_addr,
        grpc=servers[0].plan.grpc_addr,
        extra=[line for ready in started for line in ready.banner],
    )
    pids = ", ".join(str(server.pid) for server in servers)
    lines.append(f"  processes  supervisor {os.getpid()}, {len(servers)} servers ({pids})")
    print("\n".join(lines), file=sys.stderr, flush=True)
