"""The worker process of the orchestrator scenarios:
`python -m tests.e2e.scenario_worker TARGET API_KEY LOG NAME`.

It registers `DEFINITIONS` and serves every claimable step of them with the SDK's `Worker`
until SIGTERM. Every step runs one body, `act`, which does what its rendered input says, so a
definition decides how its steps behave:

- `sleep_ms` (with `sleep_attempts`, the attempts that sleep; every attempt when absent): sleep
  that long first;
- `fail_attempts`: attempts up to this number fail `retryable` ("attempt N failed");
- `fail`: `{"kind": ..., "message": ...}`, fail with that class and message;
- `output`, `state`, `usage`: the step's output (`{"attempt": N}` when absent), the state to
  merge, the usage to price.

Other keys of the input are there for the templates (the cause chain reads them). Each body
appends a JSON line `{"what": "body", run_id, step_key, attempt, lease_id, worker}` to LOG, and
each report the worker posts (started, complete, fail) a line `{"what": "report", call,
lease_id, conflict}` with the ConflictReason that refused it (null when it landed), so a test
counts the bodies that ran and sees what the daemon told a worker whose step was taken away.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from mcpd.model.v1 import runs_pb2
from mcpd.runtime.errors import Conflict
from mcpd.sdk import Client, Step, StepFailed, StepOutput, Worker, definitions_of

__all__ = ["DEFINITIONS", "handler_names"]

REPORTS = frozenset({"MarkStarted", "CompleteStep", "FailStep"})


DEFINITIONS: dict[str, dict[str, Any]] = {
    # task and agent, a guard that is false, the state merge and the output template.
    "triage": {
        "steps": [
            {
                "id": "classify",
                "kind": "task",
                "input": {
                    "output": {"kind": "${input.kind}"},
                    "state": {"seen": {"by": "classify"}, "kind": "${input.kind}"},
                },
            },
            {
                "id": "reply",
                "kind": "agent",
                "when": {"eq": ["${steps.classify.output.kind}", "refund"]},
                "input": {
                    "output": "reply to ${input.kind}: ${state.kind}",
                    "state": {"seen": {"by": "reply"}, "replied": True},
                },
            },
            {"id": "escalate", "kind": "task", "when": "${input.urgent}"},
        ],
        "output": {
            "kind": "${steps.classify.output.kind}",
            "reply": "${steps.reply.output}",
            "escalate": "${steps.escalate.status}",
        },
    },
    "naps": {
        "steps": [
            {"id": "nap", "kind": "sleep", "duration_ms": 150},
            {"id": "alarm", "kind": "sleep_until", "until": "${input.at}"},
            {"id": "woke", "kind": "task", "input": {"output": "awake"}},
        ],
        "output": "${steps.woke.output}",
    },
    "approval": {
        "steps": [
            {
                "id": "approve",
                "kind": "wait_event",
                "event": "approved",
                "key": "${input.order}",
                "timeout_ms": 60_000,
                "accept_parked": True,
            },
            {
                "id": "ship",
                "kind": "task",
                "input": {"output": {"shipped": "${steps.approve.output}"}},
            },
        ],
        "output": "${steps.ship.output}",
    },
    "patience": {
        "steps": [
            {
                "id": "answer",
                "kind": "wait_event",
                "event": "answered",
                "key": "${input.order}",
                "timeout_ms": 100,
                "on_timeout": "continue",
            },
            {
                "id": "after",
                "kind": "task",
                "input": {
                    "output": {
                        "status": "${steps.answer.status}",
                        "answer": "${steps.answer.output}",
                    }
                },
            },
        ],
        "output": "${steps.after.output}",
    },
    "impatience": {
        "steps": [
            {
                "id": "demand",
                "kind": "wait_event",
                "event": "answered",
                "key": "${input.order}",
                "timeout_ms": 100,
            },
            {"id": "never", "kind": "task"},
        ]
    },
    "fanout": {
        "steps": [
            {
                "id": "fan",
                "kind": "parallel",
                "branches": [
                    {"id": "left", "input": {"sleep_ms": 50, "output": "L"}},
                    {"id": "right", "kind": "agent", "input": {"output": ["x", "y", "z"]}},
                ],
            },
            {
                "id": "each",
                "kind": "foreach",
                "items": "${steps.fan.output.right}",
                "concurrency": 2,
                "body": {
                    "id": "item",
                    "input": {"sleep_ms": 150, "output": {"item": "${item}", "index": "${index}"}},
                },
            },
        ],
        "output": {"fan": "${steps.fan.output}", "each": "${steps.each.output}"},
    },
    "polling": {
        "steps": [
            {
                "id": "poll",
                "kind": "loop",
                "max_iterations": 4,
                "until": {"gte": ["${steps.check.output.n}", "${input.stop}"]},
                "body": {"id": "check", "input": {"output": {"n": "${iteration}"}}},
            }
        ],
        "output": "${steps.poll.output}",
    },
    "tree": {
        "steps": [
            {"id": "prep", "kind": "task", "input": {"output": {"n": "${input.n}"}}},
            {
                "id": "sub",
                "kind": "subworkflow",
                "definition_id": "middle",
                "input": {"n": "${steps.prep.output.n}"},
            },
            {
                "id": "after",
                "kind": "task",
                "input": {"output": {"from_child": "${steps.sub.output}"}},
            },
        ],
        "output": "${steps.after.output}",
    },
    "middle": {
        "steps": [
            {"id": "nest", "kind": "subworkflow", "definition_id": "leaf", "input": "${input}"},
        ],
        "output": {"middle": "${steps.nest.output}"},
    },
    "leaf": {
        "input_schema": {"type": "object", "required": ["n"]},
        "steps": [{"id": "work", "kind": "task", "input": {"output": {"got": "${input.n}"}}}],
        "output": "${steps.work.output}",
    },
    "flaky": {
        "steps": [
            {
                "id": "call",
                "kind": "task",
                "retry": {"attempts": 3, "backoff": "exponential", "initial_ms": 60, "max_ms": 500},
                "input": {"fail_attempts": "${input.fails}", "output": "answered"},
            }
        ],
        "output": "${steps.call.output}",
    },
    "tolerant": {
        "steps": [
            {
                "id": "try_it",
                "kind": "task",
                "on_error": "continue",
                "input": {"fail": {"kind": "fatal", "message": "no luck"}},
            },
            {
                "id": "carry_on",
                "kind": "task",
                "input": {
                    "output": {
                        "status": "${steps.try_it.status}",
                        "error": "${steps.try_it.error}",
                    }
                },
            },
        ],
        "output": "${steps.carry_on.output}",
    },
    "pair": {
        "steps": [
            {"id": "first_half", "kind": "task", "input": {"output": 1}},
            {"id": "second_half", "kind": "task", "input": {"output": 2}},
        ]
    },
    "step_capped": {
        "limits": {"max_steps": 2},
        "steps": [
            {"id": "opening", "kind": "task", "input": {"output": "opened"}},
            {"id": "halves", "kind": "subworkflow", "definition_id": "pair"},
        ],
    },
    "cost_capped": {
        "limits": {"max_cost_usd": 0.01},
        "steps": [
            {"id": "think", "kind": "agent", "input": "${input}"},
            {"id": "spend", "kind": "subworkflow", "definition_id": "pair"},
        ],
    },
    "once": {
        "steps": [{"id": "only", "kind": "task", "input": {"output": "${input}"}}],
        "output": "${steps.only.output}",
    },
    "lingering": {
        "steps": [{"id": "linger", "kind": "task", "input": {"sleep_ms": "${input.sleep_ms}"}}]
    },
    "umbrella": {
        "steps": [
            {
                "id": "below",
                "kind": "subworkflow",
                "definition_id": "lingering",
                "input": {"sleep_ms": "${input.sleep_ms}"},
            }
        ]
    },
    "explain": {
        "steps": [
            {"id": "extract", "kind": "task", "input": {"output": {"text": ""}}},
            {
                "id": "label",
                "kind": "task",
                "input": {"text": "${steps.extract.output.text}", "output": {"kind": None}},
            },
            {
                "id": "answer",
                "kind": "task",
                "when": {"exists": "${steps.label.output}"},
                "input": {
                    "kind": "${steps.label.output.kind}",
                    "raw": "${steps.extract.status}",
                    "fail": {"kind": "fatal", "message": "nothing to answer"},
                },
            },
        ]
    },
    "busy": {
        "steps": [
            {
                "id": "split",
                "kind": "parallel",
                "branches": [
                    {"id": "one", "input": {"sleep_ms": 30, "output": 1}},
                    {"id": "two", "input": {"sleep_ms": 30, "output": 2}},
                ],
            },
            {"id": "join", "kind": "task", "input": {"output": "${steps.split.output}"}},
        ],
        "output": "${steps.join.output}",
    },
    "timeboxed": {
        "limits": {"run_timeout_ms": 300},
        "steps": [{"id": "overrun", "kind": "task", "input": {"sleep_ms": 900}}],
    },
    "step_timed": {
        "steps": [
            {
                "id": "slowpoke",
                "kind": "task",
                "step_timeout_ms": 150,
                "retry": {"attempts": 2, "backoff": "fixed", "initial_ms": 800},
                "input": {"sleep_ms": 500, "sleep_attempts": [1], "output": "in time"},
            }
        ],
        "output": "${steps.slowpoke.output}",
    },
}


def handler_names(definitions: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """The handler name of every claimable step of `definitions` (step keys without numbers)."""
    return sorted({name for body in definitions.values() for name in _claimable(body["steps"])})


def _claimable(steps: list[Mapping[str, Any]]) -> Iterator[str]:
    for node in steps:
        match node["kind"]:
            case "task" | "agent":
                yield node["id"]
            case "parallel":
                yield from (f"{node['id']}/{branch['id']}" for branch in node["branches"])
            case "foreach":
                yield node["id"]
            case "loop":
                yield f"{node['id']}/{node['body']['id']}"


class Recorder:
    """Appends one JSON line per record to the log shared by every worker process (one
    O_APPEND write each, so lines of concurrent writers never interleave)."""

    def __init__(self, path: str) -> None:
        self._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    def __call__(self, record: Mapping[str, Any]) -> None:
        os.write(self._fd, (json.dumps(record, sort_keys=True) + "\n").encode())


class RecordingClient(Client):
    """The SDK client, recording how the daemon answered each report of a step."""

    def __init__(self, target: str, *, api_key: str, record: Callable[[Any], None]) -> None:
        super().__init__(target, api_key=api_key)
        self._record = record

    def call(self, method: str, request: Any, *, timeout_s: float | None = None) -> Any:
        if method not in REPORTS:
            return super().call(method, request, timeout_s=timeout_s)
        entry = {"what": "report", "call": method, "lease_id": request.lease_id}
        try:
            answer = super().call(method, request, timeout_s=timeout_s)
        except Conflict as conflict:
            self._record({**entry, "conflict": conflict.reason})
            raise
        self._record({**entry, "conflict": None})
        return answer


def body(name: str, record: Callable[[Any], None]) -> Callable[[Step], Any]:
    """The one step body: does what the step's input says (the module docstring)."""

    def act(step: Step) -> Any:
        record(
            {
                "what": "body",
                "run_id": step.run_id,
                "step_key": step.step_key,
                "attempt": step.attempt,
                "lease_id": step.lease.lease_id,
                "worker": name,
            }
        )
        spec = step.input if isinstance(step.input, dict) else {}
        sleep_ms, sleepers = spec.get("sleep_ms"), spec.get("sleep_attempts")
        if sleep_ms and (sleepers is None or step.attempt in sleepers):
            time.sleep(sleep_ms / 1000)
        if step.attempt <= (spec.get("fail_attempts") or 0):
            raise StepFailed(f"attempt {step.attempt} failed", kind="retryable")
        if "fail" in spec:
            raise StepFailed(spec["fail"]["message"], kind=spec["fail"]["kind"])
        usage = spec.get("usage")
        return StepOutput(
            output=spec.get("output", {"attempt": step.attempt}),
            state=spec.get("state"),
            usage=runs_pb2.StepUsage(**usage) if usage else None,
        )

    return act


def main(argv: list[str]) -> int:
    target, api_key, log, name = argv
    record = Recorder(log)
    act = body(name, record)
    with RecordingClient(target, api_key=api_key, record=record) as client:
        worker = Worker(
            client,
            worker_id=name,
            handlers={handler: act for handler in handler_names(DEFINITIONS)},
            definitions=definitions_of(sorted(DEFINITIONS.items())),
            concurrency=8,
            wait_ms=1000,
        )
        worker.run_until_signalled()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
