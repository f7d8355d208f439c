"""Cause chains: why a step of a run ended as it did, walked backwards along the data its
definition says it read.

A step reads an ancestor through every `${steps.<id>...}` path in its own templates: a node's
`when`, `input`, `key`, `items` and `until`; a branch's or body's `input`, with its enclosing
node's `when` and `items`. Each such path is an edge (a CauseLink) from the step to the
ancestor's journal key: a node's own id, or, for a loop body read inside the loop, the
iteration before the reading one. The walk goes breadth first from the asked step, expanding
each ancestor once, up to `max_depth` levels; links are ordered by depth, then by where the
reading step sits in the definition, then by the template a path sits in (`when`, `input`,
`key`, `items`, `until`; a branch's or body's `input` after its node's `when` and `items`), then
by the path's text (a body's objects come back from storage in no particular key order).

An ancestor is a silent producer when it ended `succeeded` and so did every step between it
and the asked step: nothing on that path is marked failed, so the value it produced is the
suspect. `value_kind` and `value_empty` describe what an `.output` path resolved to on the
ancestor's stored output, never the value itself; they are absent when there is no output to
read (a step that never ran or failed, or a path that reads `.status` or `.error`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from mcpd.model.v1 import enums_pb2, runs_pb2
from mcpd.orchestrator.v1 import orchestrator_service_pb2 as rpc
from mcpd.runtime.errors import InvalidArgument, NotFound, quoted
from mcpd.storage.interfaces import RunReads
from mcpd.storage.run_records import AttemptRow
from mcpd.workflows import Missing, TemplatePath, iteration_key, paths_in
from mcpd.workflows.templates import resolve
from services.orchestrator.bodies import Bodies, step_at
from services.orchestrator.runs import attempt_error

__all__ = ["DEFAULT_DEPTH", "MAX_DEPTH", "Causes"]

DEFAULT_DEPTH = 8
MAX_DEPTH = 64
_ITERATION = re.compile(r"(?P<loop>[a-z][a-z0-9_]*)\[(?P<n>\d+)\]/(?P<body>[a-z][a-z0-9_]*)")
_NODE_SOURCES = ("when", "input", "key", "items", "until")
_KINDS = {
    type(None): "null",
    bool: "boolean",
    int: "number",
    float: "number",
    str: "string",
    list: "array",
    dict: "object",
}


@dataclass(frozen=True, slots=True)
class _Edge:
    """One path through which `consumer` reads `ancestor`."""

    consumer: str
    ancestor: str
    path: TemplatePath
    rank: tuple[int, int]


class Causes:
    """Answering StepCause from the journal and the pinned definition."""

    def __init__(self, store: RunReads, bodies: Bodies) -> None:
        self._store = store
        self._bodies = bodies

    def cause(self, request: rpc.GetStepCauseRequest) -> runs_pb2.StepCause:
        depth = request.max_depth if request.HasField("max_depth") else DEFAULT_DEPTH
        if not 1 <= depth <= MAX_DEPTH:
            raise InvalidArgument(f"max_depth must be 1 to {MAX_DEPTH}", field="max_depth")
        detail = self._store.run_detail(request.project, request.run_id)
        if detail is None:
            raise NotFound(f"run {quoted(request.run_id)} does not exist", field="run_id")
        journal = _Journal(detail.attempts)
        asked = journal.latest(request.step_key)
        if asked is None:
            raise NotFound(
                f"step {quoted(request.step_key)} has no attempt in this run", field="step_key"
            )
        body = self._bodies.of(detail.run)
        answer = runs_pb2.StepCause(
            run_id=request.run_id,
            step_key=request.step_key,
            status=_status(asked["status"]),
            attempts=journal.count(request.step_key),
        )
        if asked["error"] is not None:
            answer.error.CopyFrom(attempt_error(asked["error"]))
        links, truncated = _walk(body, journal, request.step_key, depth)
        answer.chain.extend(links)
        answer.truncated = truncated
        return answer


class _Journal:
    def __init__(self, attempts: Sequence[AttemptRow]) -> None:
        self._latest: dict[str, AttemptRow] = {}
        self._counts: dict[str, int] = {}
        for row in attempts:
            key = row["step_key"]
            self._counts[key] = self._counts.get(key, 0) + 1
            if key not in self._latest or row["attempt"] > self._latest[key]["attempt"]:
                self._latest[key] = row

    def latest(self, key: str) -> AttemptRow | None:
        return self._latest.get(key)

    def count(self, key: str) -> int:
        return self._counts.get(key, 0)


def _walk(
    body: Mapping[str, Any], journal: _Journal, asked: str, max_depth: int
) -> tuple[list[runs_pb2.CauseLink], bool]:
    """The chain's links in order, and whether `max_depth` left ancestors unvisited."""
    links: list[runs_pb2.CauseLink] = []
    # The steps between each visited key and the asked step, for `silent_producer`.
    between: dict[str, list[str]] = {asked: []}
    frontier = [asked]
    for depth in range(1, max_depth + 1):
        edges = sorted(
            (edge for consumer in frontier for edge in _edges(body, consumer)),
            key=lambda edge: edge.rank,
        )
        next_frontier: list[str] = []
        for edge in edges:
            path_between = [*between[edge.consumer], edge.consumer][1:]
            links.append(_link(journal, edge, depth, path_between))
            if edge.ancestor not in between:
                between[edge.ancestor] = [*between[edge.consumer], edge.consumer]
                next_frontier.append(edge.ancestor)
        frontier = next_frontier
        if not frontier:
            return links, False
    return links, any(_edges(body, key) for key in frontier)


