"""Pins the public surface of mcpd.storage, and the dialect helpers compiled on both dialects."""

from __future__ import annotations

import mcpd.storage
from mcpd.storage.sql.dialect import SqlDialect, insert_ignore
from mcpd.storage.sql.schema import control


def test_exports() -> None:
    assert sorted(mcpd.storage.__all__) == [
        "AccountRecords",
        "AuditReads",
        "AuditWrites",
        "BackendCapabilities",
        "BatchWrites",
        "CapabilityReport",
        "ChdbExecutor",
        "ClickHouseError",
        "ClickHouseExecutor",
        "ClickHouseTraceStore",
        "ControlStore",
        "CredentialReads",
        "DefinitionReads",
        "DefinitionWrites",
        "FacetCounts",
        "HeldSpans",
        "HttpExecutor",
        "MigratedStore",
        "PriceOverrides",
        "ProjectCatalog",
        "RunEvents",
        "RunReads",
        "RunSpans",
        "RunStarts",
        "RunStore",
        "RunSubjectErasure",
        "RunTransitions",
        "STORE_NAMES",
        "SignalAnalytics",
        "SignalErasure",
        "SignalLists",
        "SignalRetention",
        "SqlControlStore",
        "SqlRunStore",
        "SqlTraceStore",
        "Stores",
        "TraceReads",
        "TraceStore",
        "open_executor",
        "open_stores",
    ]
    for name in mcpd.storage.__all__:
        assert getattr(mcpd.storage, name) is not None


def test_insert_ignore_compiles_on_both_dialects() -> None:
    for dialect in SqlDialect:
        statement = insert_ignore(control.projects, dialect).values(
            project_id="p", name="P", created_at=1
        )
        sql = str(statement.compile(dialect=dialect.sqlalchemy_dialect()))
        assert sql.startswith("INSERT INTO projects")
        assert sql.endswith("ON CONFLICT DO NOTHING")
