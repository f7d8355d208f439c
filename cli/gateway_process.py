"""The HTTP gateway of `mcpd serve` in a child process of its own, supervised by the parent.

`mcpd serve` (every role) keeps storage and the gRPC services in its own process and runs the
gateway (REST, OTLP/HTTP, MCP) as a child, `mcpd serve --service gateway`, so the gateway's
Python work (JSON decoding, transcoding, OTLP/HTTP relaying) runs on another core than the
ingest pipeline. The child gets the parent's resolved settings as `MCPD_*` variables, so both
read one configuration, and talks to the parent over a socket pair, one JSON line at a time:

- parent -> child, once the parent's gRPC server serves: where its roles are found and a token
  for the start-up probe, `{"grpc": "127.0.0.1:50051", "roles": [...], "probe": "..."}`. The
  child binds HTTP only then, so it never accepts a request its upstream cannot serve;
- child -> parent, once HTTP is bound: `{"http": "127.0.0.1:8080"}` (the real port when the
  configured one is 0). The parent then waits for `GET /healthz` 200 and announces itself;
- parent -> child, once announced: `{"open": true}`. Until then the child holds every request
  but the parent's probe (`StartGate`), so whoever sees the gateway answer also finds the
  banner printed, as when both ran in one process.

The child is spawned before the parent imports its services and opens storage (`cli.main`), so
its start-up (mostly imports, about a second) overlaps the parent's instead of adding to it.

The child dies with the parent: on Linux the kernel SIGKILLs it when the parent dies
(PR_SET_PDEATHSIG, set by the child itself: no pre-exec hook in a threaded parent), and on every
platform it stops when its end of the socket pair reads EOF, which the kernel delivers however
the parent died, even before the child could set the death signal.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import secrets
import signal
import socket
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING

from cli.role_names import GRPC_ROLES
from mcpd.runtime.config import KEYS, Settings, env_var

if TYPE_CHECKING:
    from starlette.types import ASGIApp, Receive, Scope, Send

log = logging.getLogger("mcpd.serve")

# The hidden `mcpd serve` option that makes a gateway the supervised child of a parent.
SUPERVISOR_FD_OPTION = "--supervisor-fd"
# How long the child may take to bind HTTP and answer /healthz (its start-up is mostly imports,
# which a loaded machine can stretch a lot), and to stop after SIGTERM before it is SIGKILLed
# (uvicorn lets open connections finish for 5 s).
START_TIMEOUT_S = 60.0
STOP_GRACE_S = 10.0
_PROBE_INTERVAL_S = 0.02
_PR_SET_PDEATHSIG = 1
# The header that lets the parent's start-up probe through the child's StartGate.
PROBE_HEADER = "x-mcpd-start-probe"


def unsupported_reason() -> str | None:
    """Why the gateway cannot run as a child process here (None when it can)."""
    if os.name != "posix":
        return "child processes need a POSIX system (socket pairs passed by descriptor)"
    if not sys.executable or getattr(sys, "frozen", False):
        return "no Python interpreter to start the child with (embedded or frozen build)"
    return None


def child_environment(settings: Settings, base: Mapping[str, str]) -> dict[str, str]:
    """`base` plus every resolved setting as its `MCPD_*` variable, so the child's configuration
    is the parent's whatever file, environment or defaults it came from (the environment is the
    strongest layer a process reads; an empty value unsets an optional key)."""
    env = dict(base)
    for key in KEYS:
        section, _, name = key.rpartition(".")
        owner = getattr(settings, section) if section else settings
        env[env_var(key)] = _as_text(getattr(owner, name))
    return env


def _as_text(value: object) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, StrEnum):
        return value.value
    if isinstance(value, float):
        return repr(value)
    return str(value)


def dialable(address: str) -> str:
    """`address` as a peer on this machine connects to it: a wildcard host becomes loopback."""
    host, _, port = address.rpartition(":")
    if host in ("", "0.0.0.0"):
        host = "127.0.0.1"
    elif host == "[::]":
        host = "[::1]"
    return f"{host}:{port}"


async def spawn_beside(
    settings: Settings, roles: Sequence[str], config_path: Path | None
) -> GatewayChild | None:
    """The gateway's child process when `roles` (of one `mcpd serve`) hold the gateway and gRPC
    roles, `gateway.separate_process` is on, and a child can run here; else None (the gateway,
    if any, runs in this process)."""
    if "gateway" not in roles or not any(role in GRPC_ROLES for role in roles):
        return None
    if not settings.gateway.separate_process:
        return None
    reason = unsupported_reason()
    if reason is not None:
        log.info("the gateway runs in this process", extra={"reason": reason})
        return None
    child = GatewayChild(settings, config_path)
    await child.spawn()
    return child


class GatewayChild:
    """The parent's side: spawns `mcpd serve --service gateway`, starts it, stops it."""

    def __init__(self, settings: Settings, config_path: Path | None) -> None:
        self._settings = settings
        self._config_path = config_path
        self._process: asyncio.subprocess.Process | None = None
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._stopped = False

    @property
    def pid(self) -> int:
        assert self._process is not None, "spawned first"
        return self._process.pid

    async def spawn(self) -> None:
        """Start the child process; it imports and then waits for `start`.

        Spawned from the event loop's thread (the main thread, which lives as long as the
        process): PR_SET_PDEATHSIG fires when the thread that forked the child exits.
        """
        ours, theirs = socket.socketpair()
        try:
            config = ["--config", str(self._config_path)] if self._config_path else []
            # -P: the working directory is not put on sys.path, so a `cli/` or `gateway/`
            # directory where the operator happens to run mcpd cannot shadow mcpd's own.
            self._process = await asyncio.create_subprocess_exec(
                sys.executable,
                "-P",
                "-m",
                "cli.main",
                *config,
                "serve",
                "--service",
                "gateway",
                SUPERVISOR_FD_OPTION,
                str(theirs.fileno()),
                env=child_environment(self._settings, os.environ),
                stdin=asyncio.subprocess.DEVNULL,
                pass_fds=(theirs.fileno(),),
            )
        except BaseException:
            ours.close()
            raise
        finally:
            # Only the child holds its end: its EOF then means the child is gone, and ours
            # reaching EOF in the child means we are.
            theirs.close()
        self._reader, self._writer = await asyncio.open_unix_connection(sock=ours)
        log.info("gateway process started", extra={"pid": self._process.pid})

    async def start(self, grpc_address: str, roles: Sequence[str]) -> str:
        """Tell the child where `roles` are served, wait until it is healthy; its HTTP address.

        Raises OSError when the child exits first or is not healthy within START_TIMEOUT_S.
        """
        assert self._process is not None, "spawned first"
        assert self._reader is not None, "spawned first"
        assert self._writer is not None, "spawned first"
        deadline = time.monotonic() + START_TIMEOUT_S
        token = secrets.token_urlsafe(16)
        message = {"grpc": dialable(grpc_address), "roles": list(roles), "probe": token}
        try:
            self._writer.write(json.dumps(message).encode() + b"\n")
            await self._writer.drain()
            line = await asyncio.wait_for(self._reader.readline(), START_TIMEOUT_S)
        except (ConnectionError, TimeoutError):
            line = b""
        if not line:
            # Its end closed: it is exiting; wait a moment for its status, to report it.
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._process.wait(), 5.0)
            raise OSError(self._failure("did not start"))
        http_address = str(json.loads(line)["http"])
        await self._until_healthy(http_address, token, deadline)
        return http_address

    async def open(self) -> None:
        """Let the child serve every request (once this process has announced itself)."""
        assert self._writer is not None, "spawned first"
        with contextlib.suppress(ConnectionError):  # it died: `wait` reports that
            self._writer.write(json.dumps({"open": True}).encode() + b"\n")
            await self._writer.drain()

    async def _until_healthy(self, http_address: str, token: str, deadline: float) -> None:
        import httpx  # the parent imports it anyway (MCP); the child never needs it here

        url = f"http://{dialable(http_address)}/healthz"
        last = "no answer"
        headers = {PROBE_HEADER: token}
        async with httpx.AsyncClient(trust_env=False, timeout=2.0, headers=headers) as client:
            while True:
                assert self._process is not None
                if self._process.returncode is not None:
                    raise OSError(self._failure("exited while starting"))
                try:
                    response = await client.get(url)
                    if response.status_code == 200:
                        return
                    last = f"HTTP {response.status_code}: {response.text[:200]}"
                except httpx.HTTPError as exc:
                    last = f"{type(exc).__name__}: {exc}"
                if time.monotonic() >= deadline:
                    raise OSError(self._failure(f"was not healthy at {url} ({last})"))
                await asyncio.sleep(_PROBE_INTERVAL_S)

    def _failure(self, what: str) -> str:
        assert self._process is not None
        return f"the gateway process {self._process.pid} {what}{describe_exit(self._process)}"

    def describe_exit(self) -> str:
        """How the child ended, for a message (empty while it runs)."""
        assert self._process is not None
        return describe_exit(self._process)

    async def wait(self) -> int:
        """The child's exit status, once it exits (negative: killed by that signal)."""
        assert self._process is not None
        return await self._process.wait()

    async def stop(self) -> None:
        """SIGTERM, then SIGKILL after STOP_GRACE_S; idempotent."""
        process = self._process
        if process is None or self._stopped:
            return
        self._stopped = True
        try:
            if process.returncode is None:
                with contextlib.suppress(ProcessLookupError):
                    process.terminate()
                try:
                    await asyncio.wait_for(process.wait(), STOP_GRACE_S)
                except TimeoutError:
                    log.warning(
                        "gateway process did not stop in time: killing it",
                        extra={"pid": process.pid, "grace_s": STOP_GRACE_S},
                    )
                    with contextlib.suppress(ProcessLookupError):
                        process.kill()
                    await process.wait()
            log.info(
                "gateway process stopped",
                extra={"pid": process.pid, "returncode": process.returncode},
            )
        finally:
            if self._writer is not None:
                self._writer.close()
                self._writer = None


