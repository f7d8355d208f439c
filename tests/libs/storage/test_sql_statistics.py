"""PlannerStatistics: the PostgreSQL trace store ANALYZEs its tables by autovacuum's rule when
the server's autovacuum is off (`mcpd.storage.sql.statistics`). Real PostgreSQL only."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from sqlalchemy import Engine, create_engine, text

from mcpd.signals.batch import SignalBatch
from mcpd.storage.sql.statistics import ANALYZE_THRESHOLD, PlannerStatistics
from mcpd.storage.sql.stores import SqlTraceStore
from tests.libs.signals.samples import T0, span
from tests.libs.storage.helpers import Migrated

pytestmark = pytest.mark.postgres


@pytest.fixture
def engine(postgres_url: str) -> Iterator[Engine]:
    engine = create_engine(postgres_url)
    with engine.begin() as conn:
        conn.execute(text("CREATE TABLE grown (id integer PRIMARY KEY)"))
    try:
        yield engine
    finally:
        engine.dispose()


def _grow(engine: Engine, rows: int) -> None:
    with engine.begin() as conn:
        start = conn.execute(text("SELECT coalesce(max(id), 0) FROM grown")).scalar_one()
        conn.execute(
            text("INSERT INTO grown SELECT generate_series(CAST(:low AS int), CAST(:high AS int))"),
            {"low": start + 1, "high": start + rows},
        )


def _reltuples(engine: Engine) -> float:
    with engine.connect() as conn:
        value = conn.execute(
            text("SELECT reltuples FROM pg_class WHERE oid = to_regclass('grown')")
        ).scalar_one()
    return float(value)


def test_a_table_is_analyzed_once_its_writes_pass_autovacuums_threshold(engine: Engine) -> None:
    statistics = PlannerStatistics(engine, enabled=True)
    _grow(engine, ANALYZE_THRESHOLD)
    statistics.wrote({"grown": ANALYZE_THRESHOLD})
    statistics.wait()
    assert _reltuples(engine) == -1  # never analyzed: at the threshold, not past it

    _grow(engine, 1000)
    statistics.wrote({"grown": 1000})
    statistics.wait()
    assert _reltuples(engine) == ANALYZE_THRESHOLD + 1000


def test_the_threshold_grows_with_the_table(engine: Engine) -> None:
    statistics = PlannerStatistics(engine, enabled=True)
    _grow(engine, 10_000)
    statistics.wrote({"grown": 10_000})
    statistics.wait()
    assert _reltuples(engine) == 10_000

    # 10 % of 10,000 rows plus 50: 1,000 more rows are not enough, 1,100 in all are.
    _grow(engine, 1000)
    statistics.wrote({"grown": 1000})
    statistics.wait()
    assert _reltuples(engine) == 10_000
    _grow(engine, 100)
    statistics.wrote({"grown": 100})
    statistics.wait()
    assert _reltuples(engine) == 11_100


def test_nothing_is_analyzed_when_autovacuum_keeps_the_statistics(engine: Engine) -> None:
    statistics = PlannerStatistics(engine, enabled=False)
    _grow(engine, 5000)
    statistics.wrote({"grown": 5000})
    statistics.wait()
    assert _reltuples(engine) == -1


def test_it_runs_exactly_when_the_servers_autovacuum_is_off(engine: Engine) -> None:
    with engine.connect() as conn:
        autovacuum = conn.execute(text("SELECT current_setting('autovacuum')")).scalar_one()
    assert PlannerStatistics(engine).enabled is (autovacuum != "on")


def test_the_trace_store_keeps_its_span_statistics(migrated: Migrated) -> None:
    # A database no test has written to: one emptied after another test may be analyzed.
    opened = migrated.open("trace", "postgres", fresh=True)
    store = opened.store
    assert isinstance(store, SqlTraceStore)
    spans = [span(f"s{index}", trace_id=f"t{index // 10}") for index in range(200)]
    store.write_batches(
        [SignalBatch(key_project="p", ingest_key=None, received_at=T0, spans=spans)]
    )
    store.close()  # waits for the ANALYZE the write started, if any
    assert opened.engine is not None
    with opened.engine.connect() as conn:
        autovacuum = conn.execute(text("SELECT current_setting('autovacuum')")).scalar_one()
        rows = conn.execute(
            text("SELECT reltuples FROM pg_class WHERE oid = to_regclass('spans')")
        ).scalar_one()
    # The server's autovacuum has not run within the test: the store's own ANALYZE is the
    # only thing that can have counted the 200 spans.
    assert float(rows) == (-1 if autovacuum == "on" else 200)
