"""The control store's projects, on SQLite and PostgreSQL."""

from __future__ import annotations

from dataclasses import fields

import pytest
from google.protobuf import struct_pb2
from sqlalchemy import Table, update

from mcpd.runtime.clock import ManualClock
from mcpd.storage.records import StoredAccount, StoredKey, StoredSession, WatchState
from mcpd.storage.sql.control_store import SqlControlStore
from mcpd.storage.sql.schema import control

T0_SECONDS = 1_767_225_600


def test_project_round_trip(control_store: SqlControlStore) -> None:
    control_store.ensure_project("acme", "Acme Corp")

    project = control_store.get_project("acme")

    assert project is not None
    assert project.project_id == "acme"
    assert project.name == "Acme Corp"
    # The clock's microseconds survive the round trip.
    assert project.created_at.seconds == T0_SECONDS
    assert project.created_at.nanos == 123_456_000
    assert not project.HasField("retention_days")
    assert not project.HasField("sampling")


def test_missing_project_is_none(control_store: SqlControlStore) -> None:
    control_store.ensure_project("acme", "Acme Corp")
    assert control_store.get_project("other") is None


def test_ensure_project_keeps_an_existing_project(
    control_store: SqlControlStore, clock: ManualClock
) -> None:
    control_store.ensure_project("acme", "Acme Corp")
    clock.advance(60)
    control_store.ensure_project("acme", "Renamed")

    project = control_store.get_project("acme")

    assert project is not None
    assert project.name == "Acme Corp"
    assert project.created_at.seconds == T0_SECONDS  # the first call's clock reading


def test_json_settings_and_retention_read_back(control_store: SqlControlStore) -> None:
    control_store.ensure_project("acme", "Acme Corp")
    with control_store.engine.begin() as conn:
        conn.execute(
            update(control.projects)
            .where(control.projects.c.project_id == "acme")
            .values(retention_days=30, sampling={"kind": "ratio", "ratio": 0.25}, budget=None)
        )

    project = control_store.get_project("acme")

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


def test_backend_name(control_store: SqlControlStore, backend: str) -> None:
    assert control_store.backend == backend


@pytest.mark.parametrize(
    ("table", "record"),
    [
        (control.accounts, StoredAccount),
        (control.account_sessions, StoredSession),
        (control.api_keys, StoredKey),
    ],
)
def test_records_name_their_tables_columns(table: Table, record: type) -> None:
    # The store maps records to rows by field name.
    assert set(table.c.keys()) == {field.name for field in fields(record)}


def test_a_watch_state_round_trips_and_is_replaced(control_store: SqlControlStore) -> None:
    assert control_store.watch_states("monitor", ["errors"]) == {}
    reading = {"monitor_id": "errors", "value": 0.5, "samples": 10, "condition": "tripped"}
    tripped = WatchState("tripped", 1_764_000_000_123_000_000, reading)
    control_store.save_watch_state("monitor", "errors", tripped)
    control_store.save_watch_state("slo", "errors", WatchState("insufficient"))
    assert control_store.watch_states("monitor", ["errors", "other"]) == {"errors": tripped}
    assert control_store.watch_states("slo", ["errors"]) == {"errors": WatchState("insufficient")}
    control_store.save_watch_state("monitor", "errors", WatchState("nominal", None, reading))
    assert control_store.watch_states("monitor", ["errors"]) == {
        "errors": WatchState("nominal", None, reading)
    }
