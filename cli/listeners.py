"""The ports one `mcpd serve` shares among its server processes.

Every server process of `mcpd serve` binds the same HTTP, gRPC and OTLP/gRPC ports with
SO_REUSEPORT, and the kernel spreads incoming connections over them (the pattern gRPC's Python
documentation recommends for using every core). SO_REUSEPORT alone would also let a second
daemon of the same user join those ports silently and take part of the traffic, so the
supervisor first proves each port free with a probe (SO_REUSEADDR only, so a restart is not
refused for the last run's connections in TIME_WAIT), resolves a port 0 to the one it got, and
holds a socket on it with SO_REUSEPORT only (bound, never listening, so it takes no connection)
until its servers listen. The servers can join the hold; another daemon's probe cannot (it
would, were the hold also SO_REUSEADDR and not listening). Two daemons could still each pass
the probe of one port before either holds it, so probe and hold happen under a lock the user's
daemons on this host share (a Linux abstract Unix socket, freed by the kernel with its process).
"""

from __future__ import annotations

import contextlib
import errno
import os
import socket
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

__all__ = ["Reservation", "reserve", "reuse_port_socket", "with_port"]


def _socket(address: str, *, reuse_port: bool, reuse_addr: bool = True) -> socket.socket:
    host, _, port = address.rpartition(":")
    family, kind, proto, _, sockaddr = socket.getaddrinfo(
        host.strip("[]") or None, int(port), type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
    )[0]
    # With its protocol named (IPPROTO_TCP), as asyncio needs to turn Nagle's algorithm off on
    # the connections it accepts: without it a small response waits for a delayed ACK.
    sock = socket.socket(family, kind, proto)
    try:
        if reuse_addr:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if reuse_port:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        if family == socket.AF_INET6:
            sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
        sock.bind(sockaddr)
    except OSError as exc:
        sock.close()
        raise OSError(f"cannot listen on {address}: {exc.strerror or exc}") from exc
    return sock


def reuse_port_socket(address: str) -> socket.socket:
    """A TCP socket bound to `address` (`host:port`) with SO_REUSEPORT, not yet listening."""
    return _socket(address, reuse_port=True)


def with_port(address: str, port: int) -> str:
    """`address` with its port replaced."""
    return f"{address.rpartition(':')[0]}:{port}"


@dataclass
class Reservation:
    """Ports proven free and held for the server processes (see the module docstring):
    `addresses` are the asked ones with every port 0 resolved."""

    addresses: list[str]
    _held: list[socket.socket]

    def release(self) -> None:
        """Stop holding the ports (once the servers listen on them). Idempotent."""
        for sock in self._held:
            sock.close()
        self._held.clear()


# How long a start waits for another daemon's reservation (a few binds) before giving up.
_RESERVING_WAIT_S = 10.0


@contextlib.contextmanager
def _reserving(name: str | None = None) -> Iterator[None]:
    """Held by one daemon of this user at a time while it proves and holds its ports."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as mutex:
        address = "\0" + (name or f"mcpd-reserving-ports-{os.getuid()}")
        deadline = time.monotonic() + _RESERVING_WAIT_S
        while True:
            try:
                mutex.bind(address)
                break
            except OSError as exc:
                if exc.errno != errno.EADDRINUSE or time.monotonic() > deadline:
                    raise OSError(f"cannot reserve ports: {exc.strerror or exc}") from exc
                time.sleep(0.005)
        yield


def reserve(addresses: Sequence[str], *, mutex: str | None = None) -> Reservation:
    """Prove every address free and hold it; raises OSError naming the first busy one. `mutex`
    names the lock shared with other daemons (tests give their own)."""
    with _reserving(mutex):
        return _reserve(addresses)


def _reserve(addresses: Sequence[str]) -> Reservation:
    held: list[socket.socket] = []
    resolved: list[str] = []
    try:
        for address in addresses:
            with contextlib.closing(_socket(address, reuse_port=False)) as probe:
                port = int(probe.getsockname()[1])
            concrete = with_port(address, port)
            held.append(_socket(concrete, reuse_port=True, reuse_addr=False))
            resolved.append(concrete)
    except BaseException:
        for sock in held:
            sock.close()
        raise
    return Reservation(resolved, held)
