"""The control store's project round trip, on SQLite and PostgreSQL."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from google.protobuf import struct_pb2
from sqlalchemy import update

from mcpd.runtime.clock import ManualClock
from mcpd.storage.sql.schema import control
from mcpd.storage.sql.stores import SqlControlStore
from tests.libs.storage.helpers import sql_engine

T0 = datetime(2026, 1, 1, 0, 0, 0, 123_456, tzinfo=UTC)
T0_SECONDS = 1_767_225_600


@pytest.fixture
def clock() -> ManualClock:
    """Wall time starts at T0 and moves only when a test says so."""
    return ManualClock(T0)


@pytest.fixture
def store(
    backend: str, backend_url: str | None, tmp_path: Path, clock: ManualClock
) -> Iterator[SqlControlStore]:
    opened = SqlControlStore(sql_engine("control", backend, tmp_path, backend_url), clock=clock)
    opened.migrate()
    try:
        yield opened
    finally:
        opened.close()


def test_project_round_trip(store: SqlControlStore) -> None:
    store.ensure_project("acme", "Acme Corp")

    project = store.get_project("acme")

    assert project is not None
    assert project.project_id == "acme"
    assert project.name == "Acme Corp"
    # The clock's microseconds survive the round trip.
    assert project.created_at.seconds == T0_SECONDS
    assert project.created_at.nanos == 123_456_000
    assert not project.HasField("retention_days")
    assert not project.HasField("sampling")


def test_missing_project_is_none(store: SqlControlStore) -> None:
    store.ensure_project("acme", "Acme Corp")
    assert store.get_project("other") is None


def test_ensure_project_keeps_an_existing_project(
    store: SqlControlStore, clock: ManualClock
) -> None:
    store.ensure_project("acme", "Acme Corp")
    clock.advance(60)
    store.ensure_project("acme", "Renamed")

    project = store.get_project("acme")

    assert project is not None
    assert project.name == "Acme Corp"
    assert project.created_at.seconds == T0_SECONDS  # the first call's clock reading


def test_json_settings_and_retention_read_back(store: SqlControlStore) -> None:
    store.ensure_project("acme", "Acme Corp")
    with store.engine.begin() as conn:
        conn.execute(
            update(control.projects)
            .where(control.projects.c.project_id == "acme")
            .values(retention_days=30, sampling={"kind": "ratio", "ratio": 0.25}, budget=None)
        )

    project = store.get_project("acme")

    assert project is not None
    assert project.retention_days == 30
    assert project.sampling == struct_pb2.Value(
        struct_value=struct_pb2.Struct(
            fields={
                "kind": struct_pb2.Value(string_value="ratio"),
                "ratio": struct_pb2.Value(number_value=0.25),
            }
        )
    )
    assert not project.HasField("budget")  # SQL NULL, not a JSON null


def test_backend_name(store: SqlControlStore, backend: str) -> None:
    assert store.backend == backend
