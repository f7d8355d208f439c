"""Project configuration and price overrides in the control store, on SQLite and PostgreSQL."""

from __future__ import annotations

from datetime import timedelta

from google.protobuf import json_format

from mcpd.model.v1 import account_pb2
from mcpd.runtime.clock import ManualClock
from mcpd.storage.sql.control_store import SqlControlStore


def _project(**fields: object) -> account_pb2.Project:
    project = account_pb2.Project()
    json_format.ParseDict(fields, project)
    return project


def test_configure_project_creates_then_updates_and_keeps_created_at(
    control_store: SqlControlStore, clock: ManualClock
) -> None:
    control_store.configure_project(
        _project(
            project_id="alpha",
            name="Alpha",
            retention_days=30,
            sampling={"kind": "deterministic", "rate": 0.25},
            redaction={"rules": [{"name": "pw", "keys": ["password"], "mode": "drop"}]},
        )
    )
    created = control_store.get_project("alpha")
    assert created is not None
    clock.advance(timedelta(days=1))

    control_store.configure_project(_project(project_id="alpha", name="Alpha 2"))

    updated = control_store.get_project("alpha")
    assert updated is not None
    assert created.retention_days == 30
    assert json_format.MessageToDict(created.sampling) == {"kind": "deterministic", "rate": 0.25}
    assert json_format.MessageToDict(created.redaction)["rules"][0]["mode"] == "drop"
    assert updated.name == "Alpha 2"
    assert updated.created_at == created.created_at
    # Configuration is the whole truth: what it no longer says is cleared.
    assert not updated.HasField("retention_days")
    assert not updated.HasField("sampling")
    assert not updated.HasField("redaction")


def test_price_overrides_add_rows_only_for_changed_meters(
    control_store: SqlControlStore, clock: ManualClock
) -> None:
    control_store.ensure_project("alpha", "Alpha")
    added = control_store.set_price_overrides(
        "alpha", {"gpt-4o": {"input": 2.0, "output": 8.0}, "my-model": {"input": 0.5}}
    )
    clock.advance(timedelta(seconds=1))

    again = control_store.set_price_overrides("alpha", {"gpt-4o": {"input": 2.0, "output": 9.0}})

    assert added == 3
    assert again == 1
    assert control_store.price_overrides("alpha") == {
        "gpt-4o": {"input": 2.0, "output": 9.0},
        "my-model": {"input": 0.5},
    }
    assert control_store.price_overrides("beta") == {}
