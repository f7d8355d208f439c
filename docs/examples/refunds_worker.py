"""An example worker: the `refunds` workflow and the handlers that serve its steps.

Run a daemon (`make run`), then this worker (`python docs/examples/refunds_worker.py`), then
start a run:

    from mcpd.sdk import Client
    with Client("127.0.0.1:50051") as client:
        run = client.start("refunds", {"ticket": "T-1042", "text": "please refund my order"})
        print(client.wait(run.run_id).output)

`MCPD_GRPC_ADDR` says where the daemon's gRPC port is (default 127.0.0.1:50051) and
`MCPD_API_KEY` which key to present (none in local mode). SIGTERM or Ctrl-C stops claiming;
the steps held finish first.
"""

from __future__ import annotations

import os
import socket
from typing import Any

from mcpd.sdk import Client, Step, StepFailed, StepOutput, Worker, definitions_of

REFUNDS: dict[str, Any] = {
    "input_schema": {
        "type": "object",
        "required": ["ticket", "text"],
        "properties": {"ticket": {"type": "string"}, "text": {"type": "string"}},
    },
    "limits": {"run_timeout_ms": 600_000, "max_steps": 20},
    "steps": [
        {"id": "classify", "kind": "agent", "input": {"text": "${input.text}"}},
        {
            "id": "refund",
            "kind": "parallel",
            "when": {"eq": ["${steps.classify.output.kind}", "refund"]},
            "branches": [
                {
                    "id": "issue",
                    "effect": "at_most_once",
                    "input": {
                        "ticket": "${input.ticket}",
                        "amount": "${steps.classify.output.amount}",
                    },
                },
                {"id": "notify", "input": {"ticket": "${input.ticket}"}},
            ],
        },
    ],
    "output": {
        "kind": "${steps.classify.output.kind}",
        "refund": "${steps.refund.output.issue}",
    },
}


def classify(step: Step) -> StepOutput:
    """Stands in for a model call: a refund when the text asks for one."""
    text = str(step.input["text"])
    if not text.strip():
        raise StepFailed("the ticket has no text", kind="invalid_input")
    kind = "refund" if "refund" in text.lower() else "other"
    return StepOutput(output={"kind": kind, "amount": 12.5}, state={"classified": kind})


def issue(step: Step) -> dict[str, Any]:
    """Runs at most once: the payment provider would get `step.idempotency_key`."""
    return {"refunded": step.input["amount"], "reference": step.idempotency_key[:12]}


def notify(step: Step) -> str:
    return f"told the customer about {step.input['ticket']}"


def main() -> None:
    client = Client(
        os.environ.get("MCPD_GRPC_ADDR", "127.0.0.1:50051"), api_key=os.environ.get("MCPD_API_KEY")
    )
    worker = Worker(
        client,
        worker_id=f"refunds-{socket.gethostname()}-{os.getpid()}",
        handlers={"classify": classify, "refund/issue": issue, "refund/notify": notify},
        definitions=definitions_of([("refunds", REFUNDS)]),
    )
    with client:
        worker.run_until_signalled()  # SIGTERM or SIGINT: held steps finish first


if __name__ == "__main__":
    main()
