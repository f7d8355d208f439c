"""Claims woken across the server processes of one daemon: a notify in one wakes a claim held in
a sibling (over a real Unix datagram socket), and one for another daemon's data directory does
not."""

from __future__ import annotations

import asyncio
import uuid

from services.orchestrator.wakeups import Siblings, Wakeups


async def test_a_notify_wakes_the_claims_held_in_a_sibling() -> None:
    daemon = f"/data/{uuid.uuid4().hex}"
    loop = asyncio.get_running_loop()
    here, there = Wakeups(Siblings(daemon, 0, 2)), Wakeups(Siblings(daemon, 1, 2))
    stranger = Wakeups(Siblings(f"/data/{uuid.uuid4().hex}", 1, 2))
    for wakeups in (here, there, stranger):
        wakeups.listen(loop)
    try:
        with there.listening() as woken, stranger.listening() as unrelated:
            here.notify()
            await asyncio.wait_for(woken.wait(), timeout=5)
            await asyncio.sleep(0.05)
            assert not unrelated.is_set()
        with here.listening() as back:
            there.notify()
            await asyncio.wait_for(back.wait(), timeout=5)
    finally:
        for wakeups in (here, there, stranger):
            wakeups.close(loop)


async def test_a_sibling_not_listening_is_skipped() -> None:
    alone = Wakeups(Siblings(f"/data/{uuid.uuid4().hex}", 0, 3))
    loop = asyncio.get_running_loop()
    alone.listen(loop)
    try:
        with alone.listening() as woken:
            alone.notify()  # siblings 1 and 2 were never started
            await asyncio.wait_for(woken.wait(), timeout=5)
    finally:
        alone.close(loop)
