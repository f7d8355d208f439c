"""The aspects of the control store (AspectRecords), on SQLite and PostgreSQL: every version is
kept, the newest of each name is read in catalogue order, and a stored version never changes."""

from __future__ import annotations

import dataclasses
from typing import Any

from mcpd.storage.aspect_records import AspectRecord
from mcpd.storage.sql.control_store import SqlControlStore
from mcpd.storage.sql.schema import control

T0_NS = 1_767_225_600 * 10**9
LARGEST_SORT_ORDER = 2**32 - 1  # the spec's u32


def _aspect(name: str, version: int = 1, **fields: Any) -> AspectRecord:
    record = AspectRecord(
        project="p",
        name=name,
        label=name.title(),
        description=f"what {name} is about",
        instruction=f"Write one sentence about {name}.",
        derived=False,
        built_in=False,
        enabled=True,
        sort_order=10,
        version=version,
        created_at=T0_NS + version,
    )
    return dataclasses.replace(record, **fields)


def test_a_project_without_aspects_reads_none(control_store: SqlControlStore) -> None:
    assert control_store.aspects("p") == []
    control_store.store_aspect_versions([])
    assert control_store.aspects("p") == []


def test_the_newest_version_of_each_name_in_sort_order_then_name(
    control_store: SqlControlStore,
) -> None:
    newest_goal = _aspect("goal", 2, sort_order=30, label="Goal, renamed", enabled=False)
    outcome = _aspect("outcome", instruction=None, derived=True, built_in=True, sort_order=30)
    last = _aspect("refund_reason", sort_order=LARGEST_SORT_ORDER)
    first = _aspect("tone", sort_order=20)
    control_store.store_aspect_versions([_aspect("goal"), newest_goal, outcome, last, first])
    control_store.store_aspect_versions([_aspect("goal", project="other", sort_order=1)])

    assert control_store.aspects("p") == [first, newest_goal, outcome, last]
    assert [record.project for record in control_store.aspects("other")] == ["other"]


def test_a_stored_version_is_never_changed(control_store: SqlControlStore) -> None:
    first = _aspect("goal")
    control_store.store_aspect_versions([first])

    # Two replicas storing version 1 at once: the second finds it stored and writes nothing.
    control_store.store_aspect_versions([_aspect("goal", label="Another"), _aspect("tone")])

    assert control_store.aspects("p") == [first, _aspect("tone")]


def test_the_record_names_the_tables_columns() -> None:
    # The store maps records to rows by field name.
    assert list(control.aspects.c.keys()) == [
        field.name for field in dataclasses.fields(AspectRecord)
    ]
