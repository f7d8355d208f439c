"""sync_aspects and AspectCatalogues over a real control store: the built-ins seeded, an edit
stored as the next version, nothing written twice, a built-in never deleted and a custom aspect
the file drops kept switched off."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import replace
from datetime import timedelta

from sqlalchemy import select

from mcpd.aspects import (
    BUILT_INS,
    AspectCatalogues,
    AspectConfig,
    AspectDefinition,
    sync_aspects,
)
from mcpd.runtime.clock import ManualClock, epoch_nanos
from mcpd.storage.aspect_records import AspectRecord
from mcpd.storage.sql.control_store import SqlControlStore
from mcpd.storage.sql.schema import control as schema
from tests.libs.aspects.conftest import T0

GOAL, SENTIMENT, BEHAVIOUR, OUTCOME = BUILT_INS
REFUND_REASON = AspectDefinition(
    name="refund_reason",
    label="Refund reason",
    description="Why the user asked for their money back",
    instruction="Write one short, plain sentence saying why the user wanted their money back.",
    sort_order=15,
)
T0_NS = epoch_nanos(T0)
NAMES = [definition.name for definition in BUILT_INS]


def _config(*definitions: AspectDefinition, project: str = "p") -> AspectConfig:
    return AspectConfig({project: definitions})


def _versions(control: SqlControlStore, name: str) -> list[AspectRecord]:
    """Every stored version of one of project p's aspects, oldest first."""
    a = schema.aspects.c
    statement = select(schema.aspects).where(a.project == "p", a.name == name).order_by(a.version)
    with control.engine.connect() as conn:
        return [AspectRecord(**row) for row in conn.execute(statement).mappings()]


def test_the_built_ins_are_seeded_as_ordinary_rows_at_version_1(
    control: SqlControlStore, clock: ManualClock
) -> None:
    stored = sync_aspects(control, AspectConfig(), ["p"], clock)

    assert stored == [definition.stored_as("p", 1, T0_NS) for definition in BUILT_INS]
    assert control.aspects("p") == stored
    assert all(record.built_in and record.enabled for record in stored)
    assert [(r.name, r.derived, r.instruction is None) for r in stored if r.derived] == [
        ("outcome", True, True)
    ]
    assert control.aspects("other") == []  # only the projects asked for


def test_a_second_sync_writes_nothing(control: SqlControlStore, clock: ManualClock) -> None:
    config = _config(REFUND_REASON, replace(SENTIMENT, enabled=False))
    first = sync_aspects(control, config, ["p"], clock)
    clock.advance(timedelta(hours=1))

    assert sync_aspects(control, config, ["p"], clock) == []
    assert control.aspects("p") == sorted(first, key=lambda r: (r.sort_order, r.name))


def test_an_edit_is_stored_as_the_next_version_and_the_old_one_stays(
    control: SqlControlStore, clock: ManualClock
) -> None:
    sync_aspects(control, AspectConfig(), ["p"], clock)
    clock.advance(timedelta(hours=1))
    edited = replace(GOAL, label="Aim", instruction="Write one sentence on the aim.")

    stored = sync_aspects(control, _config(edited), ["p"], clock)

    later = epoch_nanos(clock.now())
    assert stored == [edited.stored_as("p", 2, later)]
    assert _versions(control, "goal") == [GOAL.stored_as("p", 1, T0_NS), stored[0]]


def test_switching_a_built_in_off_keeps_it_and_leaving_it_out_restores_it(
    control: SqlControlStore, clock: ManualClock
) -> None:
    switched_off = replace(OUTCOME, enabled=False, sort_order=1)
    sync_aspects(control, _config(switched_off), ["p"], clock)
    assert control.aspects("p")[0] == switched_off.stored_as("p", 1, T0_NS)

    # A built-in the file does not mention is the shipped definition: never deleted.
    stored = sync_aspects(control, AspectConfig(), ["p"], clock)

    assert stored == [OUTCOME.stored_as("p", 2, T0_NS)]
    assert [record.name for record in control.aspects("p")] == NAMES


def test_a_custom_aspect_the_file_drops_is_kept_switched_off(
    control: SqlControlStore, clock: ManualClock
) -> None:
    sync_aspects(control, _config(REFUND_REASON), ["p"], clock)

    dropped = sync_aspects(control, AspectConfig(), ["p"], clock)
    assert dropped == [replace(REFUND_REASON, enabled=False).stored_as("p", 2, T0_NS)]
    assert sync_aspects(control, AspectConfig(), ["p"], clock) == []
    assert control.aspects("p")[1] == dropped[0]  # still in the catalogue, in its place

    restored = sync_aspects(control, _config(REFUND_REASON), ["p"], clock)
    assert restored == [REFUND_REASON.stored_as("p", 3, T0_NS)]
    assert not restored[0].built_in


def test_each_project_is_synced_to_its_own_configuration(
    control: SqlControlStore, clock: ManualClock
) -> None:
    sync_aspects(control, _config(REFUND_REASON, project="a"), ["a", "b"], clock)

    assert "refund_reason" in {record.name for record in control.aspects("a")}
    assert [record.name for record in control.aspects("b")] == NAMES


class _ReadTogether:
    """The store as replicas starting at once see it: every sync reads before any writes."""

    def __init__(self, store: SqlControlStore, replicas: int) -> None:
        self._store = store
        self._barrier = threading.Barrier(replicas)

    def aspects(self, project: str) -> list[AspectRecord]:
        read = self._store.aspects(project)
        self._barrier.wait(timeout=30)
        return read

    def store_aspect_versions(self, records: Sequence[AspectRecord]) -> None:
        self._store.store_aspect_versions(records)


def test_replicas_syncing_at_once_store_each_version_once(
    control: SqlControlStore, clock: ManualClock
) -> None:
    racing = _ReadTogether(control, 2)
    config = _config(REFUND_REASON)
    results: list[list[AspectRecord]] = []
    threads = [
        threading.Thread(target=lambda: results.append(sync_aspects(racing, config, ["p"], clock)))
        for _ in range(2)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)

    assert len(results) == 2
    assert results[0] == results[1]  # both computed the same versions...
    assert [len(_versions(control, record.name)) for record in results[0]] == [1] * 5  # ...once


def test_catalogues_seed_a_project_on_first_read_and_reread_after_ttl(
    control: SqlControlStore, clock: ManualClock
) -> None:
    catalogues = AspectCatalogues(control, AspectConfig(), clock, ttl_s=5.0)

    first = catalogues.get("p")
    assert list(first) == NAMES

    # Another replica, configured otherwise, stores a version: seen once the cache expires.
    sync_aspects(control, _config(REFUND_REASON), ["p"], clock)
    assert catalogues.get("p") is first
    clock.advance(5.0)
    assert list(catalogues.get("p")) == ["goal", "refund_reason", *NAMES[1:]]


def test_a_synced_project_is_not_synced_again_on_read(
    control: SqlControlStore, clock: ManualClock
) -> None:
    catalogues = AspectCatalogues(control, _config(REFUND_REASON), clock, ttl_s=0.0)
    assert [record.name for record in catalogues.sync(["p"])] == [*NAMES, "refund_reason"]
    # Synced at start, so reading does not sync again: what another replica stored since is
    # what this one reads.
    sync_aspects(control, AspectConfig(), ["p"], clock)

    assert not catalogues.get("p")["refund_reason"].enabled
