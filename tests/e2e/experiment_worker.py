"""The worker process of the experiment tests: `python -m tests.e2e.experiment_worker TARGET`.

It registers two one-step definitions and serves them with the SDK's `Worker` until SIGTERM:
`double` answers twice its input's `n`; `double_sloppy` does too, but answers `n + 1` when `n`
is a multiple of three (a candidate that regressed on a third of the cases).
"""

from __future__ import annotations

import sys
from typing import Any

from mcpd.sdk import Client, Step, Worker, definitions_of

__all__ = ["DEFINITIONS"]


def _doubling(step_id: str) -> dict[str, Any]:
    return {
        "input_schema": {
            "type": "object",
            "required": ["n"],
            "properties": {"n": {"type": "integer"}},
        },
        "steps": [{"id": step_id, "kind": "task", "input": {"n": "${input.n}"}}],
        "output": f"${{steps.{step_id}.output}}",
    }


DEFINITIONS = {"double": _doubling("answer"), "double_sloppy": _doubling("sloppy_answer")}


def double(step: Step) -> int:
    return int(step.input["n"]) * 2


def sloppy(step: Step) -> int:
    n = int(step.input["n"])
    return n + 1 if n % 3 == 0 else n * 2


def main() -> None:
    client = Client(sys.argv[1])
    worker = Worker(
        client,
        worker_id="experiments",
        handlers={"answer": double, "sloppy_answer": sloppy},
        definitions=definitions_of(sorted(DEFINITIONS.items())),
    )
    with client:
        worker.run_until_signalled()


if __name__ == "__main__":
    main()