def describe_exit(process: asyncio.subprocess.Process) -> str:
    """How `process` ended, for a message (empty while it runs)."""
    code = process.returncode
    if code is None:
        return ""
    if code < 0:
        with contextlib.suppress(ValueError):
            return f" (killed by {signal.Signals(-code).name})"
    return f" (exit status {code})"


@dataclass(frozen=True)
class Upstream:
    """Where the parent serves its gRPC roles, and the token of its start-up probe."""

    grpc: str
    roles: tuple[str, ...]
    probe: str


class StartGate:
    """ASGI middleware of the child: holds requests until the parent has announced itself,
    letting through only the parent's start-up probe (the request carrying its token)."""

    def __init__(self, app: ASGIApp, token: str) -> None:
        self._app = app
        self._probe = (PROBE_HEADER.encode(), token.encode())
        self._open = asyncio.Event()

    def open(self) -> None:
        self._open.set()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if (
            not self._open.is_set()
            and scope["type"] != "lifespan"
            and self._probe not in scope.get("headers", ())
        ):
            await self._open.wait()
        await self._app(scope, receive, send)


class ParentLink:
    """The child's side of the socket pair."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._reader = reader
        self._writer = writer
        self._watch: asyncio.Task[None] | None = None

    @classmethod
    async def open(cls, fd: int) -> ParentLink:
        sock = socket.socket(fileno=fd)
        reader, writer = await asyncio.open_unix_connection(sock=sock)
        return cls(reader, writer)

    async def upstream(self, stop: asyncio.Event) -> Upstream | None:
        """What the parent says once its gRPC server serves; None when told to stop first, or
        when the parent is gone."""
        reading = asyncio.ensure_future(self._reader.readline())
        stopping = asyncio.ensure_future(stop.wait())
        try:
            await asyncio.wait({reading, stopping}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            stopping.cancel()
            if not reading.done():
                reading.cancel()
        if not reading.done() or reading.cancelled():
            return None
        line = reading.result()
        if not line:
            log.warning("the supervising mcpd process is gone: stopping")
            return None
        message = json.loads(line)
        return Upstream(
            grpc=str(message["grpc"]), roles=tuple(message["roles"]), probe=str(message["probe"])
        )

    async def ready(self, http_address: str) -> None:
        self._writer.write(json.dumps({"http": http_address}).encode() + b"\n")
        await self._writer.drain()

    def watch(self, stop: asyncio.Event, gate: StartGate) -> None:
        """Open `gate` when the parent says so; set `stop` when the parent is gone (its end of
        the socket pair closes)."""

        async def until_eof() -> None:
            with contextlib.suppress(ConnectionError):
                while line := await self._reader.readline():
                    if json.loads(line).get("open"):
                        gate.open()
            if not stop.is_set():
                log.warning("the supervising mcpd process is gone: stopping")
                stop.set()

        self._watch = asyncio.ensure_future(until_eof())

    def close(self) -> None:
        if self._watch is not None:
            self._watch.cancel()
        self._writer.close()


def die_with_parent() -> None:
    """Linux: have the kernel SIGKILL this process when its parent dies (best effort; the
    socket pair's EOF stops the child on every platform)."""
    if not sys.platform.startswith("linux"):
        return
    import ctypes

    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
