"""The same 3-step workflow on DBOS, run by DBOS's own interpreter (not mcpd's):
`python dbos_runner.py DATABASE_URL RUNS CONCURRENCY` prints one JSON line with the seconds the
runs took from the first start to the last end and the CPU seconds this process spent on them.
Steps answer at once, as mcpd's do."""

from __future__ import annotations

import json
import sys
import time
from concurrent.futures import ThreadPoolExecutor

from dbos import DBOS, DBOSConfig


@DBOS.step()
def one(n: int) -> int:
    return n + 1


@DBOS.step()
def two(n: int) -> int:
    return n + 1


@DBOS.step()
def three(n: int) -> int:
    return n + 1


@DBOS.workflow()
def three_steps(n: int) -> int:
    return three(two(one(n)))


def main() -> None:
    url, runs, concurrency = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    config: DBOSConfig = {"name": "mcpd-bench", "system_database_url": url}
    DBOS(config=config)
    DBOS.launch()
    three_steps(0)  # warm-up
    began, cpu = time.perf_counter(), time.process_time()
    with ThreadPoolExecutor(concurrency) as pool:
        results = list(pool.map(three_steps, range(runs)))
    seconds, cpu_seconds = time.perf_counter() - began, time.process_time() - cpu
    assert results == [n + 3 for n in range(runs)]
    print(json.dumps({"runs": runs, "seconds": seconds, "cpu_seconds": cpu_seconds}), flush=True)
    DBOS.destroy()


if __name__ == "__main__":
    main()