def _edges(body: Mapping[str, Any], consumer: str) -> list[_Edge]:
    """The paths through which the step `consumer` reads other steps, with their ancestors."""
    at = step_at(body, consumer)
    order = next(n for n, node in enumerate(body["steps"]) if node["id"] == at.node["id"])
    sources: list[Any] = []
    if at.step is at.node:
        sources = [at.node.get(name) for name in _NODE_SOURCES]
    else:
        sources = [at.node.get("when"), at.node.get("items"), at.step.get("input")]
    edges = []
    # By the text within a template: a stored body's object keys keep no order of their own.
    paths = [path for source in sources for path in sorted(paths_in(source), key=lambda p: p.text)]
    for index, path in enumerate(paths):
        ancestor = _ancestor(body, consumer, path)
        if ancestor is not None:
            edges.append(_Edge(consumer, ancestor, path, (order, index)))
    return edges


def _ancestor(body: Mapping[str, Any], consumer: str, path: TemplatePath) -> str | None:
    """The journal key a `steps.` path read from `consumer` names, else None."""
    step_id = path.step_id
    if step_id is None:
        return None
    if any(node["id"] == step_id for node in body["steps"]):
        return step_id
    iteration = _ITERATION.fullmatch(consumer)
    if iteration is not None and iteration["body"] == step_id and int(iteration["n"]) > 0:
        return iteration_key(iteration["loop"], int(iteration["n"]) - 1, step_id)
    return None


def _link(journal: _Journal, edge: _Edge, depth: int, between: Sequence[str]) -> runs_pb2.CauseLink:
    ancestor = journal.latest(edge.ancestor)
    status = ancestor["status"] if ancestor is not None else "pending"
    link = runs_pb2.CauseLink(
        step_key=edge.ancestor,
        status=_status(status),
        attempts=journal.count(edge.ancestor),
        template_path=edge.path.text,
        consumed_by=edge.consumer,
        depth=depth,
        silent_producer=status == "succeeded"
        and all((row := journal.latest(key)) and row["status"] == "succeeded" for key in between),
    )
    field = edge.path.segments[1] if len(edge.path.segments) > 1 else None
    if ancestor is not None and status == "succeeded" and field == "output":
        value = resolve(
            TemplatePath(edge.path.text, "output", edge.path.segments[2:]),
            {"output": ancestor["output"]},
        )
        if value is not Missing:
            link.value_kind = enums_pb2.ValueKind.Value(f"VALUE_KIND_{_KINDS[type(value)].upper()}")
            link.value_empty = value is None or value in ("", [], {})
    return link


def _status(name: str) -> enums_pb2.AttemptStatus.ValueType:
    return enums_pb2.AttemptStatus.Value(f"ATTEMPT_STATUS_{name.upper()}")
