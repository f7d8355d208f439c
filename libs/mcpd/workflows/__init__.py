"""The workflow definition format: the body's schema and write-time checks (`definitions`),
templates (`templates`), guards (`guards`) and step keys (`step_keys`). Shared by the
orchestrator, which stores and walks definitions, and by clients that build them and workers
that serve their steps; and how far a run strays from its version's usual step count
(`divergence`), shared by the services that read run shapes."""

from mcpd.workflows.definitions import check_definition, definition_schema, json_path
from mcpd.workflows.divergence import BASELINE_RUNS, MIN_BASELINE, OUTLIER_Z, modified_z
from mcpd.workflows.guards import holds, truthy
from mcpd.workflows.step_keys import (
    branch_key,
    handler_name,
    idempotency_key,
    item_key,
    iteration_key,
)
from mcpd.workflows.templates import Missing, TemplatePath, parse_path, paths_in, render

__all__ = [
    "BASELINE_RUNS",
    "MIN_BASELINE",
    "OUTLIER_Z",
    "Missing",
    "TemplatePath",
    "branch_key",
    "check_definition",
    "definition_schema",
    "handler_name",
    "holds",
    "idempotency_key",
    "item_key",
    "iteration_key",
    "json_path",
    "modified_z",
    "parse_path",
    "paths_in",
    "render",
    "truthy",
]
