"""Child processes of `mcpd serve` and the socket pair each one talks to its parent over.

`mcpd serve` (every role) runs some of its work in children of its own, each a
`mcpd serve --service ROLE --supervisor-fd N`: the HTTP gateway (`cli.gateway_process`) and the
ingest workers (`cli.ingest_workers`). A child gets the parent's resolved settings as `MCPD_*`
variables, so both read one configuration, and the two talk over a socket pair, one JSON object
per line; what they say is the child's business (each module documents its messages).

A child dies with its parent: on Linux the kernel SIGKILLs it when the parent dies
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
import signal
import socket
import sys
from collections.abc import Callable, Mapping
from enum import StrEnum
from pathlib import Path
from typing import Any

from mcpd.runtime.config import KEYS, Settings, env_var

log = logging.getLogger("mcpd.serve")

# The hidden `mcpd serve` option that makes a process the supervised child of a parent.
SUPERVISOR_FD_OPTION = "--supervisor-fd"
# How long a child may take to stop after SIGTERM before it is SIGKILLed (uvicorn lets open
# connections finish for 5 s; an ingest worker commits what is queued).
STOP_GRACE_S = 10.0
_PR_SET_PDEATHSIG = 1

Message = dict[str, Any]


def unsupported_reason() -> str | None:
    """Why `mcpd serve` cannot run children here (None when it can)."""
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


def private_host(address: str) -> str:
    """The loopback host of `address`'s family: where a child listens on a port only this
    machine's processes dial (a wildcard or a name dials as IPv4)."""
    return "[::1]" if dialable(address).startswith("[") else "127.0.0.1"


def encode(message: Mapping[str, object]) -> bytes:
    """One message as the line the socket pair carries."""
    return json.dumps(message, separators=(",", ":")).encode() + b"\n"


class ChildProcess:
    """The parent's side of one child: spawns `mcpd serve --service ROLE`, talks to it, stops
    it."""

    def __init__(self, role: str, settings: Settings, config_path: Path | None) -> None:
        self.role = role
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

    @property
    def returncode(self) -> int | None:
        """The exit status once the child has exited (negative: killed by that signal)."""
        assert self._process is not None, "spawned first"
        return self._process.returncode

    async def spawn(self) -> None:
        """Start the child process; it imports and then waits for what the parent says.

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
                self.role,
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
        log.info(f"{self.role} process started", extra={"pid": self._process.pid})

    async def send(self, message: Mapping[str, object]) -> None:
        """Say `message` to the child; ConnectionError when it is gone."""
        assert self._writer is not None, "spawned first"
        self._writer.write(encode(message))
        await self._writer.drain()

    def send_nowait(self, message: Mapping[str, object]) -> None:
        """Say `message` to the child without waiting for the socket (a gone child is noticed
        by whoever waits for it)."""
        if self._writer is not None and not self._writer.is_closing():
            self._writer.write(encode(message))

    async def receive(self) -> Message | None:
        """The child's next message; None once it is gone (its end closed)."""
        assert self._reader is not None, "spawned first"
        try:
            line = await self._reader.readline()
        except ConnectionError:
            return None
        if not line:
            return None
        message: Message = json.loads(line)
        return message

    async def gone(self, what: str) -> OSError:
        """The error to raise when the child said nothing where it should have: waits a moment
        for its exit status, to report it."""
        assert self._process is not None, "spawned first"
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._process.wait(), 5.0)
        return OSError(self.failure(what))

    def failure(self, what: str) -> str:
        """`what` happened to the child, for an error message."""
        return f"the {self.role} process {self.pid} {what}{self.describe_exit()}"

    def describe_exit(self) -> str:
        """How the child ended, for a message (empty while it runs)."""
        assert self._process is not None, "spawned first"
        return describe_exit(self._process)

    async def wait(self) -> int:
        """The child's exit status, once it exits (negative: killed by that signal)."""
        assert self._process is not None, "spawned first"
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
                        f"{self.role} process did not stop in time: killing it",
                        extra={"pid": process.pid, "grace_s": STOP_GRACE_S},
                    )
                    with contextlib.suppress(ProcessLookupError):
                        process.kill()
                    await process.wait()
            log.info(
                f"{self.role} process stopped",
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

    async def first(self, stop: asyncio.Event) -> Message | None:
        """The parent's first message; None when told to stop first, or when the parent is
        gone."""
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
        message: Message = json.loads(line)
        return message

    def send_nowait(self, message: Mapping[str, object]) -> None:
        """Say `message` to the parent without waiting for the socket (a gone parent is
        noticed by `watch`)."""
        if not self._writer.is_closing():
            self._writer.write(encode(message))

    async def send(self, message: Mapping[str, object]) -> None:
        """Say `message` to the parent."""
        self._writer.write(encode(message))
        await self._writer.drain()

    def watch(self, stop: asyncio.Event, on_message: Callable[[Message], None]) -> None:
        """Hand each later message to `on_message`; set `stop` when the parent is gone (its end
        of the socket pair closes)."""

        async def until_eof() -> None:
            with contextlib.suppress(ConnectionError):
                while line := await self._reader.readline():
                    on_message(json.loads(line))
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
