"""Native IngestBatch bodies (spec JSON) shared by the ingest end-to-end tests, and a reader of
what a stopped daemon's stores hold."""

from __future__ import annotations

import contextlib
import json
import secrets
import sqlite3
import subprocess
import sys
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote

import sqlalchemy as sa

T0 = "2026-11-29T10:00:00.000Z"
T1 = "2026-11-29T10:00:01.500Z"
T2 = "2026-11-29T10:00:02.000Z"


def new_trace_id() -> str:
    return secrets.token_hex(16)


def new_span_id() -> str:
    return secrets.token_hex(8)


def agent_trace(trace_id: str, *, user_id: str = "user-42") -> dict[str, Any]:
    """An agent run with one model inference (cache read, reasoning) and one tool call."""
    root, model, tool = new_span_id(), new_span_id(), new_span_id()
    correlation = {
        "project": "",
        "environment": "production",
        "service_name": "support-bot",
        "session_id": "session-7",
        "user_id": user_id,
    }
    return {
        "spans": [
            {
                "trace_id": trace_id,
                "span_id": root,
                "name": "answer_ticket",
                "kind": "agent_run",
                "status": "ok",
                "start_time": T0,
                "end_time": T2,
                "is_root": True,
                "is_event": False,
                "tags": ["beta"],
                "input": {"question": "where is my order?"},
                "correlation": correlation,
            },
            {
                "trace_id": trace_id,
                "span_id": model,
                "parent_span_id": root,
                "name": "chat claude-sonnet-4-5",
                "kind": "model_inference",
                "status": "ok",
                "start_time": T0,
                "end_time": T1,
                "is_root": False,
                "is_event": False,
                "model": "claude-sonnet-4-5",
                "provider": "anthropic",
                "usage": {
                    "input_tokens": 1000,
                    "output_tokens": 500,
                    "input_details": {"cache_read": 600, "text": 400},
                    "output_details": {"reasoning": 200, "text": 300},
                },
                "correlation": correlation,
            },
            {
                "trace_id": trace_id,
                "span_id": tool,
                "parent_span_id": root,
                "name": "lookup_order",
                "kind": "tool_call",
                "status": "ok",
                "start_time": T1,
                "end_time": T2,
                "is_root": False,
                "is_event": False,
                "correlation": correlation,
            },
        ],
        "logs": [
            {
                "log_id": f"log-{trace_id[:8]}",
                "trace_id": trace_id,
                "span_id": tool,
                "timestamp": T1,
                "level": "info",
                "message": "order found",
                "correlation": correlation,
            }
        ],
        "metrics": [
            {
                "metric_id": f"metric-{trace_id[:8]}",
                "name": "orders.lookups",
                "kind": "counter",
                "value": 1,
                "timestamp": T1,
                "labels": {"region": "eu"},
                "trace_id": trace_id,
                "correlation": correlation,
            }
        ],
        "scores": [
            {
                "score_id": f"score-{trace_id[:8]}",
                "trace_id": trace_id,
                "scorer_id": "helpfulness",
                "source": "live",
                "value": 0.75,
                "timestamp": T2,
                "correlation": correlation,
            }
        ],
        "feedback": [
            {
                "feedback_id": f"feedback-{trace_id[:8]}",
                "trace_id": trace_id,
                "kind": "thumbs",
                "value": "up",
                "timestamp": T2,
                "correlation": correlation,
            }
        ],
    }


# Spans at times relative to now, for tests whose outcome depends on the server's clock (tail
# sampling decides by how long ago a root ended).


def rfc3339(nanos: int) -> str:
    """`nanos` since the epoch as an RFC 3339 UTC timestamp with nanoseconds."""
    seconds, fraction = divmod(nanos, 1_000_000_000)
    stamp = datetime.fromtimestamp(seconds, tz=UTC).strftime("%Y-%m-%dT%H:%M:%S")
    return f"{stamp}.{fraction:09d}Z"


