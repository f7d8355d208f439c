"""A worker: registers the definitions it serves, claims steps with a long poll, runs each
step's handler with its lease heartbeated in the background, and reports the outcome.

Handlers are named by step key without item and iteration numbers (`classify`,
`refund/issue`, `poll/check`; DEFINITIONS.md). A handler takes the `Step` and returns the
step's output, or a `StepOutput` to also merge state or report usage; it raises `StepFailed`
to fail with a class of its choosing, and any other exception fails the step `retryable`. A
lease whose step has no handler is failed `unservable`, so another worker can take it.

Under `at_most_once` the worker posts `started` and waits for its answer before the body runs,
so a body never runs twice. A 409 on any call means the lease is no longer this worker's to
act on: the worker drops it. `stop()` stops claiming; the steps held finish and are reported
before `run()` returns.

Each handler runs inside an OpenTelemetry span parented on the span the daemon opened for the
attempt (`lease.span_id` in `lease.trace_id`), so a model or tool call the handler records
nests under the step.
"""

from __future__ import annotations

import logging
import signal
import threading
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from opentelemetry import trace
from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags

from mcpd.model.v1 import enums_pb2, runs_pb2
from mcpd.orchestrator.v1 import orchestrator_service_pb2 as rpc
from mcpd.runtime.errors import Conflict, McpdError
from mcpd.sdk.client import Client
from mcpd.signals.messages import python_of, value_of
from mcpd.workflows import handler_name

__all__ = ["Handler", "Step", "StepFailed", "StepOutput", "Worker"]

log = logging.getLogger("mcpd.sdk.worker")
tracer = trace.get_tracer("mcpd.sdk.worker")

_CLASSES = {
    "retryable": enums_pb2.STEP_ERROR_CLASS_RETRYABLE,
    "fatal": enums_pb2.STEP_ERROR_CLASS_FATAL,
    "invalid_input": enums_pb2.STEP_ERROR_CLASS_INVALID_INPUT,
    "unservable": enums_pb2.STEP_ERROR_CLASS_UNSERVABLE,
    "cancelled": enums_pb2.STEP_ERROR_CLASS_CANCELLED,
}
# A claim's own deadline over its long poll: the daemon answers within the wait.
_CLAIM_SLACK_S = 10.0


@dataclass(frozen=True, slots=True)
class Step:
    """A leased step, as its handler sees it."""

    lease: runs_pb2.StepLease
    input: Any
    prior: Mapping[str, Any]
    state: Mapping[str, Any]

    @property
    def run_id(self) -> str:
        return self.lease.run_id

    @property
    def step_key(self) -> str:
        return self.lease.step_key

    @property
    def attempt(self) -> int:
        return self.lease.attempt

    @property
    def idempotency_key(self) -> str:
        """Stable across every attempt of the step: pass it to calls that deduplicate."""
        return self.lease.idempotency_key


@dataclass(frozen=True, slots=True)
class StepOutput:
    """A handler's result with more than an output: state to merge, usage to price."""

    output: Any = None
    state: Mapping[str, Any] | None = None
    usage: runs_pb2.StepUsage | None = None


class StepFailed(Exception):  # noqa: N818  # raised as `raise StepFailed(...)`, a verdict
    """Raised by a handler to fail its step with `kind` (a StepErrorClass name)."""

    def __init__(
        self,
        message: str,
        *,
        kind: str = "fatal",
        details: Any = None,
        retry_after_ms: int | None = None,
    ) -> None:
        if kind not in _CLASSES:
            raise ValueError(f"kind must be one of {sorted(_CLASSES)}")
        super().__init__(message)
        self.message = message
        self.kind = kind
        self.details = details
        self.retry_after_ms = retry_after_ms


Handler = Callable[[Step], Any]


