"""Running a snippet under other hash seeds: what a pure function must not notice."""

from __future__ import annotations

import os
import subprocess
import sys

SEEDS = ("1", "2")


def printed_under_seeds(program: str) -> set[str]:
    """What `python -c program` prints under each of SEEDS as PYTHONHASHSEED (one answer when
    the program does not depend on the seed)."""
    return {
        subprocess.run(
            [sys.executable, "-c", program],
            env={**os.environ, "PYTHONHASHSEED": seed},
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        for seed in SEEDS
    }
