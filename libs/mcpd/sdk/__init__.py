"""The Python SDK for the orchestrator: a `Client` for definitions, runs and events, and a
`Worker` that serves steps (docs/orchestrator.md has a worked example)."""

from mcpd.sdk.client import TERMINAL, Client, definitions_of
from mcpd.sdk.worker import Handler, Step, StepFailed, StepOutput, Worker

__all__ = [
    "TERMINAL",
    "Client",
    "Handler",
    "Step",
    "StepFailed",
    "StepOutput",
    "Worker",
    "definitions_of",
]
