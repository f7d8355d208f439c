"""Each backend reports exactly the capabilities documented in mcpd.storage.capabilities."""

from __future__ import annotations

from mcpd.model.v1 import enums_pb2, query_pb2
from tests.libs.storage.helpers import OpenedStore

# Written out here rather than imported, so a change to a backend's claims shows up as a
# failing test that someone has to look at.
EXPECTED = {
    "sqlite": query_pb2.StoreCapabilities(
        backend="sqlite",
        text_search=enums_pb2.TEXT_SEARCH_WORDS,
        unicode_case_folding=True,
        immediate_deletes=True,
        discovery=True,
        discovery_label_values=True,
        delta_polling=True,
        per_signal_retention=True,
        declarative_retention=False,
        partitioning=enums_pb2.PARTITIONING_NONE,
        partition_drop_retention=False,
        idempotent_schema_init=True,
        theme_analysis=True,
    ),
    "postgres": query_pb2.StoreCapabilities(
        backend="postgres",
        text_search=enums_pb2.TEXT_SEARCH_WORDS,
        unicode_case_folding=True,
        immediate_deletes=True,
        discovery=True,
        discovery_label_values=True,
        delta_polling=True,
        per_signal_retention=True,
        declarative_retention=False,
        partitioning=enums_pb2.PARTITIONING_NONE,
        partition_drop_retention=False,
        idempotent_schema_init=True,
        theme_analysis=True,
    ),
    "clickhouse": query_pb2.StoreCapabilities(
        backend="clickhouse",
        text_search=enums_pb2.TEXT_SEARCH_SUBSTRING,
        unicode_case_folding=True,
        immediate_deletes=False,
        discovery=True,
        discovery_label_values=True,
        delta_polling=False,
        per_signal_retention=True,
        declarative_retention=True,
        partitioning=enums_pb2.PARTITIONING_MONTH,
        partition_drop_retention=True,
        idempotent_schema_init=True,
        theme_analysis=True,
    ),
}


def test_capabilities_are_exact(trace_store: OpenedStore) -> None:
    caps = trace_store.store.capabilities()

    assert caps == EXPECTED[trace_store.backend]
    assert caps.backend == trace_store.store.backend == trace_store.backend


def test_no_backend_leaves_an_enum_unspecified_or_declares_no_search() -> None:
    for caps in EXPECTED.values():
        assert caps.text_search not in (
            enums_pb2.TEXT_SEARCH_UNSPECIFIED,
            enums_pb2.TEXT_SEARCH_NONE,
        )
        assert caps.partitioning != enums_pb2.PARTITIONING_UNSPECIFIED
        # Dropping partitions needs partitions.
        assert caps.partition_drop_retention == (caps.partitioning != enums_pb2.PARTITIONING_NONE)


def test_capabilities_need_no_migration(trace_store: OpenedStore) -> None:
    # Read at connect time, before (or without) touching the schema.
    trace_store.store.capabilities()
    assert trace_store.statements == []