@dataclass
class Worker:
    """Serves `handlers` for the `definitions` it registers, `concurrency` steps at a time."""

    client: Client
    worker_id: str
    handlers: Mapping[str, Handler]
    definitions: Sequence[runs_pb2.DefinitionDocument] = ()
    concurrency: int = 4
    wait_ms: int = 20_000
    _stop: threading.Event = field(default_factory=threading.Event)
    _slots: threading.Semaphore = field(init=False)
    heartbeat_s: float = field(init=False, default=10.0)

    def __post_init__(self) -> None:
        self._slots = threading.Semaphore(self.concurrency)

    def stop(self) -> None:
        """Stop claiming; `run` returns once the held steps are reported."""
        self._stop.set()

    def run_until_signalled(
        self, signals: Sequence[signal.Signals] = (signal.SIGTERM, signal.SIGINT)
    ) -> None:
        """`run` until one of `signals` arrives (what Kubernetes and a terminal send), then stop
        gracefully: the steps held are finished and reported first. From the main thread only,
        as Python handles signals there."""
        for number in signals:
            signal.signal(number, lambda *_: self.stop())
        self.run()

    def run(self) -> None:
        """Register, then claim and serve steps until `stop()`."""
        registration = runs_pb2.WorkerRegistration(
            project=self.client.project,
            worker_id=self.worker_id,
            definitions=list(self.definitions),
        )
        registered: runs_pb2.WorkerRegistered = self.client.call("RegisterWorker", registration)
        self.heartbeat_s = registered.heartbeat_ms / 1000
        with ThreadPoolExecutor(self.concurrency, thread_name_prefix="mcpd-step") as pool:
            while not self._stop.is_set():
                free = self._acquire_free()
                if free == 0:
                    continue
                try:
                    leases = self._claim(free)
                except McpdError:
                    log.exception("claim failed; claiming again")
                    leases = []
                    self._stop.wait(1.0)
                for _ in range(free - len(leases)):
                    self._slots.release()
                for lease in leases:
                    pool.submit(self._serve, lease)

    def _acquire_free(self) -> int:
        """Take every free slot (waiting a little for the first)."""
        if not self._slots.acquire(timeout=0.2):
            return 0
        free = 1
        while free < self.concurrency and self._slots.acquire(blocking=False):
            free += 1
        return free

    def _claim(self, most: int) -> list[runs_pb2.StepLease]:
        request = runs_pb2.ClaimRequest(
            project=self.client.project, worker_id=self.worker_id, max=most, wait_ms=self.wait_ms
        )
        answer: runs_pb2.ClaimResponse = self.client.call(
            "Claim", request, timeout_s=self.wait_ms / 1000 + _CLAIM_SLACK_S
        )
        return list(answer.leases)

    def _serve(self, lease: runs_pb2.StepLease) -> None:
        try:
            self._serve_held(lease)
        except Conflict as conflict:
            log.info("lease %s is no longer ours: %s", lease.lease_id, conflict.message)
        except McpdError:
            log.exception("reporting step %s of run %s failed", lease.step_key, lease.run_id)
        finally:
            self._slots.release()

    def _serve_held(self, lease: runs_pb2.StepLease) -> None:
        handler = self.handlers.get(handler_name(lease.step_key))
        if handler is None:
            self._fail(lease, StepFailed(f"no handler for {lease.step_key}", kind="unservable"))
            return
        done = threading.Event()
        beating = threading.Thread(target=self._heartbeat, args=(lease, done), daemon=True)
        beating.start()
        try:
            if lease.effect == enums_pb2.EFFECT_AT_MOST_ONCE:
                self.client.call("MarkStarted", self._lease_request(lease))
            step = Step(
                lease=lease,
                input=python_of(lease.input) if lease.HasField("input") else None,
                prior=python_of(lease.prior) or {},
                state=python_of(lease.state) if lease.HasField("state") else {},
            )
            try:
                with tracer.start_as_current_span(
                    handler_name(lease.step_key), context=_parent_of(lease)
                ):
                    result = handler(step)
            except StepFailed as failed:
                self._fail(lease, failed)
                return
            except Exception as error:  # a handler's bug is the step's retryable failure
                self._fail(lease, StepFailed(f"{type(error).__name__}: {error}", kind="retryable"))
                return
            self._complete(lease, result)
        finally:
            done.set()
            beating.join()

    def _heartbeat(self, lease: runs_pb2.StepLease, done: threading.Event) -> None:
        while not done.wait(self.heartbeat_s):
            try:
                self.client.call("Heartbeat", self._lease_request(lease))
            except Conflict:
                return
            except McpdError:
                log.warning("heartbeat of lease %s failed; trying again", lease.lease_id)

    def _complete(self, lease: runs_pb2.StepLease, result: Any) -> None:
        given = result if isinstance(result, StepOutput) else StepOutput(output=result)
        body = runs_pb2.StepResult()
        if given.output is not None:
            body.output.CopyFrom(value_of(given.output))
        if given.state is not None:
            body.state.CopyFrom(value_of(dict(given.state)))
        if given.usage is not None:
            body.usage.CopyFrom(given.usage)
        request = rpc.CompleteStepRequest(
            project=self.client.project, lease_id=lease.lease_id, result=body
        )
        self.client.call("CompleteStep", request)

    def _fail(self, lease: runs_pb2.StepLease, failed: StepFailed) -> None:
        error = runs_pb2.StepError(message=failed.message or failed.kind)
        setattr(error, "class", _CLASSES[failed.kind])  # `class` is a keyword
        if failed.details is not None:
            error.details.CopyFrom(value_of(failed.details))
        if failed.retry_after_ms is not None:
            error.retry_after_ms = failed.retry_after_ms
        request = rpc.FailStepRequest(
            project=self.client.project,
            lease_id=lease.lease_id,
            failure=runs_pb2.StepFailure(error=error),
        )
        self.client.call("FailStep", request)

    def _lease_request(self, lease: runs_pb2.StepLease) -> rpc.LeaseRequest:
        return rpc.LeaseRequest(project=self.client.project, lease_id=lease.lease_id)


def _parent_of(lease: runs_pb2.StepLease) -> Any:
    """A context whose current span is the attempt's span the daemon opened."""
    parent = SpanContext(
        trace_id=int(lease.trace_id, 16),
        span_id=int(lease.span_id, 16),
        is_remote=True,
        trace_flags=TraceFlags(TraceFlags.SAMPLED),
    )
    return trace.set_span_in_context(NonRecordingSpan(parent))
