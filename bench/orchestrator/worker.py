"""One benchmark worker process: the SDK's Worker serving the 3-step workflow's steps, each
answering at once. `python -m bench.orchestrator.worker TARGET WORKER_ID CONCURRENCY`."""

from __future__ import annotations

import sys
from typing import Any

from mcpd.sdk import Client, Step, Worker


def answer(step: Step) -> Any:
    return {"step": step.step_key, "n": step.attempt}


def main(argv: list[str]) -> int:
    target, worker_id, concurrency = argv[0], argv[1], int(argv[2])
    with Client(target) as client:
        worker = Worker(
            client,
            worker_id=worker_id,
            handlers={"one": answer, "two": answer, "three": answer},
            concurrency=concurrency,
            wait_ms=2000,
        )
        worker.run_until_signalled()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
