"""A worker process for the fault tests: `python -m tests.e2e.fault_worker TARGET LOG`.

It serves `prepare` (answers at once), `slow` (sleeps 0.3 s) and `pay` (at_most_once: appends
`<run_id> <attempt>` to LOG before its body sleeps 0.3 s, so the test counts how often a body
ran) with the SDK's Worker until SIGTERM."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Any

from mcpd.sdk import Client, Step, Worker


def main(argv: list[str]) -> int:
    target, log = argv[0], Path(argv[1])

    def prepare(step: Step) -> Any:
        return {"ready": True}

    def slow(step: Step) -> Any:
        time.sleep(0.3)
        return {"slow": step.attempt}

    def pay(step: Step) -> Any:
        with log.open("a") as out:
            out.write(f"{step.run_id} {step.attempt}\n")
            out.flush()
            os.fsync(out.fileno())
        time.sleep(0.3)
        return {"paid": True}

    with Client(target) as client:
        worker = Worker(
            client,
            worker_id=f"fault-{os.getpid()}",
            handlers={"prepare": prepare, "slow": slow, "pay": pay},
            concurrency=4,
            wait_ms=1000,
        )
        worker.run_until_signalled()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
