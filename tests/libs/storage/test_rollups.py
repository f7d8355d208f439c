"""Rollups answer as the raw rows do, on every backend: a seeded random property test.

Random traces (spans arriving over several writes, re-sent spans, roots that arrive after their
children and move the trace's start) and their scores (re-sent with another value, time or
scorer) are written, then deleted in part (`delete_trace`, `erase_subject`, `apply_retention`);
after each phase, every question is asked twice: as the store answers it (whole buckets from
rollups, edges from rows) and with rollups turned off (the backend's own raw statements).
Counts, errors, spans and tokens must be equal, cost and mean equal to floating-point rounding,
quantiles and max within the sketch's RELATIVE_ACCURACY. Score statistics are also checked
against the scores the store lists, each score id counted once.
"""

from __future__ import annotations

import random
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mcpd.signals import rollups
from mcpd.signals.batch import SignalBatch
from mcpd.signals.queries import (
    CostPoint,
    ErasureSubject,
    GroupFigures,
    ScoreQuery,
    ScoreStats,
    Window,
)
from mcpd.signals.rollups import DAY_NS, HOUR_NS, RELATIVE_ACCURACY, Plan
from mcpd.signals.stats import quantile
from mcpd.storage.clickhouse.migrate import load_migrations
from mcpd.storage.clickhouse.signals import rollups as clickhouse_rollups
from mcpd.storage.clickhouse.signals import score_rollups as clickhouse_score_rollups
from mcpd.storage.sql.dialect import SqlDialect
from mcpd.storage.sql.signals import rollups as sql_rollups
from mcpd.storage.sql.signals import score_rollups as sql_score_rollups
from tests.libs.signals.samples import MS, T0, score, span
from tests.libs.storage.helpers import Migrated, OpenedStore, open_store

SECOND = 1_000 * MS
BASE = T0 - T0 % DAY_NS - DAY_NS  # a day boundary, a day before T0
SPREAD = 3 * DAY_NS
MODELS = ("gpt-4o", "claude-haiku", None)
GROUPS = (None, "model", "provider", "environment", "status", "name", "service_name")
SCORERS = ("relevance", "toxicity", "unused")


def _all_raw(window: Window, *_: Any) -> Plan:
    return Plan((), (window,))


def raw_answers(store: Any, monkeypatch: pytest.MonkeyPatch, ask: Any) -> Any:
    """`ask()` with rollups turned off: the backend's raw statements answer everything."""
    with monkeypatch.context() as patch:
        for module in (sql_rollups, clickhouse_rollups):
            patch.setattr(module, "plan", _all_raw)
            patch.setattr(module, "series_plan", _all_raw)
        for module in (sql_score_rollups, clickhouse_score_rollups):
            patch.setattr(module, "plan", _all_raw)
        return ask()


def traces(rng: random.Random, count: int) -> Iterator[tuple[str, list[Any]]]:
    """Traces of 1-5 spans each, with random usage, cost, durations, keys and statuses."""
    for number in range(count):
        trace_id = f"t{number:03d}"
        start = BASE + rng.randrange(SPREAD)
        correlation = {
            "environment": rng.choice(("prod", "dev", None)),
            "service_name": rng.choice(("api", "worker")),
            "user_id": rng.choice(("alice", "bob", None)),
        }
        rows = []
        for index in range(rng.randint(1, 5)):
            begin = start + rng.randrange(0, 3 * HOUR_NS if index else 1)
            duration = int(10 ** rng.uniform(0, 5)) * MS
            model = rng.choice(MODELS)
            rows.append(
                span(
                    f"s{index}",
                    trace_id=trace_id,
                    name=rng.choice(("plan", "answer", "tool")),
                    is_root=index == 0,
                    parent_span_id=None if index == 0 else "s0",
                    status=rng.choice(("ok", "ok", "error", "unset")),
                    start_time=begin,
                    end_time=None if rng.random() < 0.1 else begin + duration,
                    duration_ns=duration,
                    model=model,
                    provider=("openai" if model == "gpt-4o" else "anthropic") if model else None,
                    input_tokens=rng.choice((None, rng.randrange(1, 5000))),
                    output_tokens=rng.choice((None, rng.randrange(1, 900))),
                    total_cost=rng.choice((None, round(rng.uniform(0, 2), 6))),
                    **correlation,
                )
            )
        for row in rows:
            if row["end_time"] is None:
                row["duration_ns"] = None
        yield trace_id, rows


