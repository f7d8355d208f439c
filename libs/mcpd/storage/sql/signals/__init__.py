"""The trace store's signal surface on SQLite and PostgreSQL.

`writes` holds `write_batches` (`bind_batches` outside the transaction, then `write_bound`) and
`release_held` (one transaction each, opened by the store),
`reproject` the projection maintenance they share, `reads` the reads of whole traces, and
`statements` the dialect-specific statements (bulk upserts with their arrival stamps and search
index, PostgreSQL's per-trace advisory locks). The query service's questions have a module
each: `lists`, `analytics`, `deltas` and `erasure`. The logic every backend shares (rows,
projection, facets, search text) is in `mcpd.signals`.
"""

from mcpd.storage.sql.signals.reads import (
    facet_value_count,
    held_traces,
    trace_detail_json,
    trace_records,
)
from mcpd.storage.sql.signals.writes import (
    Follow,
    bind_batches,
    release_held,
    write_batches,
    write_bound,
)

__all__ = [
    "Follow",
    "bind_batches",
    "facet_value_count",
    "held_traces",
    "release_held",
    "trace_detail_json",
    "trace_records",
    "write_batches",
    "write_bound",
]
