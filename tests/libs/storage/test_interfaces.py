"""Each store is exactly the union of its narrow parts, and each backend class implements them all
with methods of its own signature (one implementation per backend, no wrappers)."""

from __future__ import annotations

import inspect
from typing import Protocol

import pytest

from mcpd.storage import interfaces
from mcpd.storage.clickhouse.store import ClickHouseTraceStore
from mcpd.storage.sql.control_store import SqlControlStore
from mcpd.storage.sql.stores import SqlRunStore, SqlTraceStore

PARTS: dict[type, tuple[type, ...]] = {
    interfaces.TraceStore: (
        interfaces.MigratedStore,
        interfaces.CapabilityReport,
        interfaces.BatchWrites,
        interfaces.HeldSpans,
        interfaces.FacetCounts,
        interfaces.TraceReads,
        interfaces.SignalLists,
        interfaces.SignalAnalytics,
        interfaces.SignalErasure,
        interfaces.SignalRetention,
        interfaces.DatasetRecords,
        interfaces.ExperimentRecords,
        interfaces.ThemeRecords,
    ),
    interfaces.RunStore: (
        interfaces.MigratedStore,
        interfaces.RunSubjectErasure,
        interfaces.DefinitionWrites,
        interfaces.DefinitionReads,
        interfaces.RunStarts,
        interfaces.RunReads,
        interfaces.RunTransitions,
        interfaces.RunEvents,
        interfaces.RunSpans,
    ),
    interfaces.ControlStore: (
        interfaces.MigratedStore,
        interfaces.CredentialReads,
        interfaces.AuditWrites,
        interfaces.AuditReads,
        interfaces.AccountRecords,
        interfaces.ProjectCatalog,
        interfaces.PriceOverrides,
        interfaces.WatchStates,
        interfaces.AspectRecords,
    ),
}
BACKENDS: dict[type, tuple[type, ...]] = {
    interfaces.TraceStore: (SqlTraceStore, ClickHouseTraceStore),
    interfaces.RunStore: (SqlRunStore,),
    interfaces.ControlStore: (SqlControlStore,),
}


def members(protocol: type) -> set[str]:
    """The operations a protocol class declares itself (not those of the parts it extends)."""
    return {name for name in vars(protocol) if not name.startswith("_")}


@pytest.mark.parametrize("store", PARTS, ids=lambda store: store.__name__)
def test_a_store_declares_nothing_but_its_parts(store: type) -> None:
    parts = PARTS[store]
    assert members(store) == set()
    assert set(store.__bases__) - {Protocol} == set(parts)
    declared = [name for part in parts for name in members(part)]
    assert len(declared) == len(set(declared)), "an operation belongs to exactly one part"


def test_the_split_loses_no_operation() -> None:
    # What each store offers: the trace store's 60 operations (lifecycle included), the run
    # store's 21 and the control store's 26.
    counts = {store: sum(len(members(part)) for part in parts) for store, parts in PARTS.items()}
    assert counts == {
        interfaces.TraceStore: 60,
        interfaces.RunStore: 21,
        interfaces.ControlStore: 26,
    }


@pytest.mark.parametrize(
    ("store", "backend"),
    [(store, backend) for store, backends in BACKENDS.items() for backend in backends],
    ids=lambda value: value.__name__,
)
def test_each_backend_class_implements_every_part_itself(store: type, backend: type) -> None:
    for part in PARTS[store]:
        for name in members(part):
            declared = inspect.getattr_static(part, name)
            implemented = inspect.getattr_static(backend, name)
            if isinstance(declared, property):
                assert isinstance(implemented, property), f"{backend.__name__}.{name}"
                continue
            wanted = list(inspect.signature(declared).parameters)
            assert list(inspect.signature(implemented).parameters) == wanted, (
                f"{backend.__name__}.{name} does not take the parameters of {part.__name__}"
            )
