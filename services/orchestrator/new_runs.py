"""A new run: its row and its first transition, shared by a start and by a subworkflow's child.

The first transition writes `run_started`, puts the cursor on the first node (logging
`run_cursor`), sets the `run_timeout` timer of a definition with `limits.run_timeout_ms`, and
walks from there. Input is validated against the definition's `input_schema` with a
maintained JSON Schema library; a failure names `input.<path>`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, cast

from jsonschema import Draft202012Validator
from jsonschema.exceptions import best_match

from mcpd.model.v1 import telemetry_pb2
from mcpd.runtime.errors import InvalidArgument
from mcpd.runtime.ids import new_id, new_trace_id
from mcpd.signals.messages import CORRELATION_FIELDS
from mcpd.storage.run_records import RunRow, StoredDefinition
from mcpd.workflows import json_path

if TYPE_CHECKING:
    from services.orchestrator.walk import Moves

__all__ = ["CORRELATION", "check_input", "first_transition", "new_run_row", "run_correlation"]

# The run's own id is its correlation's `run_id`; the rest is kept as the start sent it.
CORRELATION = tuple(name for name in CORRELATION_FIELDS if name != "run_id")
_NS_PER_MS = 1_000_000


def check_input(schema: Any, document: Any) -> None:
    """InvalidArgument naming `input.<path>` when the input fails the definition's schema."""
    if schema is None:
        return
    error = best_match(Draft202012Validator(schema).iter_errors(document))
    if error is None:
        return
    field = json_path(["input", *error.absolute_path])
    raise InvalidArgument(
        f"{field} does not match the definition's input_schema: {error.message}", field=field
    )


def new_run_row(
    definition: StoredDefinition,
    *,
    project: str,
    document: Any,
    correlation: Mapping[str, str | None],
    now: int,
    idempotency_key: str | None = None,
    parent: RunRow | None = None,
    parent_step_key: str | None = None,
) -> RunRow:
    """The row of a run of `definition`, the root of its tree or the child of `parent`."""
    run_id = new_id()
    limits = definition.body.get("limits", {})
    timeout_ms = limits.get("run_timeout_ms")
    first = definition.body["steps"][0]
    fields: dict[str, Any] = {
        "run_id": run_id,
        "project": project,
        "definition_id": definition.id,
        "definition_version": definition.version,
        "status": "running",
        # Where the cursor starts; the first transition puts it there and logs it.
        "cursor_index": 0,
        "cursor_construct": first["kind"],
        "cursor_step_key": first["id"],
        "input": document,
        "output": None,
        "state": None,
        "error": None,
        **{name: correlation.get(name) for name in CORRELATION},
        "trace_id": parent["trace_id"] if parent is not None else new_trace_id(),
        "steps_used": 0,
        "max_steps": limits.get("max_steps"),
        "cost_usd": 0.0,
        "max_cost_usd": limits.get("max_cost_usd"),
        "deadline_at": None if timeout_ms is None else now + timeout_ms * _NS_PER_MS,
        "idempotency_key": idempotency_key,
        "root_run_id": parent["root_run_id"] if parent is not None else run_id,
        "parent_run_id": parent["run_id"] if parent is not None else None,
        "parent_step_key": parent_step_key,
        "depth": parent["depth"] + 1 if parent is not None else 0,
        "next_event_seq": 0,
        "created_at": now,
        "updated_at": now,
        "ended_at": None,
    }
    return cast(RunRow, fields)


def run_correlation(stored: RunRow) -> telemetry_pb2.Correlation:
    """The run's correlation: as the start sent it, with the run's own project and id."""
    row = cast(Mapping[str, Any], stored)
    correlation = telemetry_pb2.Correlation(project=row["project"], run_id=row["run_id"])
    for name in CORRELATION:
        if row[name] is not None:
            setattr(correlation, name, row[name])
    return correlation


def first_transition(moves: Moves) -> None:
    """What a new run writes with itself (see the module docstring)."""
    run = moves.run
    moves.event(
        "run_started",
        {"definition_id": run["definition_id"], "definition_version": run["definition_version"]},
    )
    moves.move_cursor(0)
    if run["deadline_at"] is not None:
        moves.set_timer("run_timeout", "", None, run["deadline_at"])
    moves.advance()
