"""Waking the claims held open when work becomes runnable, in this process and in the sibling
server processes of one `mcpd serve`.

A transition that left an attempt offerable calls `notify` once it has committed (from
whichever thread ran it); every claim waiting in this process looks again at once, and, with
`siblings`, a datagram tells each sibling process to wake its own. A claim registers before it
looks, so work that arrives between its look and its wait still wakes it. Work made runnable
where no signal reaches (another host's replica) is found when the claim's poll interval passes.
"""

from __future__ import annotations

import asyncio
import hashlib
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager, suppress

__all__ = ["Siblings", "Wakeups"]


class Siblings:
    """The server processes of one daemon, signalled over Linux abstract Unix datagram sockets
    named by the daemon's data directory and each server's index (nothing on disk)."""

    def __init__(self, daemon: str, index: int, count: int) -> None:
        self._prefix = "mcpd-wake-" + hashlib.blake2b(daemon.encode(), digest_size=8).hexdigest()
        self._index = index
        self._count = count
        self.socket = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.socket.bind(self._address(index))
        self.socket.setblocking(False)

    def _address(self, index: int) -> str:
        return f"\0{self._prefix}-{index}"

    def signal(self) -> None:
        """Tell every sibling that work arrived; one not listening (yet, or any more) is
        skipped."""
        for index in range(self._count):
            if index != self._index:
                with suppress(OSError):
                    self.socket.sendto(b"w", self._address(index))

    def close(self) -> None:
        self.socket.close()


class Wakeups:
    """The claims waiting in this process, and the signal that work arrived."""

    def __init__(self, siblings: Siblings | None = None) -> None:
        self._lock = threading.Lock()
        self._waiting: set[tuple[asyncio.AbstractEventLoop, asyncio.Event]] = set()
        self._siblings = siblings

    def listen(self, loop: asyncio.AbstractEventLoop) -> None:
        """Wake this process's claims when a sibling signals (on `loop`, until `close`)."""
        if self._siblings is not None:
            loop.add_reader(self._siblings.socket, self._received)

    def close(self, loop: asyncio.AbstractEventLoop) -> None:
        if self._siblings is not None:
            loop.remove_reader(self._siblings.socket)
            self._siblings.close()

    def _received(self) -> None:
        assert self._siblings is not None
        with suppress(BlockingIOError):
            while self._siblings.socket.recv(16):
                pass
        self._wake_here()

    @contextmanager
    def listening(self) -> Iterator[asyncio.Event]:
        """An event set by every `notify` while the block runs (on the running loop)."""
        entry = (asyncio.get_running_loop(), asyncio.Event())
        with self._lock:
            self._waiting.add(entry)
        try:
            yield entry[1]
        finally:
            with self._lock:
                self._waiting.discard(entry)

    def notify(self) -> None:
        """Wake every listening claim, here and in the siblings; callable from any thread."""
        self._wake_here()
        if self._siblings is not None:
            self._siblings.signal()

    def _wake_here(self) -> None:
        with self._lock:
            waiting = list(self._waiting)
        for loop, event in waiting:
            with suppress(RuntimeError):  # the claim's loop has closed: nobody to wake
                loop.call_soon_threadsafe(event.set)
