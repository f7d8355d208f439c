"""A client for the orchestrator: definitions, runs and events, over the daemon's gRPC port.

Values given as Python JSON (dicts, lists, strings, numbers, booleans, None) are sent as the
protocol's JSON values, and the answers are the protocol's messages (`mcpd.model.v1.runs_pb2`).
A refusal raises `mcpd.runtime.errors.McpdError` subclasses with the field and reason the
daemon named.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any, cast

import grpc

from mcpd.model.v1 import enums_pb2, runs_pb2
from mcpd.orchestrator.v1 import orchestrator_service_pb2 as rpc
from mcpd.orchestrator.v1.orchestrator_service_pb2_grpc import OrchestratorServiceStub
from mcpd.runtime.errors import McpdError
from mcpd.runtime.errors_grpc import rpc_failure_from
from mcpd.signals.messages import value_of

__all__ = ["TERMINAL", "Client", "definitions_of", "metadata_for", "refusal_of"]

TERMINAL = frozenset(
    {
        enums_pb2.RUN_STATUS_SUCCEEDED,
        enums_pb2.RUN_STATUS_FAILED,
        enums_pb2.RUN_STATUS_TIMED_OUT,
        enums_pb2.RUN_STATUS_CANCELLED,
    }
)
DEFAULT_TIMEOUT_S = 30.0


def metadata_for(api_key: str | None) -> tuple[tuple[str, str], ...]:
    """The call metadata carrying `api_key` (none in local mode)."""
    return () if api_key is None else (("authorization", f"Bearer {api_key}"),)


class Client:
    """Definitions, runs and events of one project (the key's, or `project` for a key that
    grants several)."""

    def __init__(
        self,
        target: str,
        *,
        api_key: str | None = None,
        project: str | None = None,
        channel: grpc.Channel | None = None,
        timeout_s: float = DEFAULT_TIMEOUT_S,
    ) -> None:
        self._channel = channel if channel is not None else grpc.insecure_channel(target)
        self._owns_channel = channel is None
        self.stub = OrchestratorServiceStub(self._channel)
        self.metadata = metadata_for(api_key)
        self.project = project or ""
        self.timeout_s = timeout_s

    def close(self) -> None:
        if self._owns_channel:
            self._channel.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def call(self, method: str, request: Any, *, timeout_s: float | None = None) -> Any:
        """Call an RPC of the service by name, raising the daemon's refusal as McpdError."""
        try:
            return getattr(self.stub, method)(
                request, metadata=self.metadata, timeout=timeout_s or self.timeout_s
            )
        except grpc.RpcError as failure:
            raise refusal_of(failure) from None

    def define(
        self, definition_id: str, body: Mapping[str, Any], *, version: int | None = None
    ) -> runs_pb2.DefinitionVersion:
        """Store a definition under the versioning rule; where it landed."""
        document = runs_pb2.DefinitionDocument(id=definition_id, body=value_of(dict(body)))
        if version is not None:
            document.version = version
        if self.project:
            document.project = self.project
        placed: runs_pb2.DefinitionVersion = self.call("CreateDefinition", document)
        return placed

    def start(
        self,
        definition_id: str,
        run_input: Any = None,
        *,
        version: int | None = None,
        correlation: Mapping[str, str] | None = None,
        idempotency_key: str | None = None,
    ) -> runs_pb2.Run:
        """Start a run (the same run again for a key used in the last 24 hours)."""
        request = runs_pb2.StartRunRequest(project=self.project, definition_id=definition_id)
        if run_input is not None:
            request.input.CopyFrom(value_of(run_input))
        if version is not None:
            request.version = version
        for name, value in (correlation or {}).items():
            setattr(request.correlation, name, value)
        if idempotency_key is not None:
            request.idempotency_key = idempotency_key
        run: runs_pb2.Run = self.call("StartRun", request)
        return run

    def get(self, run_id: str) -> runs_pb2.RunDetail:
        """The run with its attempts, timers and waits."""
        detail: runs_pb2.RunDetail = self.call(
            "GetRun", rpc.GetRunRequest(project=self.project, run_id=run_id)
        )
        return detail

    def events(self, run_id: str, *, after: int | None = None) -> runs_pb2.RunEventPage:
        """A page of the run's event log after `after`."""
        request = rpc.ListRunEventsRequest(project=self.project, run_id=run_id)
        if after is not None:
            request.after = after
        page: runs_pb2.RunEventPage = self.call("ListRunEvents", request)
        return page

    def cancel(self, run_id: str) -> runs_pb2.Run:
        """Cancel the run and every run below it."""
        run: runs_pb2.Run = self.call(
            "CancelRun", rpc.CancelRunRequest(project=self.project, run_id=run_id)
        )
        return run

    def publish(
        self, event: str, key: str, payload: Any = None, *, event_id: str | None = None
    ) -> runs_pb2.EventReceipt:
        """Publish an event to the run waiting on (event, key), or park it."""
        request = runs_pb2.PublishEventRequest(project=self.project, event=event, key=key)
        if payload is not None:
            request.payload.CopyFrom(value_of(payload))
        if event_id is not None:
            request.event_id = event_id
        receipt: runs_pb2.EventReceipt = self.call("PublishEvent", request)
        return receipt

    def signal(
        self, run_id: str, event: str, payload: Any = None, *, event_id: str | None = None
    ) -> runs_pb2.EventReceipt:
        """Send an event to the run's open wait on `event`."""
        request = rpc.SignalRunRequest(project=self.project, run_id=run_id)
        request.signal.event = event
        if payload is not None:
            request.signal.payload.CopyFrom(value_of(payload))
        if event_id is not None:
            request.signal.event_id = event_id
        receipt: runs_pb2.EventReceipt = self.call("SignalRun", request)
        return receipt

    def wait(self, run_id: str, *, timeout_s: float = 60.0, poll_s: float = 0.05) -> runs_pb2.Run:
        """The run once it has ended; TimeoutError after `timeout_s`."""
        deadline = time.monotonic() + timeout_s
        while True:
            run = self.get(run_id).run
            if run.status in TERMINAL:
                return run
            if time.monotonic() >= deadline:
                raise TimeoutError(f"run {run_id} had not ended after {timeout_s} s")
            time.sleep(poll_s)


def refusal_of(failure: grpc.RpcError) -> McpdError:
    """The McpdError a failed call stands for."""
    return rpc_failure_from(cast(grpc.aio.AioRpcError, failure)).to_error()


def definitions_of(documents: Sequence[tuple[str, Mapping[str, Any]]]) -> list[Any]:
    """DefinitionDocuments of (id, body) pairs, for a worker's registration."""
    return [runs_pb2.DefinitionDocument(id=i, body=value_of(dict(b))) for i, b in documents]
