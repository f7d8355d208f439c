"""mcpd's storage: the trace, run and control stores and their backends.

Open them with `open_stores` (all three, or the ones a role needs); each store is a Protocol in
`interfaces`, the union of the narrow parts its consumers are typed with, with one
implementation per backend (`sql` for SQLite and PostgreSQL, `clickhouse` for the trace store
at scale). What each backend can do is in `capabilities`. Every store is synchronous: async
callers run it in a thread.
"""

from mcpd.storage.capabilities import BackendCapabilities
from mcpd.storage.clickhouse import (
    ChdbExecutor,
    ClickHouseError,
    ClickHouseExecutor,
    ClickHouseTraceStore,
    HttpExecutor,
    open_executor,
)
from mcpd.storage.factory import STORE_NAMES, Stores, open_stores
from mcpd.storage.interfaces import (
    AccountRecords,
    AuditReads,
    AuditWrites,
    BatchWrites,
    CapabilityReport,
    ControlStore,
    CredentialReads,
    DefinitionReads,
    DefinitionWrites,
    FacetCounts,
    HeldSpans,
    MigratedStore,
    PriceOverrides,
    ProjectCatalog,
    RunEvents,
    RunReads,
    RunSpans,
    RunStarts,
    RunStore,
    RunSubjectErasure,
    RunTransitions,
    SignalAnalytics,
    SignalErasure,
    SignalLists,
    SignalRetention,
    TraceReads,
    TraceStore,
)
from mcpd.storage.sql import SqlControlStore, SqlRunStore, SqlTraceStore

__all__ = [
    "STORE_NAMES",
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
