"""GetScoreStats over a real grpc.aio server and a real SQLite trace store: the count and mean of
one scorer's scores in a window (a re-sent score counted once), the window it defaults to, what
it refuses, and the evaluation role's `QueryReads.score_mean`, which a score_mean monitor reads
through it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import cast

import grpc
import grpc.aio
import pytest
from google.protobuf.timestamp_pb2 import Timestamp

from mcpd.query.v1 import query_service_pb2, query_service_pb2_grpc
from mcpd.runtime.channels import open_channel
from mcpd.runtime.clock import ManualClock, epoch_nanos
from mcpd.runtime.config import GrpcSettings
from mcpd.runtime.interceptors import ErrorInterceptor
from mcpd.runtime.server import GrpcServer
from mcpd.signals.batch import SignalBatch
from mcpd.signals.messages import timestamp_of
from mcpd.storage.interfaces import AuditReads
from mcpd.storage.sql.engine import Synchronous, create_sqlite_engine
from mcpd.storage.sql.stores import SqlTraceStore
from mcpd.testing.templates import SqliteTemplates
from services.evaluation.peers import QueryReads
from services.query import SessionToolSet, registrations
from tests.libs.signals.samples import T0, score

HOUR = 3_600 * 1_000_000_000
NOW_AT = datetime(2026, 1, 4, tzinfo=UTC)
NOW = epoch_nanos(NOW_AT)


@dataclass
class Served:
    store: SqlTraceStore
    stub: query_service_pb2_grpc.QueryServiceAsyncStub
    channel: grpc.aio.Channel


@pytest.fixture
async def served(tmp_path: Path, sqlite_templates: SqliteTemplates) -> AsyncIterator[Served]:
    clock = ManualClock(NOW_AT)
    database = sqlite_templates.copy("trace", tmp_path / "trace.db")
    store = SqlTraceStore(create_sqlite_engine(database, synchronous=Synchronous.NORMAL))
    services = registrations(
        store,
        # Neither the audit log nor the session tools take part in GetScoreStats.
        cast(AuditReads, object()),
        storage="sqlite",
        signup=False,
        clock=clock,
        sessions=cast(SessionToolSet, object()),
        hash_user=lambda user: user,
    )
    settings = GrpcSettings(shutdown_grace_s=0.0)
    try:
        async with GrpcServer(
            "127.0.0.1:0", services, settings, interceptors=[ErrorInterceptor()]
        ) as server:
            channel = open_channel(f"127.0.0.1:{server.port}", settings)
            try:
                stub = query_service_pb2_grpc.QueryServiceStub(channel)
                yield Served(store, stub, channel)
            finally:
                await channel.close()
    finally:
        store.close()


def scores_at(served: Served, *rows: tuple[str, str, float, int], received_at: int) -> None:
    """Write scores (score_id, scorer_id, value, timestamp) of trace t1."""
    scores = [
        score(score_id, scorer_id=scorer_id, value=value, timestamp=at, received_at=received_at)
        for score_id, scorer_id, value, at in rows
    ]
    batch = SignalBatch(key_project="p", ingest_key=None, received_at=received_at, scores=scores)
    assert served.store.write_batches([batch]) == [True]


def request(
    scorer_id: str, start: int | None, end: int | None
) -> query_service_pb2.GetScoreStatsRequest:
    found = query_service_pb2.GetScoreStatsRequest(project="p", scorer_id=scorer_id)
    if start is not None:
        getattr(found, "from").CopyFrom(timestamp_of(start))
    if end is not None:
        found.to.CopyFrom(timestamp_of(end))
    return found


async def test_the_count_and_mean_of_a_window(served: Served) -> None:
    # Two days of scores: two hours whole in the window, a ragged edge on either side.
    start, end = T0 + 30 * 60 * 10**9, T0 + 2 * 24 * HOUR + 10 * 60 * 10**9
    scores_at(
        served,
        ("before", "relevance", 0.0, start - 1),
        ("edge", "relevance", 0.25, start),
        ("day", "relevance", 0.5, T0 + 24 * HOUR + 5),
        ("late", "relevance", 1.0, end - 1),
        ("after", "relevance", 0.0, end),
        ("other", "toxicity", 0.9, T0 + 24 * HOUR),
        received_at=NOW - HOUR,
    )
    # Sent again: another value, and into the window from outside it.
    scores_at(
        served,
        ("day", "relevance", 0.75, T0 + 24 * HOUR + 5),
        ("before", "relevance", 1.0, start + HOUR),
        received_at=NOW - HOUR + 1,
    )

    answer = await served.stub.GetScoreStats(request("relevance", start, end))

    assert answer.scorer_id == "relevance"
    assert answer.count == 4
    assert answer.mean == pytest.approx((0.25 + 0.75 + 1.0 + 1.0) / 4)
    assert (getattr(answer, "from").ToNanoseconds(), answer.to.ToNanoseconds()) == (start, end)
    toxicity = await served.stub.GetScoreStats(request("toxicity", start, end))
    assert toxicity.count == 1
    assert toxicity.mean == pytest.approx(0.9)


async def test_an_empty_window_has_no_mean(served: Served) -> None:
    answer = await served.stub.GetScoreStats(request("relevance", T0, T0 + HOUR))

    assert answer.count == 0
    assert not answer.HasField("mean")


async def test_the_window_defaults_to_the_last_day(served: Served) -> None:
    scores_at(
        served,
        ("old", "relevance", 0.0, NOW - 24 * HOUR - 1),
        ("new", "relevance", 0.5, NOW - 24 * HOUR),
        received_at=NOW,
    )

    answer = await served.stub.GetScoreStats(request("relevance", None, None))

    assert (answer.count, answer.mean) == (1, 0.5)
    assert getattr(answer, "from").ToNanoseconds() == NOW - 24 * HOUR
    assert answer.to.ToNanoseconds() == NOW


@pytest.mark.parametrize(
    ("scorer_id", "start", "end", "field"),
    [("", T0, T0 + HOUR, "scorer_id"), ("relevance", T0 + HOUR, T0, "from")],
)
async def test_what_is_refused(
    served: Served, scorer_id: str, start: int, end: int, field: str
) -> None:
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await served.stub.GetScoreStats(request(scorer_id, start, end))

    assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert field in (refused.value.details() or "")


async def test_a_score_mean_monitor_reads_it_in_one_call(served: Served) -> None:
    scores_at(
        served,
        *[(f"s{n}", "contains", float(n % 2), T0 + n * 60 * 10**9) for n in range(2_500)],
        received_at=NOW,
    )
    reads = QueryReads(served.channel, metadata=())
    start, end = Timestamp(), Timestamp()
    start.FromNanoseconds(T0)
    end.FromNanoseconds(T0 + 2_000 * 60 * 10**9)

    assert await reads.score_mean("p", "contains", start, end) == (0.5, 2_000)
    assert await reads.score_mean("p", "absent", start, end) == (None, 0)
