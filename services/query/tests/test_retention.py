"""The retention sweeper over real SQLite trace and control stores: windows per project and
signal, what one sweep removes, the audit log left alone, and a loop that outlives failures."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from google.protobuf import json_format, timestamp_pb2
from sqlalchemy import Engine, func, select, text

from mcpd.model.v1 import account_pb2, enums_pb2
from mcpd.runtime.clock import ManualClock, epoch_nanos
from mcpd.runtime.config import RetentionSettings, load_settings
from mcpd.runtime.errors import InvalidArgument
from mcpd.signals.batch import SignalBatch
from mcpd.storage.sql.control_store import SqlControlStore
from mcpd.storage.sql.engine import Synchronous, create_sqlite_engine
from mcpd.storage.sql.schema import trace as schema
from mcpd.storage.sql.stores import SqlTraceStore
from mcpd.testing.eventually import eventually_async
from mcpd.testing.templates import SqliteTemplates
from services.query.retention import DAY_NS, RetentionSweeper, window_days
from tests.libs.signals.samples import log, span
from tests.libs.storage.helpers import T0

NOTHING = {"spans": 0, "logs": 0, "metrics": 0, "scores": 0, "feedback": 0}


@dataclass
class World:
    clock: ManualClock
    traces: SqlTraceStore
    control: SqlControlStore

    @property
    def now_ns(self) -> int:
        return epoch_nanos(self.clock.now())

    def project(self, project_id: str, **fields: Any) -> None:
        configured = account_pb2.Project()
        json_format.ParseDict({"project_id": project_id, **fields}, configured)
        self.control.configure_project(configured)

    def batch(self, project: str, name: str, days: float, key: str | None = None) -> SignalBatch:
        """A trace of one span, and a log line, both received `days` ago."""
        received = self.now_ns - int(days * DAY_NS)
        return SignalBatch(
            key_project=project,
            ingest_key=key,
            received_at=received,
            spans=[span(name, project=project, trace_id=f"t-{name}", received_at=received)],
            logs=[log(name, project=project, trace_id=f"t-{name}", received_at=received)],
        )

    def aged(self, project: str, name: str, days: float, key: str | None = None) -> None:
        """`batch`, written."""
        assert self.traces.write_batches([self.batch(project, name, days, key)]) == [True]

    def ids(self, table: Any, column: str, project: str) -> set[str]:
        with self.traces.engine.connect() as conn:
            statement = select(table.c[column]).where(table.c.project == project)
            return set(conn.execute(statement).scalars())


@pytest.fixture
def world(tmp_path: Path, sqlite_templates: SqliteTemplates) -> Iterator[World]:
    clock = ManualClock(T0)
    trace_db = sqlite_templates.copy("trace", tmp_path / "trace.db")
    control_db = sqlite_templates.copy("control", tmp_path / "control.db")
    traces = SqlTraceStore(create_sqlite_engine(trace_db, synchronous=Synchronous.NORMAL))
    control = SqlControlStore(
        create_sqlite_engine(control_db, synchronous=Synchronous.FULL), clock=clock
    )
    try:
        yield World(clock, traces, control)
    finally:
        traces.close()
        control.close()


def test_retention_settings_load_from_the_file_and_environment(tmp_path: Path) -> None:
    config = tmp_path / "mcpd.toml"
    config.write_text("[retention]\ndefault_days = 14\nlogs_days = 3\n")
    env = {"HOME": str(tmp_path), "MCPD_RETENTION_INTERVAL_S": "60"}

    retention = load_settings(config_path=config, env=env).retention

    assert retention == RetentionSettings(default_days=14, logs_days=3, interval_s=60.0)
    assert load_settings(env={"HOME": str(tmp_path)}).retention == RetentionSettings()


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("retention.default_days", -1),
        ("retention.spans_days", 0),
        ("retention.interval_s", 0.0),
        ("retention.interval_s", float("inf")),
    ],
)
def test_retention_settings_refuse_windows_that_cannot_work(
    tmp_path: Path, key: str, value: object
) -> None:
    with pytest.raises(InvalidArgument) as refused:
        load_settings(env={"HOME": str(tmp_path)}, overrides={key: value})
    assert refused.value.field == key


def test_window_is_the_shorter_of_project_and_cap_and_zero_keeps_forever() -> None:
    assert window_days(30, None) == 30
    assert window_days(30, 7) == 7
    assert window_days(5, 7) == 5
    assert window_days(0, 7) == 7
    assert window_days(0, None) is None


def test_cutoffs_per_signal_from_project_default_and_caps(world: World) -> None:
    settings = RetentionSettings(default_days=30, logs_days=5, scores_days=60)
    sweeper = RetentionSweeper(world.traces, world.control, settings, world.clock)
    now = world.now_ns
    own = account_pb2.Project(project_id="own", retention_days=10)
    default = account_pb2.Project(project_id="default")
    forever = account_pb2.Project(project_id="forever", retention_days=0)

    assert sweeper.cutoffs(own, now) == {
        "spans": now - 10 * DAY_NS,
        "logs": now - 5 * DAY_NS,
        "metrics": now - 10 * DAY_NS,
        "scores": now - 10 * DAY_NS,
        "feedback": now - 10 * DAY_NS,
    }
    assert sweeper.cutoffs(default, now)["spans"] == now - 30 * DAY_NS
    assert sweeper.cutoffs(default, now)["scores"] == now - 30 * DAY_NS
    assert sweeper.cutoffs(forever, now) == {"logs": now - 5 * DAY_NS, "scores": now - 60 * DAY_NS}


def test_sweep_removes_what_aged_out_per_project_and_leaves_audit(world: World) -> None:
    world.project("short", retention_days=10)
    world.project("default")
    world.project("forever", retention_days=0)
    for project, old, young in (("short", 11, 9), ("default", 31, 29), ("forever", 400, 1)):
        world.aged(project, f"{project}-old", old)
        world.aged(project, f"{project}-young", young)
    world.aged("forever", "forever-log-aged", 6)
    audit = _audit_event("short")
    world.control.append_audit([audit])
    sweeper = RetentionSweeper(
        world.traces, world.control, RetentionSettings(default_days=30, logs_days=5), world.clock
    )

    removed = sweeper.sweep_once()

    # `spans` counts what its window covers: the old trace's row and its span.
    assert removed == {
        "short": {**NOTHING, "spans": 2, "logs": 2, "ingest_keys": 0},
        "default": {**NOTHING, "spans": 2, "logs": 2, "ingest_keys": 0},
        "forever": {"logs": 2, "ingest_keys": 0},
    }
    assert world.ids(schema.spans, "span_id", "short") == {"short-young"}
    assert world.ids(schema.traces, "trace_id", "short") == {"t-short-young"}
    assert world.ids(schema.logs, "log_id", "short") == set()
    assert world.ids(schema.spans, "span_id", "default") == {"default-young"}
    assert world.ids(schema.spans, "span_id", "forever") == {
        "forever-old",
        "forever-young",
        "forever-log-aged",
    }
    assert world.ids(schema.logs, "log_id", "forever") == {"forever-young"}
    listed = world.control.list_audit("short", cursor=None, limit=10).events
    assert [event.audit_id for event in listed] == [audit.audit_id]
    assert sweeper.sweep_once() == {
        "short": {**NOTHING, "ingest_keys": 0},
        "default": {**NOTHING, "ingest_keys": 0},
        "forever": {"logs": 0, "ingest_keys": 0},
    }


def test_nothing_is_swept_when_every_window_is_forever(world: World) -> None:
    world.project("p")
    world.aged("p", "ancient", 10_000)
    sweeper = RetentionSweeper(
        world.traces,
        world.control,
        RetentionSettings(default_days=0, ingest_keys_days=0),
        world.clock,
    )

    assert sweeper.sweep_once() == {}
    assert world.ids(schema.spans, "span_id", "p") == {"ancient"}


def test_ingest_keys_are_forgotten_after_their_window_and_a_late_replay_is_written(
    world: World,
) -> None:
    world.project("p")
    world.aged("p", "eight-days", 8, key="k-old")
    world.aged("p", "six-days", 6, key="k-young")
    sweeper = RetentionSweeper(
        world.traces, world.control, RetentionSettings(ingest_keys_days=7), world.clock
    )

    # Signals are kept for ever here; only the key older than a week goes.
    assert sweeper.sweep_once() == {"p": {"ingest_keys": 1}}
    assert world.ids(schema.ingest_keys, "ingest_key", "p") == {"k-young"}
    # A replay of the forgotten key is written again; the remembered one is a duplicate.
    assert world.traces.write_batches([world.batch("p", "late", 0, key="k-old")]) == [True]
    assert world.traces.write_batches([world.batch("p", "again", 0, key="k-young")]) == [False]


async def test_run_sweeps_on_start_and_every_interval_and_survives_failures(
    world: World, caplog: pytest.LogCaptureFixture
) -> None:
    world.project("fine", retention_days=1)
    world.aged("fine", "first", 2)
    _rename(world.traces.engine, "logs", "logs_away")
    settings = RetentionSettings(default_days=1, interval_s=0.02)
    sweeper = RetentionSweeper(world.traces, world.control, settings, world.clock)
    stop = asyncio.Event()
    caplog.set_level(logging.INFO, logger="services.query.retention")

    task = asyncio.create_task(sweeper.run(stop))
    try:
        # The project's sweep fails on the missing table; the loop logs it and goes on.
        await eventually_async(
            lambda: _assert_logged(caplog, "retention sweep of a project failed")
        )
        _rename(world.traces.engine, "logs_away", "logs")
        await eventually_async(lambda: _assert_gone(world, "fine", "first"))
        # A failure of the sweep as a whole (no project list) is logged too, and retried.
        _rename(world.control.engine, "projects", "projects_away")
        await eventually_async(lambda: _assert_logged(caplog, "retention sweep failed"))
        _rename(world.control.engine, "projects_away", "projects")
        world.aged("fine", "second", 2)
        await eventually_async(lambda: _assert_gone(world, "fine", "second"))
        assert not task.done()
    finally:
        stop.set()
        await asyncio.wait_for(task, timeout=5)
    assert any(
        record.getMessage() == "retention sweep removed aged records" for record in caplog.records
    )


def _rename(engine: Engine, old: str, new: str) -> None:
    with engine.begin() as conn:
        conn.execute(text(f"ALTER TABLE {old} RENAME TO {new}"))


def _assert_logged(caplog: pytest.LogCaptureFixture, message: str) -> None:
    assert any(record.getMessage().startswith(message) for record in caplog.records)


def _assert_gone(world: World, project: str, name: str) -> None:
    with world.traces.engine.connect() as conn:
        statement = select(func.count()).where(
            schema.spans.c.project == project, schema.spans.c.span_id == name
        )
        assert conn.execute(statement).scalar_one() == 0


def _audit_event(project: str) -> account_pb2.AuditEvent:
    moment = T0 - timedelta(days=400)
    timestamp = timestamp_pb2.Timestamp()
    timestamp.FromDatetime(moment)
    return account_pb2.AuditEvent(
        audit_id="a-1",
        timestamp=timestamp,
        principal="3f2a9c",
        subject="",
        action="get_trace",
        project=project,
        resource="trace/t-short-old",
        result=enums_pb2.AUDIT_RESULT_ALLOWED,
    )
