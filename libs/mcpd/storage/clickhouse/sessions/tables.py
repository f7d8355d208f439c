"""The session tables' columns on ClickHouse, and moving rows in and out of them.

Rows are the dicts of `mcpd.storage.sql.sessions.rows` (shared with the SQL backends, so the
digests and records are the same); here they are inserted as JSONEachRow text sent as the
INSERT's data (`ClickHouseExecutor.insert`: the HTTP request body), so no value becomes SQL
text and no size limit of a URL applies, and read back as tuples turned into dicts by the
column lists below. Every column's type below is its table type, as the rows go into the table
as they are parsed.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from mcpd.storage.clickhouse.executor import ClickHouseExecutor
from mcpd.storage.sql.sessions.rows import Row

# Characters of JSONEachRow text per INSERT: bounds the memory one statement's data takes.
INSERT_BYTES = 4_000_000

_NULLABLE = "Nullable(String)"
SESSIONS: dict[str, str] = {
    "project": "String",
    "id": "String",
    "source": "String",
    "harness": "String",
    "session_key": "String",
    "path": "String",
    "title": _NULLABLE,
    "display_label": "String",
    "started_at": "Int64",
    "updated_at": "Int64",
    "completed": "Bool",
    "turn_count": "Int64",
    "event_count": "Int64",
    "mode": _NULLABLE,
    "slug": _NULLABLE,
    "summary": _NULLABLE,
    "cwd": _NULLABLE,
}
SESSION_EXTRA: dict[str, str] = {
    "content_hash": "String",
    "search_docs": "UInt64",
    "search_length": "UInt64",
    "version": "UInt64",
}
TURNS: dict[str, str] = {
    "project": "String",
    "id": "String",
    "session_id": "String",
    "ordinal": "Int64",
    "started_at": "Int64",
    "updated_at": "Int64",
    "completed": "Bool",
    "event_count": "Int64",
    "terminal_event_id": _NULLABLE,
    "user_input_event_id": _NULLABLE,
    "final_response_event_id": _NULLABLE,
    "tools_called": "Array(String)",
    "event_types": "Array(String)",
    "row_hash": "String",
}
EVENTS: dict[str, str] = {
    "project": "String",
    "id": "String",
    "session_id": "String",
    "turn_id": "String",
    "ordinal": "Int64",
    "seq": "Int64",
    "type": "String",
    "timestamp_ns": "Int64",
    "terminal": "Bool",
    "text": "String",
    "tool_name": _NULLABLE,
    "model": _NULLABLE,
    "originating_model": _NULLABLE,
    "call_id": _NULLABLE,
    "payload": _NULLABLE,
    "line": "Int64",
    "harness": "String",
    "source": "String",
    "row_hash": "String",
}
SEARCH: dict[str, str] = {"searchable": "Bool", "tokens": "Array(String)", "doc_length": "UInt64"}
TOUCHES: dict[str, str] = {
    "project": "String",
    "session_id": "String",
    "position": "Int64",
    "event_id": "String",
    "turn_id": _NULLABLE,
    "timestamp_ns": "Nullable(Int64)",
    "tool_name": "String",
    "raw_path": "String",
    "tail": "String",
    "basename": "String",
    "tail_is_absolute": "Bool",
    "worktree_root": _NULLABLE,
    "git_common_dir": _NULLABLE,
    "mutation": "Bool",
    "phase": "String",
    "harness": "String",
    "source": "String",
}
VERSIONED: dict[str, str] = {"version": "UInt64", "is_deleted": "UInt8"}


def select_list(columns: Mapping[str, str]) -> str:
    """The columns, comma-separated, for a SELECT."""
    return ", ".join(columns)


def as_dicts(columns: Mapping[str, str], rows: Sequence[tuple[Any, ...]]) -> list[Row]:
    """Rows read with `select_list(columns)`, as dicts (payloads decoded from JSON text)."""
    names = list(columns)
    found = [dict(zip(names, row, strict=True)) for row in rows]
    if "payload" in columns:
        for row in found:
            payload = row["payload"]
            row["payload"] = json.loads(payload) if payload is not None else None
    return found


def insert(
    executor: ClickHouseExecutor, table: str, columns: Mapping[str, str], rows: Sequence[Row]
) -> None:
    """Insert `rows` (each holding every column in `columns`) in as few statements as fit."""
    names = list(columns)
    for data in _batches(columns, rows):
        executor.insert(table, names, data, "JSONEachRow")


def _batches(columns: Mapping[str, str], rows: Sequence[Row]) -> Iterator[str]:
    lines: list[str] = []
    size = 0
    for row in rows:
        values = {name: _json_value(name, row[name]) for name in columns}
        line = json.dumps(values, separators=(",", ":"))
        if lines and size + len(line) > INSERT_BYTES:
            yield "\n".join(lines)
            lines, size = [], 0
        lines.append(line)
        size += len(line) + 1
    if lines:
        yield "\n".join(lines)


def _json_value(name: str, value: Any) -> Any:
    if name == "payload" and value is not None:
        return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return value