def simple_trace(
    trace_id: str,
    *,
    start_ns: int,
    end_ns: int,
    children: int = 1,
    failing_child: bool = False,
    name: str = "handle_request",
) -> list[dict[str, Any]]:
    """A root span and `children` tool calls under it, all within [start_ns, end_ns]; with
    `failing_child` the last child ends in an error."""
    root_id = new_span_id()
    correlation = {"project": "", "service_name": "sampled-bot"}
    spans: list[dict[str, Any]] = [
        {
            "trace_id": trace_id,
            "span_id": root_id,
            "name": name,
            "kind": "agent_run",
            "status": "ok",
            "start_time": rfc3339(start_ns),
            "end_time": rfc3339(end_ns),
            "correlation": correlation,
        }
    ]
    for position in range(children):
        child = child_span(trace_id, root_id, start_ns=start_ns, end_ns=end_ns)
        if failing_child and position == children - 1:
            child["status"] = "error"
            child["error"] = {"message": "tool timed out", "kind": "TimeoutError"}
        spans.append(child)
    return spans


def child_span(trace_id: str, parent_id: str, *, start_ns: int, end_ns: int) -> dict[str, Any]:
    """One successful tool call under `parent_id`."""
    return {
        "trace_id": trace_id,
        "span_id": new_span_id(),
        "parent_span_id": parent_id,
        "name": "lookup",
        "kind": "tool_call",
        "status": "ok",
        "start_time": rfc3339(start_ns),
        "end_time": rfc3339(end_ns),
        "correlation": {"project": "", "service_name": "sampled-bot"},
    }


# What a stopped daemon stored, read straight from its stores (not through its API).

_CHDB_DUMP = """
import json, sys
import chdb.session
session = chdb.session.Session(sys.argv[1])
try:
    names = session.query(
        "SELECT name FROM system.tables WHERE database = currentDatabase() ORDER BY name", "TSV"
    ).bytes().decode().split()
    dump = {
        n: session.query(f"SELECT * FROM `{n}`", "TSV").bytes().decode("utf-8", "replace")
        for n in names
    }
    print(json.dumps(dump))
finally:
    session.close()
"""


def stored_tables(env: Mapping[str, str], data_dir: Path) -> dict[str, str]:
    """Every row of every table the stores of a stopped daemon hold, as text, by table.

    `env` is the daemon's storage environment (`storage_env`). SQLite: every `*.db` file of
    `data_dir`, opened immutable so reading creates no file (tables named `file:table`, each
    row's values tab-separated). PostgreSQL: every table of the database, each row as
    PostgreSQL's own text form of it (`row::text`, every column). ClickHouse (chdb, which is one
    engine per process, so it runs in a child process): `SELECT * ... FORMAT TSV` per table.
    Control-plane tables stay in SQLite files of `data_dir` on every backend but PostgreSQL.
    """
    tables: dict[str, str] = {}
    for database in sorted(data_dir.glob("*.db")):
        uri = f"file:{quote(str(database))}?immutable=1"
        with contextlib.closing(sqlite3.connect(uri, uri=True)) as connection:
            names = [
                row[0]
                for row in connection.execute(
                    "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name"
                )
            ]
            for name in names:
                rows = connection.execute(f'SELECT * FROM "{name}"').fetchall()
                tables[f"{database.name}:{name}"] = "\n".join(
                    "\t".join(str(value) for value in row) for row in rows
                )
    backend = env.get("MCPD_STORAGE_BACKEND", "sqlite")
    if backend == "postgres":
        engine = sa.create_engine(env["MCPD_STORAGE_POSTGRES_URL"])
        try:
            with engine.connect() as connection:
                for name in sa.inspect(connection).get_table_names():
                    result = connection.execute(sa.text(f'SELECT t::text FROM "{name}" AS t'))
                    tables[name] = "\n".join(row[0] for row in result)
        finally:
            engine.dispose()
    elif backend == "clickhouse":
        path = clickhouse_path(env)
        dumped = subprocess.run(
            [sys.executable, "-c", _CHDB_DUMP, str(path)],
            capture_output=True,
            check=True,
            timeout=120,
        )
        tables.update(json.loads(dumped.stdout))
    return tables


def clickhouse_path(env: Mapping[str, str]) -> Path:
    """Where a chdb-backed daemon keeps its ClickHouse data."""
    url = env["MCPD_STORAGE_CLICKHOUSE_URL"]
    assert url.startswith("chdb://"), url
    return Path(url.removeprefix("chdb://"))
