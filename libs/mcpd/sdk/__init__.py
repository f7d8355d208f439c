"""The Python SDK: for the orchestrator, a `Client` for definitions, runs and events, and a
`Worker` that serves steps (docs/orchestrator.md has a worked example); for evaluation, an
`EvaluationClient` for datasets, experiments and comparisons, whose `run_experiment` runs a
function over a dataset as an experiment (docs/evaluation.md)."""

from mcpd.sdk.client import TERMINAL, Client, definitions_of
from mcpd.sdk.evaluation import (
    EvaluationClient,
    ExperimentResult,
    ItemRun,
    ScopedKeys,
    Task,
)
from mcpd.sdk.worker import Handler, Step, StepFailed, StepOutput, Worker

__all__ = [
    "TERMINAL",
    "Client",
    "EvaluationClient",
    "ExperimentResult",
    "Handler",
    "ItemRun",
    "ScopedKeys",
    "Step",
    "StepFailed",
    "StepOutput",
    "Task",
    "Worker",
    "definitions_of",
]