def batch(rows: list[Any], received_at: int, scores: list[Any] | None = None) -> SignalBatch:
    spans: list[Any] = [{**row, "received_at": received_at} for row in rows]
    scored: list[Any] = [{**row, "received_at": received_at} for row in scores or ()]
    return SignalBatch(
        key_project="p", ingest_key=None, received_at=received_at, spans=spans, scores=scored
    )


def scores_of(rng: random.Random, generated: list[tuple[str, list[Any]]]) -> list[Any]:
    """1-3 scores per trace, with the trace's correlation, at random times and values."""
    found = []
    for trace_id, rows in generated:
        correlation = {name: rows[0][name] for name in ("user_id", "environment", "service_name")}
        for number in range(rng.randint(1, 3)):
            value = rng.choice((0.0, 1.0, rng.random(), rng.uniform(-50, 50)))
            found.append(
                score(
                    f"{trace_id}-{number}",
                    trace_id=trace_id,
                    scorer_id=rng.choice(SCORERS[:2]),
                    value=value,
                    timestamp=BASE + rng.randrange(SPREAD),
                    **correlation,
                )
            )
    return found


def resent_scores(rng: random.Random, scores: list[Any]) -> list[Any]:
    """Some scores again under their ids: another value, some at another time (hours away,
    so another bucket), some under the other scorer."""
    found = []
    for row in scores[::3]:
        again = {**row, "value": rng.uniform(0, 1)}
        if rng.random() < 0.6:
            again["timestamp"] = row["timestamp"] + rng.choice((-1, 1)) * rng.randrange(
                HOUR_NS, DAY_NS
            )
        if rng.random() < 0.3:
            again["scorer_id"] = "toxicity" if row["scorer_id"] == "relevance" else "relevance"
        found.append(again)
    return found


def windows(rng: random.Random) -> list[Window]:
    found = [
        Window(),
        Window(None, BASE + DAY_NS + 5 * HOUR_NS),
        Window(BASE + DAY_NS, BASE + 2 * DAY_NS),  # one whole day
        Window(BASE + 3 * HOUR_NS, BASE + 7 * HOUR_NS),  # whole hours
        Window(BASE + 10 * MS, BASE + 40 * 60 * SECOND),  # no whole hour: raw only
    ]
    for _ in range(4):
        start = BASE - HOUR_NS + rng.randrange(SPREAD)
        found.append(Window(start, start + rng.randrange(HOUR_NS, SPREAD)))
    return found


def assert_same(found: list[GroupFigures], raw: list[GroupFigures], where: str) -> None:
    assert [row.key for row in found] == [row.key for row in raw], where
    for got, want in zip(found, raw, strict=True):
        exact = ("count", "error_count", "span_count", "input_tokens", "output_tokens")
        assert [getattr(got, name) for name in exact] == [getattr(want, name) for name in exact], (
            where,
            got.key,
        )
        if want.total_cost is None:
            assert got.total_cost is None, (where, got.key)
        else:
            assert got.total_cost == pytest.approx(want.total_cost, rel=1e-9, abs=1e-9)
        for name in ("p50", "p90", "p95", "p99", "mean", "max"):
            value, wanted = getattr(got.latency, name), getattr(want.latency, name)
            if wanted is None:
                assert value is None, (where, got.key, name)
                continue
            bound = 1e-9 if name == "mean" else RELATIVE_ACCURACY + 1e-9
            assert value == pytest.approx(wanted, rel=bound), (where, got.key, name)


def assert_same_points(found: list[CostPoint], raw: list[CostPoint], where: str) -> None:
    assert [(p.bucket_start, p.key, p.input_tokens, p.output_tokens) for p in found] == [
        (p.bucket_start, p.key, p.input_tokens, p.output_tokens) for p in raw
    ], where
    for got, want in zip(found, raw, strict=True):
        assert got.total_cost == pytest.approx(want.total_cost, rel=1e-9, abs=1e-9), where


PHASES = ("partial", "whole", "erased", "retained")


