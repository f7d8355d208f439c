"""Claims that run at the same time: each leases attempts no other claim leased, and as many as
it asked for while enough are offerable, on every backend."""

from __future__ import annotations

import asyncio

from services.orchestrator.tests.daemon import Daemon

ONE_TASK = {"steps": [{"id": "only", "kind": "task"}]}


async def test_concurrent_claims_lease_distinct_attempts_and_fill_their_batches(
    daemon: Daemon,
) -> None:
    daemon.define("one", ONE_TASK)
    runs = [daemon.start("one") for _ in range(24)]

    leased: list[str] = []
    for _ in range(2):
        batches = await asyncio.gather(
            *(daemon.claim(None, worker_id=f"w{n}", most=3) for n in range(4))
        )
        assert [len(batch) for batch in batches] == [3, 3, 3, 3]
        leased += [lease.run_id for batch in batches for lease in batch]

    assert sorted(leased) == sorted(runs)
    owners = {daemon.detail(run_id).attempts[0].lease_owner for run_id in runs}
    assert owners == {"w0", "w1", "w2", "w3"}
    assert await daemon.claim(None, most=3) == []


async def test_a_claim_with_nothing_to_lease_waits_for_no_sqlite_writer(
    sqlite_daemon: Daemon,
) -> None:
    """On SQLite a claim looks before it writes: while another writer holds the database, a
    claim that finds nothing answers at once, and one that finds work queues behind it."""
    sqlite_daemon.define("one", ONE_TASK)
    with sqlite_daemon.store.engine.begin() as writer:
        writer.exec_driver_sql("SELECT 1")  # the write transaction has begun: the lock is held
        assert await asyncio.wait_for(sqlite_daemon.claim(None, most=1), timeout=5) == []
    run_id = sqlite_daemon.start("one")
    with sqlite_daemon.store.engine.begin() as writer:
        writer.exec_driver_sql("SELECT 1")
        claiming = asyncio.ensure_future(sqlite_daemon.claim(None, most=1))
        await asyncio.sleep(0.3)
        assert not claiming.done()
    [lease] = await asyncio.wait_for(claiming, timeout=5)
    assert lease.run_id == run_id
