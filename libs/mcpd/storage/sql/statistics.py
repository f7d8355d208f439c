"""Planner statistics for the PostgreSQL trace store when the server does not keep them.

PostgreSQL plans from statistics that ANALYZE gathers, normally by autovacuum. On a server where
autovacuum is off, a table loaded from empty keeps the statistics of its first rows, and the
planner goes on believing `spans` holds a few thousand rows: once the table is large, the
projection's read of a group's trace ids by primary key becomes a bitmap scan of every span of
the project, and the trace lists' second page and span-column filters lose their index plans the
same way.

`PlannerStatistics` applies autovacuum's own rule in its place: a table is analyzed once the
rows written to it since its last ANALYZE exceed `ANALYZE_THRESHOLD + ANALYZE_SCALE_FACTOR *
rows at that ANALYZE` (the server defaults of `autovacuum_analyze_threshold` and
`autovacuum_analyze_scale_factor`). ANALYZE runs in a background thread, one at a time, after
the write that crossed the line has committed; it takes only a lock that writers do not wait
for. With autovacuum on (the server default) it does nothing.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping

from sqlalchemy import text
from sqlalchemy.engine import Engine

log = logging.getLogger(__name__)

ANALYZE_THRESHOLD = 50
ANALYZE_SCALE_FACTOR = 0.1


class PlannerStatistics:
    """ANALYZEs tables as writes grow them, when the server's autovacuum is off."""

    def __init__(self, engine: Engine, *, enabled: bool | None = None) -> None:
        """`enabled`: None to ask the server (on when its autovacuum is off)."""
        self._engine = engine
        self._lock = threading.Lock()
        self._enabled = enabled
        # Per table: rows written since its last ANALYZE, and its row count at that ANALYZE.
        self._written: dict[str, int] = {}
        self._rows_then: dict[str, float] = {}
        self._running: threading.Thread | None = None

    @property
    def enabled(self) -> bool:
        """Whether this keeper runs ANALYZE (asks the server once when not told)."""
        if self._enabled is None:
            with self._engine.connect() as conn:
                autovacuum = conn.execute(text("SELECT current_setting('autovacuum')")).scalar()
            self._enabled = autovacuum != "on"
            if self._enabled:
                log.info("autovacuum is off: the trace store runs ANALYZE itself as tables grow")
        return self._enabled

    def wrote(self, counts: Mapping[str, int]) -> None:
        """Note rows just committed to each table; start an ANALYZE of those due for one."""
        if not self.enabled:
            return
        with self._lock:
            for table, count in counts.items():
                if count:
                    self._written[table] = self._written.get(table, 0) + count
            due = [table for table, count in self._written.items() if count > self._limit(table)]
            if not due or (self._running is not None and self._running.is_alive()):
                return
            for table in due:
                self._written[table] = 0
            self._running = threading.Thread(
                target=self._analyze, args=(sorted(due),), name="mcpd-analyze", daemon=True
            )
            self._running.start()

    def wait(self) -> None:
        """Wait for a running ANALYZE to finish (tests, and closing the store)."""
        running = self._running
        if running is not None:
            running.join()

    def _limit(self, table: str) -> float:
        return ANALYZE_THRESHOLD + ANALYZE_SCALE_FACTOR * self._rows_then.get(table, 0.0)

    def _analyze(self, tables: list[str]) -> None:
        try:
            with self._engine.connect() as conn:
                for table in tables:
                    # Names come from the schema's own table names, never from input.
                    conn.execute(text(f'ANALYZE "{table}"'))
                    rows = conn.execute(
                        text("SELECT reltuples FROM pg_class WHERE oid = to_regclass(:name)"),
                        {"name": table},
                    ).scalar()
                    with self._lock:
                        self._rows_then[table] = max(float(rows or 0.0), 0.0)
                conn.commit()
        except Exception:
            log.exception("ANALYZE of %s failed; the planner keeps its old statistics", tables)
