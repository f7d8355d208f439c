"""The gateway's access check: one check per method and credential per interval, refusals
never remembered, the table bounded."""

from __future__ import annotations

from collections.abc import AsyncIterator

import grpc
import grpc.aio
import pytest

from gateway.access import AccessCheck
from gateway.otlp import LOGS, TRACES
from gateway.tests.otlp_collector import Upstream, running_collector


@pytest.fixture
async def upstream() -> AsyncIterator[Upstream]:
    async with running_collector() as running:
        yield running


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def bearer(key: str) -> tuple[tuple[str, str], ...]:
    return (("authorization", f"Bearer {key}"),)


async def test_a_grant_lasts_its_interval(upstream: Upstream) -> None:
    clock = Clock()
    access = AccessCheck(deadline_s=5.0, ttl_s=5.0, monotonic=clock)
    await access.require(upstream.channel, TRACES.grpc_path, bearer("k"))
    clock.now += 4.9
    await access.require(upstream.channel, TRACES.grpc_path, bearer("k"))
    assert upstream.access.checks == [TRACES.grpc_path]
    clock.now += 0.1
    await access.require(upstream.channel, TRACES.grpc_path, bearer("k"))
    assert upstream.access.checks == [TRACES.grpc_path] * 2


async def test_grants_are_per_method_and_credential(upstream: Upstream) -> None:
    access = AccessCheck(deadline_s=5.0, monotonic=Clock())
    for path, metadata in [
        (TRACES.grpc_path, bearer("a")),
        (TRACES.grpc_path, bearer("b")),
        (LOGS.grpc_path, bearer("a")),
        (TRACES.grpc_path, ()),  # no credential (local mode) is a credential of its own
        (TRACES.grpc_path, bearer("a")),
    ]:
        await access.require(upstream.channel, path, metadata)
    traces, logs = TRACES.grpc_path, LOGS.grpc_path
    assert upstream.access.checks == [traces, traces, logs, traces]


async def test_a_refusal_is_raised_and_not_remembered(upstream: Upstream) -> None:
    access = AccessCheck(deadline_s=5.0, monotonic=Clock())
    for _ in range(2):
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await access.require(upstream.channel, TRACES.grpc_path, bearer("wrong"))
        assert caught.value.code() == grpc.StatusCode.UNAUTHENTICATED
    assert upstream.access.checks == [TRACES.grpc_path] * 2


async def test_the_table_keeps_the_newest_grants(upstream: Upstream) -> None:
    access = AccessCheck(deadline_s=5.0, max_grants=2, monotonic=Clock())
    for key in ("a", "b", "c", "c", "b", "a"):
        await access.require(upstream.channel, TRACES.grpc_path, bearer(key))
    # a was pushed out by c; b and c were still held.
    assert len(upstream.access.checks) == 4