def groups_of(phase: str, window_number: int) -> list[str | None]:
    """The groupings checked for a window in a phase: the ungrouped total always, and the
    others in turns, so that over the four phases every window meets every grouping once (a
    query of the embedded ClickHouse costs tens of milliseconds)."""
    turn = PHASES.index(phase)
    grouped = [
        group
        for number, group in enumerate(GROUPS[1:])
        if (window_number + number) % len(PHASES) == turn
    ]
    return [None, *grouped]


def test_every_window_meets_every_grouping_in_some_phase() -> None:
    windows_per_phase = len(windows(random.Random(0)))
    met = {
        (number, group)
        for phase in PHASES
        for number in range(windows_per_phase)
        for group in groups_of(phase, number)
    }
    assert met == {(number, group) for number in range(windows_per_phase) for group in GROUPS}


def check(store: Any, monkeypatch: pytest.MonkeyPatch, rng: random.Random, phase: str) -> None:
    for window_number, window in enumerate(windows(rng)):
        for group_by in groups_of(phase, window_number):
            where = f"{phase} {window} {group_by}"

            def figures(window: Window = window, group_by: str | None = group_by) -> Any:
                return store.group_figures("p", window, group_by)

            assert_same(figures(), raw_answers(store, monkeypatch, figures), where)
        if window.start is None or window.end is None:
            continue
        for group_by, bucket in ((None, HOUR_NS), ("model", 6 * HOUR_NS), ("status", DAY_NS)):

            def points(
                window: Window = window, group_by: str | None = group_by, bucket: int = bucket
            ) -> Any:
                return store.cost_points("p", window, group_by, bucket)

            where = f"{phase} {window} {group_by} {bucket}"
            assert_same_points(points(), raw_answers(store, monkeypatch, points), where)


def listed_scores(store: Any) -> list[dict[str, Any]]:
    """Every score the store lists, each id once: its newest arrival (then the later time, then
    the greater scorer), which is also the one row SQL keeps."""
    live: dict[str, Any] = {}
    after = None
    while True:
        page = store.list_scores("p", ScoreQuery(after=after, limit=500))
        for row in page.rows:
            rank = (row["received_at"], row["timestamp"], row["scorer_id"])
            kept = live.get(row["score_id"])
            if kept is None or rank > (kept["received_at"], kept["timestamp"], kept["scorer_id"]):
                live[row["score_id"]] = row
        if not page.has_more:
            break
        after = (page.rows[-1]["timestamp"], page.rows[-1]["score_id"])
    return list(live.values())


def listed_stats(listed: list[dict[str, Any]], scorer_id: str, window: Window) -> tuple[int, float]:
    """The count and sum of the scorer's scores in the window, of those `listed_scores` read."""
    values = [
        row["value"]
        for row in listed
        if row["scorer_id"] == scorer_id
        and (window.start is None or row["timestamp"] >= window.start)
        and (window.end is None or row["timestamp"] < window.end)
    ]
    return len(values), sum(values)


def assert_same_stats(
    found: ScoreStats, raw: ScoreStats, listed: tuple[int, float], where: str
) -> None:
    assert found.count == raw.count == listed[0], where
    assert found.value_sum == pytest.approx(raw.value_sum, rel=1e-9, abs=1e-9), where
    assert found.value_sum == pytest.approx(listed[1], rel=1e-9, abs=1e-9), where
    if raw.mean is None:
        assert found.mean is None, where
    else:
        assert found.mean == pytest.approx(raw.mean, rel=1e-9, abs=1e-9), where


def check_scores(store: Any, monkeypatch: pytest.MonkeyPatch, phase: str) -> int:
    """Every score question of the phase, answered alike; how many scores are stored."""
    rng = random.Random(phase)
    found_any = False
    listed = listed_scores(store)
    for window in windows(rng):
        for scorer_id in SCORERS:

            def stats(window: Window = window, scorer_id: str = scorer_id) -> Any:
                return store.score_stats("p", scorer_id, window)

            found = stats()
            found_any = found_any or found.count > 0
            where = f"{phase} {window} {scorer_id}"
            raw = raw_answers(store, monkeypatch, stats)
            assert_same_stats(found, raw, listed_stats(listed, scorer_id, window), where)
    assert found_any, phase
    return sum(listed_stats(listed, scorer_id, Window())[0] for scorer_id in SCORERS)


