"""The control store's projects, on SQLite and PostgreSQL."""

from __future__ import annotations

from dataclasses import fields

import pytest
from google.protobuf import struct_pb2
from sqlalchemy import Table, update

from mcpd.model.v1 import enums_pb2, evaluation_pb2
from mcpd.runtime.clock import ManualClock
from mcpd.storage.records import StoredAccount, StoredKey, StoredSession
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


def test_a_monitor_state_round_trips_and_is_replaced(control_store: SqlControlStore) -> None:
    assert control_store.monitor_states(["errors"]) == {}
    state = evaluation_pb2.MonitorState(condition=enums_pb2.MONITOR_CONDITION_TRIPPED)
    state.monitor.id = "errors"
    state.tripped_at.FromNanoseconds(1_764_000_000_123_000_000)
    state.last.monitor_id = "errors"
    state.last.at.FromNanoseconds(1_764_000_000_123_000_000)
    state.last.value = 0.5
    state.last.samples = 10
    state.last.condition = enums_pb2.MONITOR_CONDITION_TRIPPED
    state.last.detail = "error_rate 0.5 is above the threshold 0.2 (10 runs)"
    control_store.save_monitor_state(state)
    assert control_store.monitor_states(["errors", "other"]) == {"errors": state}

    cleared = evaluation_pb2.MonitorState(condition=enums_pb2.MONITOR_CONDITION_NOMINAL)
    cleared.monitor.id = "errors"
    control_store.save_monitor_state(cleared)
    assert control_store.monitor_states(["errors"]) == {"errors": cleared}
