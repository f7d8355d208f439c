"""`ControlStore.list_projects`, which the retention sweeper walks, on SQLite and PostgreSQL."""

from __future__ import annotations

from google.protobuf import json_format

from mcpd.model.v1 import account_pb2
from mcpd.storage.sql.control_store import SqlControlStore


def test_list_projects_is_empty_without_projects(control_store: SqlControlStore) -> None:
    assert control_store.list_projects() == []


def test_list_projects_returns_every_project_by_id_as_get_project_does(
    control_store: SqlControlStore,
) -> None:
    control_store.ensure_project("zeta", "Zeta")
    configured = account_pb2.Project()
    json_format.ParseDict(
        {"project_id": "alpha", "name": "Alpha", "retention_days": 7, "metadata": {"team": "a"}},
        configured,
    )
    control_store.configure_project(configured)

    listed = control_store.list_projects()

    assert [project.project_id for project in listed] == ["alpha", "zeta"]
    assert listed == [control_store.get_project("alpha"), control_store.get_project("zeta")]
    assert listed[0].retention_days == 7
    assert not listed[1].HasField("retention_days")