def test_rollups_answer_as_the_raw_rows(
    migrated_trace_store: OpenedStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = migrated_trace_store.store
    rng = random.Random(18)
    generated = list(traces(rng, 36))
    scored = scores_of(random.Random(81), generated)
    received = T0
    # First write: each trace without its root and last span, in three batches, with the
    # scores.
    pending = [
        (trace_id, rows[1:-1] if len(rows) > 2 else rows[1:]) for trace_id, rows in generated
    ]
    for part in range(3):
        rows = [row for _, spans in pending[part::3] for row in spans]
        received += SECOND
        store.write_batches([batch(rows, received, scored[part::3])])
    check(store, monkeypatch, rng, "partial")
    assert check_scores(store, monkeypatch, "partial") == len(scored)
    # Then the rest of every trace (roots move starts earlier), and re-sent spans that change
    # their model, status and end, and re-sent scores.
    rest = [row for _, rows in generated for row in (rows[:1] + rows[-1:])]
    resent = [
        {**row, "model": "gpt-4o", "provider": "openai", "status": "error"}
        for _, rows in generated[::4]
        for row in rows[1:2]
    ]
    received += SECOND
    store.write_batches([batch(rest, received)])
    received += SECOND
    store.write_batches([batch(resent, received, resent_scores(random.Random(82), scored))])
    check(store, monkeypatch, rng, "whole")
    stored = check_scores(store, monkeypatch, "whole")
    # Deletes: one trace, one subject, and what arrived in the first write.
    store.delete_trace("p", generated[5][0])
    store.erase_subject("p", ErasureSubject(user_ids=("alice",)))
    check(store, monkeypatch, rng, "erased")
    erased = check_scores(store, monkeypatch, "erased")
    assert erased < stored
    store.apply_retention("p", {"spans": T0 + 2 * SECOND + 1, "scores": T0 + 2 * SECOND + 1})
    check(store, monkeypatch, rng, "retained")
    assert 0 < check_scores(store, monkeypatch, "retained") < erased
    assert store.group_figures("p", Window(), None)[0].count > 0


def test_the_sketch_stays_within_its_bound() -> None:
    rng = random.Random(7)
    for size in (1, 2, 7, 100, 1000):
        durations = [int(10 ** rng.uniform(0, 12)) for _ in range(size)] + [0] * (size % 3)
        figures = rollups.Figures()
        groups = rollups.Groups()
        groups.add_durations("", durations)
        figures.merge(groups.of(""))
        ordered = sorted(durations)
        found = figures.latency()
        for name, q in (("p50", 0.5), ("p90", 0.9), ("p95", 0.95), ("p99", 0.99), ("max", 1.0)):
            exact = quantile(ordered, q) / rollups.NS_PER_MS
            value = getattr(found, name)
            assert abs(value - exact) <= (RELATIVE_ACCURACY + 1e-9) * abs(exact), (size, name)
        assert found.mean == pytest.approx(sum(ordered) / len(ordered) / rollups.NS_PER_MS)


def test_a_window_is_whole_buckets_and_raw_edges() -> None:
    start, end = BASE + 90 * 60 * SECOND, BASE + 3 * DAY_NS + 30 * 60 * SECOND
    shape = rollups.plan(Window(start, end))

    assert shape.ranges == (
        rollups.Range(DAY_NS, BASE + DAY_NS, BASE + 3 * DAY_NS),
        rollups.Range(HOUR_NS, BASE + 2 * HOUR_NS, BASE + DAY_NS),
    )
    assert shape.raw == (
        Window(start, BASE + 2 * HOUR_NS),
        Window(BASE + 3 * DAY_NS, end),
    )
    assert rollups.plan(Window(BASE + 1, BASE + HOUR_NS)).ranges == ()


def test_the_backfill_rebuilds_what_the_writes_kept(migrated_trace_store: OpenedStore) -> None:
    """What migration 0008 (SQL) or 0007 (ClickHouse) computes from stored rows is what the
    writes kept row by row."""
    store = migrated_trace_store.store
    rng = random.Random(5)
    rows = [row for _, spans in traces(rng, 24) for row in spans]
    store.write_batches([batch(rows[::2], T0), batch(rows[1::2], T0 + SECOND)])
    asked = [(window, group_by) for window in windows(rng) for group_by in GROUPS]
    kept = [store.group_figures("p", window, group_by) for window, group_by in asked]

    if migrated_trace_store.backend == "clickhouse":
        executor = store.executor
        executor.command("TRUNCATE TABLE rollups")
        (migration,) = [m for m in load_migrations() if m.version == "0007_rollups"]
        for statement in migration.statements[1:]:
            executor.command(statement)
    else:
        with store.engine.begin() as conn:
            sql_rollups.rebuild(conn, SqlDialect.of(store.engine))

    rebuilt = [store.group_figures("p", window, group_by) for window, group_by in asked]
    for (window, group_by), found, wanted in zip(asked, rebuilt, kept, strict=True):
        assert_same(found, wanted, f"rebuilt {window} {group_by}")


def test_the_score_backfill_rebuilds_what_the_writes_kept(
    migrated_trace_store: OpenedStore,
) -> None:
    """What migration 0009 (SQL) or 0008 (ClickHouse) computes from the stored scores is what
    the writes kept, re-sent scores counted once."""
    store = migrated_trace_store.store
    rng = random.Random(6)
    generated = list(traces(rng, 12))
    scored = scores_of(rng, generated)
    store.write_batches([batch([], T0, scored), batch([], T0 + SECOND, resent_scores(rng, scored))])
    asked = [(window, scorer_id) for window in windows(rng) for scorer_id in SCORERS]
    kept = [store.score_stats("p", scorer_id, window) for window, scorer_id in asked]
    assert sum(stats.count for stats in kept[: len(SCORERS)]) == len(scored)

    if migrated_trace_store.backend == "clickhouse":
        executor = store.executor
        executor.command("TRUNCATE TABLE score_rollups")
        (migration,) = [m for m in load_migrations() if m.version == "0008_score_rollups"]
        for statement in migration.statements[1:]:
            executor.command(statement)
    else:
        with store.engine.begin() as conn:
            sql_score_rollups.rebuild(conn, SqlDialect.of(store.engine))

    rebuilt = [store.score_stats("p", scorer_id, window) for window, scorer_id in asked]
    for (window, scorer_id), found, wanted in zip(asked, rebuilt, kept, strict=True):
        assert found.count == wanted.count, (window, scorer_id)
        assert found.value_sum == pytest.approx(wanted.value_sum, rel=1e-9, abs=1e-9)


def test_concurrent_writers_of_one_score_count_it_once(
    backend: str, migrated: Migrated, tmp_path: Path
) -> None:
    """Two stores send each new score at once, under different traces (so no trace lock
    serialises them) and in different buckets: the score is stored once, and counted once, at
    the value and time of the copy that was stored last (on PostgreSQL the score's advisory
    lock makes the second writer subtract what the first stored)."""
    url = migrated.prepare("trace", backend)
    stores = [open_store("trace", backend, tmp_path, url).store for _ in range(2)]
    barrier = threading.Barrier(2)
    errors: list[Exception] = []

    def write(index: int) -> None:
        try:
            for round_ in range(20):
                row = score(
                    f"s{round_:02d}",
                    trace_id=f"t{index}-{round_:02d}",
                    value=float(index + 1),
                    timestamp=BASE + index * DAY_NS + round_ * HOUR_NS,
                )
                barrier.wait(timeout=30)
                stores[index].write_batches([batch([], T0 + round_ * SECOND, [row])])
        except Exception as error:
            errors.append(error)

    threads = [threading.Thread(target=write, args=(index,)) for index in (0, 1)]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=120)
        assert errors == []
        listed = listed_scores(stores[0])
        count, value_sum = listed_stats(listed, "relevance", Window())
        found = stores[0].score_stats("p", "relevance", Window())
        assert found.count == count == 20
        assert found.value_sum == pytest.approx(value_sum)
        assert (
            stores[0].score_stats("p", "relevance", Window(BASE, BASE + DAY_NS)).count
            == (listed_stats(listed, "relevance", Window(BASE, BASE + DAY_NS))[0])
        )
    finally:
        for store in stores:
            store.close()
