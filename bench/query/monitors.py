"""One monitor evaluation over the corpus, through the daemon: what the evaluation role pays
every `evaluation.monitor_interval_s` for each configured monitor.

Each watch of the trace store (`error_rate`, `latency_p95`, `cost`, `trace_count`) is one
`Monitors` of the evaluation service, built in this process exactly as the role builds it: its
window read from the running daemon's query service over gRPC with the deployment's service
credential (`QueryReads`, the role's own client), its latched state kept in a SQLite control
store of its own. The window is the corpus's 30 days ending at its anchor (the monitors' clock
stands there), so a reading covers every span. A timed call is one `evaluate_all`: read the
window, latch, save the state.
"""

from __future__ import annotations

import asyncio
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path

import grpc.aio

from bench.query.generator import Dataset
from mcpd.auth.service_identity import load_or_create_service_credential
from mcpd.model.v1 import enums_pb2, evaluation_pb2
from mcpd.runtime.clock import ManualClock
from mcpd.storage.sql.control_store import SqlControlStore
from mcpd.storage.sql.engine import Synchronous, create_sqlite_engine
from services.evaluation import Monitors, QueryReads, Webhooks

__all__ = ["MONITOR_QUERIES", "monitor_calls"]

WINDOW_S = 30 * 24 * 3600
WATCHES = {
    "monitor_error_rate": enums_pb2.MONITOR_WATCH_ERROR_RATE,
    "monitor_latency_p95": enums_pb2.MONITOR_WATCH_LATENCY_P95,
    "monitor_cost": enums_pb2.MONITOR_WATCH_COST,
    "monitor_trace_count": enums_pb2.MONITOR_WATCH_TRACE_COUNT,
}
MONITOR_QUERIES = tuple(WATCHES)
# The service credential's file in the data directory (cli.security.CREDENTIAL_FILE).
CREDENTIAL_FILE = "service.credential"

Answer = tuple[int, str | None]


@contextmanager
def monitor_calls(
    grpc_addr: str, data_dir: Path, dataset: Dataset
) -> Iterator[dict[str, Callable[[], Answer]]]:
    """A call per watch evaluating one monitor over the corpus through the daemon at
    `grpc_addr`, whose data directory `data_dir` holds the service credential."""
    credential = load_or_create_service_credential(data_dir / CREDENTIAL_FILE)
    clock = ManualClock(datetime.fromtimestamp(dataset.end_ns / 1e9, tz=UTC))
    loop = asyncio.new_event_loop()
    with tempfile.TemporaryDirectory(prefix="bench-monitors-") as scratch:
        engine = create_sqlite_engine(Path(scratch) / "control.db", synchronous=Synchronous.NORMAL)
        states = SqlControlStore(engine, clock=clock)
        states.migrate()

        async def connect() -> grpc.aio.Channel:
            return grpc.aio.insecure_channel(grpc_addr)

        channel = loop.run_until_complete(connect())
        reads = QueryReads(channel, credential.metadata("evaluation"))
        project = dataset.config.project

        def call_for(name: str, watch: enums_pb2.MonitorWatch.ValueType) -> Callable[[], Answer]:
            monitor = evaluation_pb2.Monitor(
                id=name,
                name=name,
                project=project,
                watch=watch,
                compare=enums_pb2.MONITOR_COMPARE_ABOVE,
                threshold=1e18,
                window_seconds=WINDOW_S,
                min_samples=1,
                enabled=True,
            )
            monitors = Monitors([monitor], reads, states, Webhooks(), clock)

            def evaluate() -> Answer:
                loop.run_until_complete(monitors.evaluate_all())
                (shown,) = monitors.list(project)
                nominal = shown.condition == enums_pb2.MONITOR_CONDITION_NOMINAL
                reading = shown.last
                problem = None if nominal and reading.HasField("value") else "no reading"
                return int(reading.samples), problem

            return evaluate

        try:
            yield {name: call_for(name, watch) for name, watch in WATCHES.items()}
        finally:
            loop.run_until_complete(channel.close())
            loop.close()
            states.close()
