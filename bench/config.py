"""Options every benchmark accepts, and the registry entry type."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from bench.harness import RESULTS_DIR


@dataclasses.dataclass(frozen=True, slots=True)
class BenchConfig:
    """How long and how hard to drive a benchmark.

    Each measured run lasts ``seconds`` unless ``count`` is set, in which case it issues
    exactly ``count`` requests. ``warmup_seconds`` of unrecorded load precede each run.
    ``events`` sizes the corpus of benchmarks that generate one (None: their default).
    """

    seconds: float = 10.0
    count: int | None = None
    warmup_seconds: float = 1.0
    concurrencies: tuple[int, ...] = (1, 16)
    start_timeout_s: float = 60.0
    results_dir: Path = RESULTS_DIR
    events: int | None = None

    def __post_init__(self) -> None:
        if self.seconds <= 0:
            raise ValueError("seconds must be positive")
        if self.count is not None and self.count < 1:
            raise ValueError("count must be at least 1")
        if self.warmup_seconds < 0:
            raise ValueError("warmup_seconds must not be negative")
        if not self.concurrencies or min(self.concurrencies) < 1:
            raise ValueError("concurrencies must be positive")
        if self.events is not None and self.events < 10:
            raise ValueError("events must be at least 10")


@dataclasses.dataclass(frozen=True, slots=True)
class Benchmark:
    """A registered benchmark: ``run`` prints its tables, writes its JSON and returns it."""

    name: str
    description: str
    run: Callable[[BenchConfig], Mapping[str, Any]]
