"""Cause chains on a real SQLite run store: the ancestors a failed step read, through the paths
its definition declares, with the silent producer that handed it an empty value, in a stable
order, cut at `max_depth`."""

from __future__ import annotations

import pytest

from mcpd.model.v1 import enums_pb2, runs_pb2
from mcpd.orchestrator.v1 import orchestrator_service_pb2 as rpc
from mcpd.runtime.errors import InvalidArgument, NotFound
from services.orchestrator.tests.daemon import PROJECT, Daemon

FATAL = enums_pb2.STEP_ERROR_CLASS_FATAL
PIPELINE = {
    "steps": [
        {"id": "extract", "kind": "task"},
        {"id": "classify", "kind": "task", "input": {"text": "${steps.extract.output.text}"}},
        {
            "id": "reply",
            "kind": "task",
            "when": {"exists": "${steps.classify.output}"},
            "input": {"kind": "${steps.classify.output.kind}", "raw": "${steps.extract.status}"},
        },
    ]
}


def link_rows(cause: runs_pb2.StepCause) -> list[tuple[object, ...]]:
    return [
        (
            link.depth,
            link.step_key,
            link.template_path,
            link.consumed_by,
            link.silent_producer,
            enums_pb2.ValueKind.Name(link.value_kind) if link.HasField("value_kind") else None,
            link.value_empty if link.HasField("value_empty") else None,
        )
        for link in cause.chain
    ]


async def failed_reply(daemon: Daemon) -> str:
    daemon.define("pipeline", PIPELINE)
    run_id = daemon.start("pipeline")
    for output in ({"text": ""}, {"kind": None}):
        (lease,) = await daemon.claim(run_id)
        daemon.complete(lease.lease_id, output)
    (reply,) = await daemon.claim(run_id)
    daemon.fail(reply.lease_id, FATAL, "nothing to reply to")
    return run_id


def cause(daemon: Daemon, run_id: str, step_key: str, **depth: int) -> runs_pb2.StepCause:
    request = rpc.GetStepCauseRequest(project=PROJECT, run_id=run_id, step_key=step_key, **depth)
    return daemon.causes.cause(request)


async def test_the_chain_names_the_silent_producers_and_the_shapes_they_handed_on(
    daemon: Daemon,
) -> None:
    run_id = await failed_reply(daemon)
    answer = cause(daemon, run_id, "reply")
    assert (answer.status, answer.attempts) == (enums_pb2.ATTEMPT_STATUS_FAILED, 1)
    assert answer.error.message == "nothing to reply to"
    assert not answer.truncated
    assert link_rows(answer) == [
        (1, "classify", "steps.classify.output", "reply", True, "VALUE_KIND_OBJECT", False),
        (1, "classify", "steps.classify.output.kind", "reply", True, "VALUE_KIND_NULL", True),
        (1, "extract", "steps.extract.status", "reply", True, None, None),
        (2, "extract", "steps.extract.output.text", "classify", True, "VALUE_KIND_STRING", True),
    ]
    # Asked twice, answered the same, in the same order.
    assert cause(daemon, run_id, "reply") == answer


async def test_max_depth_cuts_the_chain_and_says_so(daemon: Daemon) -> None:
    run_id = await failed_reply(daemon)
    cut = cause(daemon, run_id, "reply", max_depth=1)
    assert cut.truncated
    assert {link.depth for link in cut.chain} == {1}
    with pytest.raises(InvalidArgument) as caught:
        cause(daemon, run_id, "reply", max_depth=0)
    assert caught.value.field == "max_depth"


async def test_a_step_reading_only_the_input_has_an_empty_chain(daemon: Daemon) -> None:
    run_id = await failed_reply(daemon)
    answer = cause(daemon, run_id, "extract")
    assert answer.status == enums_pb2.ATTEMPT_STATUS_SUCCEEDED
    assert not answer.HasField("error")
    assert list(answer.chain) == []
    with pytest.raises(NotFound) as caught:
        cause(daemon, run_id, "nowhere")
    assert caught.value.field == "step_key"


async def test_a_failure_on_the_path_is_not_a_silent_producer(daemon: Daemon) -> None:
    body = {
        "steps": [
            {"id": "fetch", "kind": "task"},
            {
                "id": "parse",
                "kind": "task",
                "on_error": "continue",
                "input": "${steps.fetch.output}",
            },
            {"id": "report", "kind": "task", "input": "${steps.parse.status}"},
        ]
    }
    daemon.define("flow", body)
    run_id = daemon.start("flow")
    (fetch,) = await daemon.claim(run_id)
    daemon.complete(fetch.lease_id, "page")
    (parse,) = await daemon.claim(run_id)
    daemon.fail(parse.lease_id, FATAL, "bad page")
    (report,) = await daemon.claim(run_id)
    daemon.fail(report.lease_id, FATAL, "cannot report")
    rows = link_rows(cause(daemon, run_id, "report"))
    assert rows == [
        (1, "parse", "steps.parse.status", "report", False, None, None),
        (2, "fetch", "steps.fetch.output", "parse", False, "VALUE_KIND_STRING", False),
    ]
