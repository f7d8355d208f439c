"""Run shapes: what the evaluation service's run watches read of the runs the orchestrator owns
(the internal `GetRunShapes`, called with the service credential).

A window's runs (those that ended in [from, to), and those still running that last changed in
it), newest first, each with its step count and the most attempts it made at one node of its
definition; and for each definition version among them the step counts of its newest succeeded
runs, the usual shape a run of that version is measured against. The store computes both
(`RunReads.run_shapes`); this checks the request and answers the messages.
"""

from __future__ import annotations

from typing import Literal, Protocol, cast

from mcpd.codec import enum_names
from mcpd.model.v1 import enums_pb2
from mcpd.orchestrator.v1 import orchestrator_service_pb2 as rpc
from mcpd.runtime.errors import InvalidArgument
from mcpd.signals.messages import nanos_of, timestamp_of
from mcpd.storage.run_records import RunShape, RunShapes

__all__ = ["DEFAULT_BASELINE", "DEFAULT_LIMIT", "MAX_BASELINE", "MAX_LIMIT", "Shapes"]

DEFAULT_LIMIT = 5000
MAX_LIMIT = 10_000
DEFAULT_BASELINE = 200
MAX_BASELINE = 1000
_RUN_STATUS = enum_names(enums_pb2.RunStatus.DESCRIPTOR).by_name


class ShapeStore(Protocol):
    """What run shapes need of the run store."""

    def run_shapes(
        self, project: str, *, start: int, end: int, limit: int, baseline: int
    ) -> RunShapes: ...


class Shapes:
    """Reads the shapes of a project's runs over a window (see the module docstring)."""

    def __init__(self, store: ShapeStore) -> None:
        self._store = store

    def read(self, request: rpc.GetRunShapesRequest) -> rpc.GetRunShapesResponse:
        """The window's run shapes and their versions' baselines (blocking: from a worker
        thread)."""
        for name in ("from", "to"):
            if not request.HasField(name):
                raise InvalidArgument(f"{name} is required: the window to read", field=name)
        start, end = nanos_of(getattr(request, "from")), nanos_of(request.to)
        if end <= start:
            raise InvalidArgument("to must come after from", field="to")
        limit = _bounded(request, "limit", DEFAULT_LIMIT, 1, MAX_LIMIT)
        baseline = _bounded(request, "baseline", DEFAULT_BASELINE, 0, MAX_BASELINE)
        found = self._store.run_shapes(
            request.project, start=start, end=end, limit=limit, baseline=baseline
        )
        return rpc.GetRunShapesResponse(
            runs=[_shape(run) for run in found.runs],
            truncated=found.truncated,
            baselines=[
                rpc.RunStepBaseline(
                    definition_id=definition_id, definition_version=version, steps_used=steps
                )
                for (definition_id, version), steps in sorted(found.baselines.items())
            ],
        )


def _bounded(
    request: rpc.GetRunShapesRequest,
    name: Literal["limit", "baseline"],
    default: int,
    least: int,
    most: int,
) -> int:
    if not request.HasField(name):
        return default
    value: int = getattr(request, name)
    if not least <= value <= most:
        raise InvalidArgument(f"{name} must be {least} to {most}", field=name)
    return value


def _shape(run: RunShape) -> rpc.RunShape:
    shape = rpc.RunShape(
        run_id=run.run_id,
        definition_id=run.definition_id,
        definition_version=run.definition_version,
        status=cast(enums_pb2.RunStatus.ValueType, _RUN_STATUS.get(run.status, 0)),
        steps_used=run.steps_used,
        max_node_attempts=run.max_node_attempts,
    )
    if run.ended_at is not None:
        shape.ended_at.CopyFrom(timestamp_of(run.ended_at))
    return shape
