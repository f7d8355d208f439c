"""The ports `mcpd serve` shares among its server processes: proven free, held, shared."""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import threading
import time

import pytest

from cli.listeners import Reservation, reserve, reuse_port_socket, with_port


def test_port_zero_is_resolved_once_and_held_until_released() -> None:
    reservation = reserve(["127.0.0.1:0", "127.0.0.1:0"])
    first, second = reservation.addresses
    assert first != second
    assert all(
        address.startswith("127.0.0.1:") and not address.endswith(":0")
        for address in reservation.addresses
    )
    # Held: a plain bind (another program, another daemon) is refused while it is.
    with socket.socket() as other, pytest.raises(OSError, match="Address already in use"):
        other.bind(("127.0.0.1", int(first.rpartition(":")[2])))
    # The server processes bind it with SO_REUSEPORT and listen.
    servers = [reuse_port_socket(first), reuse_port_socket(first)]
    for server in servers:
        server.listen()
    reservation.release()
    reservation.release()  # idempotent
    with socket.create_connection(("127.0.0.1", int(first.rpartition(":")[2])), timeout=5):
        pass
    for server in servers:
        server.close()


def test_a_port_something_listens_on_is_refused_naming_it() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        address = f"127.0.0.1:{taken.getsockname()[1]}"
        with pytest.raises(OSError, match=f"cannot listen on {address}"):
            reserve(["127.0.0.1:0", address])


def test_a_running_daemons_shared_port_is_refused_too() -> None:
    # Another daemon's servers listen with SO_REUSEPORT: a SO_REUSEPORT bind would join them,
    # the plain probe does not.
    with reuse_port_socket("127.0.0.1:0") as running:
        running.listen()
        address = with_port("127.0.0.1:0", running.getsockname()[1])
        with pytest.raises(OSError, match=f"cannot listen on {address}"):
            reserve([address])


def test_a_port_another_daemon_holds_is_refused_before_its_servers_listen() -> None:
    held = reserve(["127.0.0.1:0"])
    try:
        with pytest.raises(OSError, match=f"cannot listen on {held.addresses[0]}"):
            reserve(held.addresses)
    finally:
        held.release()


def _reserve_at_once(address: str, racers: int, mutex: str) -> list[Reservation]:
    """What `racers` threads reserving `address` together won."""
    start = threading.Barrier(racers)
    won: list[Reservation] = []

    def race() -> None:
        start.wait()
        with contextlib.suppress(OSError):
            won.append(reserve([address], mutex=mutex))

    threads = [threading.Thread(target=race) for _ in range(racers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return won


def test_daemons_reserving_one_port_at_once_leave_it_to_one() -> None:
    for _ in range(20):
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            address = with_port("127.0.0.1:0", probe.getsockname()[1])
        won = _reserve_at_once(address, 6, mutex=f"mcpd-test-reserving-{os.getpid()}")
        assert len(won) == 1
        won[0].release()


def test_a_reservation_waits_for_another_daemons_to_end() -> None:
    mutex = f"mcpd-test-waiting-{os.getpid()}"
    done: list[Reservation] = []
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as other:
        other.bind("\0" + mutex)
        waiting = threading.Thread(
            target=lambda: done.append(reserve(["127.0.0.1:0"], mutex=mutex))
        )
        waiting.start()
        time.sleep(0.2)
        assert done == []
    waiting.join(timeout=5)
    assert len(done) == 1
    assert not done[0].addresses[0].endswith(":0")
    done[0].release()


def test_with_port_keeps_the_host() -> None:
    assert with_port("[::1]:0", 4317) == "[::1]:4317"
    assert with_port("0.0.0.0:8080", 9000) == "0.0.0.0:9000"


async def test_connections_accepted_on_a_shared_socket_skip_nagle() -> None:
    # asyncio turns Nagle's algorithm off only on TCP sockets that name their protocol: without
    # it a small response waits for the client's delayed ACK.
    accepted: asyncio.Queue[int] = asyncio.Queue()

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        sock = writer.get_extra_info("socket")
        await accepted.put(sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
        writer.close()

    shared = reuse_port_socket("127.0.0.1:0")
    server = await asyncio.start_server(serve, sock=shared)
    async with server:
        port = shared.getsockname()[1]
        _, writer = await asyncio.open_connection("127.0.0.1", port)
        assert await asyncio.wait_for(accepted.get(), 10) != 0
        writer.close()
