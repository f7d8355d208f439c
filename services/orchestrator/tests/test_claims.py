"""Claims that run at the same time: each leases attempts no other claim leased, and as many as
it asked for while enough are offerable, on every backend."""

from __future__ import annotations

import asyncio

from services.orchestrator.tests.daemon import Daemon

ONE_TASK = {"steps": [{"id": "only", "kind": "task"}]}


async def test_concurrent_claims_lease_distinct_attempts_and_fill_their_batches(
    any_daemon: Daemon,
) -> None:
    any_daemon.define("one", ONE_TASK)
    runs = [any_daemon.start("one") for _ in range(24)]

    leased: list[str] = []
    for _ in range(2):
        batches = await asyncio.gather(
            *(any_daemon.claim(None, worker_id=f"w{n}", most=3) for n in range(4))
        )
        assert [len(batch) for batch in batches] == [3, 3, 3, 3]
        leased += [lease.run_id for batch in batches for lease in batch]

    assert sorted(leased) == sorted(runs)
    owners = {any_daemon.detail(run_id).attempts[0].lease_owner for run_id in runs}
    assert owners == {"w0", "w1", "w2", "w3"}
    assert await any_daemon.claim(None, most=3) == []
