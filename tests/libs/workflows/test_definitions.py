"""Checking a definition body: the schema shipped in spec/, then the write-time checks. Every
refusal is INVALID_ARGUMENT naming the field by its JSON path in the body."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from mcpd.runtime.errors import InvalidArgument
from mcpd.workflows import check_definition, definition_schema

ROOT = Path(__file__).resolve().parents[3]

# The example of the definition format's own page: every construct a refund flow needs.
EXAMPLE: dict[str, Any] = {
    "input_schema": {
        "type": "object",
        "required": ["ticket"],
        "properties": {"ticket": {"type": "string"}},
    },
    "limits": {"run_timeout_ms": 600000, "max_steps": 50, "max_cost_usd": 2.5},
    "steps": [
        {
            "id": "classify",
            "kind": "agent",
            "input": {"text": "${input.ticket}"},
            "retry": {"attempts": 3, "backoff": "exponential", "initial_ms": 500, "max_ms": 10000},
        },
        {
            "id": "approve",
            "kind": "wait_event",
            "event": "approval",
            "key": "${input.ticket}",
            "timeout_ms": 86400000,
            "on_timeout": "fail",
            "accept_parked": True,
            "when": {"eq": ["${steps.classify.output.kind}", "refund"]},
        },
        {
            "id": "refund",
            "kind": "parallel",
            "branches": [
                {
                    "id": "issue",
                    "input": {"amount": "${steps.classify.output.amount}"},
                    "effect": "at_most_once",
                },
                {"id": "notify"},
            ],
        },
        {"id": "summarise", "kind": "task", "on_error": "continue", "step_timeout_ms": 30000},
    ],
    "output": {
        "kind": "${steps.classify.output.kind}",
        "notified": "${steps.refund.output.notify}",
    },
}

# Every other construct, each reading what its scope allows.
CONSTRUCTS: dict[str, Any] = {
    "steps": [
        {"id": "nap", "kind": "sleep", "duration_ms": 1000},
        {"id": "until", "kind": "sleep_until", "until": "${input.at}"},
        {
            "id": "each",
            "kind": "foreach",
            "items": "${input.orders}",
            "concurrency": 4,
            "body": {
                "id": "charge",
                "kind": "task",
                "input": {"order": "${item}", "n": "${index}"},
            },
        },
        {
            "id": "poll",
            "kind": "loop",
            "max_iterations": 10,
            "body": {
                "id": "check",
                "input": {"i": "${iteration}", "last": "${steps.check.output}"},
            },
            "until": {"or": [{"exists": "${steps.check.output.done}"}, {"not": "${state.go}"}]},
        },
        {"id": "child", "kind": "subworkflow", "definition_id": "other", "version": 2},
        {
            "id": "gate",
            "kind": "task",
            "when": {
                "and": [
                    {"in": ["a", "${steps.each.output}"]},
                    {"gte": ["${steps.poll.status}", "x"]},
                    "${steps.child.error}",
                ]
            },
        },
    ]
}


def test_the_schema_in_spec_is_the_one_the_code_checks_with() -> None:
    shipped = json.loads((ROOT / "spec" / "definition.schema.json").read_text(encoding="utf-8"))
    assert shipped == definition_schema()
    assert shipped["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    Draft202012Validator.check_schema(shipped)


def test_every_object_of_the_schema_refuses_unknown_fields() -> None:
    schema = definition_schema()
    defs = schema["$defs"]
    forms = [schema, schema["properties"]["limits"], *defs.values(), *defs["guard"]["oneOf"]]
    closed = [form for form in forms if form.get("type") == "object" and "properties" in form]
    # `node` only dispatches on kind to the form of that kind.
    closed.remove(defs["node"])
    # The body, limits, retry, a claimable step, eight node forms, eleven guard operator forms.
    assert len(closed) == 23
    assert all(form.get("additionalProperties") is False for form in closed)


@pytest.mark.parametrize("body", [EXAMPLE, CONSTRUCTS], ids=["example", "constructs"])
def test_a_valid_body_comes_back_unchanged(body: dict[str, Any]) -> None:
    assert check_definition("refunds", copy.deepcopy(body)) == body


def test_integral_floats_come_back_as_integers() -> None:
    body = {"steps": [{"id": "a", "kind": "task", "retry": {"attempts": 2.0, "initial_ms": 5.0}}]}
    checked = check_definition("flow", body)
    attempts = checked["steps"][0]["retry"]["attempts"]
    assert attempts == 2
    assert type(attempts) is int


Mutation = Callable[[dict[str, Any]], None]


def _step(index: int, **fields: Any) -> Mutation:
    return lambda body: body["steps"][index].update(fields)


def _append(node: dict[str, Any]) -> Mutation:
    return lambda body: body["steps"].append(node)


REFUSALS: list[tuple[str, Mutation, str, str]] = [
    ("unknown top-level field", lambda b: b.update(extra=1), "extra", "is not a field"),
    ("unknown node field", _step(3, bogus=1), "steps[3].bogus", "not a field of a task node"),
    ("field of another kind", _step(1, retry={}), "steps[1].retry", "of a wait_event node"),
    (
        "unknown branch field",
        lambda b: b["steps"][2]["branches"][1].update(when="x"),
        "steps[2].branches[1].when",
        "is not a field",
    ),
    ("unknown kind", _step(0, kind="nope"), "steps[0].kind", "must be one of"),
    ("no steps", lambda b: b.update(steps=[]), "steps", "0 items; at least 1 needed"),
    (
        "too many steps",
        lambda b: b.update(steps=[{"id": f"s{i}", "kind": "task"} for i in range(201)]),
        "steps",
        "201 items; at most 200 allowed",
    ),
    (
        "attempts out of range",
        _step(0, retry={"attempts": 101}),
        "steps[0].retry.attempts",
        "must be at most 100",
    ),
    (
        "zero duration",
        _append({"id": "nap", "kind": "sleep", "duration_ms": 0}),
        "steps[4].duration_ms",
        "must be at least 1, got 0",
    ),
    (
        "duration past 3650 days",
        _step(3, step_timeout_ms=315360000001),
        "steps[3].step_timeout_ms",
        "must be at most 315360000000",
    ),
    (
        "concurrency out of range",
        _append(
            {"id": "fe", "kind": "foreach", "items": [], "concurrency": 101, "body": {"id": "b"}}
        ),
        "steps[4].concurrency",
        "must be at most 100",
    ),
    (
        "loop without max_iterations",
        _append({"id": "lp", "kind": "loop", "body": {"id": "b"}}),
        "steps[4].max_iterations",
        "is required in a loop node",
    ),
    ("bad id", _step(0, id="Classify"), "steps[0].id", "must match ^[a-z][a-z0-9_]*$"),
    ("duplicate id", _step(3, id="classify"), "steps[3].id", "already used at steps[0].id"),
    (
        "duplicate branch id",
        lambda b: b["steps"][2]["branches"][1].update(id="approve"),
        "steps[2].branches[1].id",
        "already used at steps[1].id",
    ),
    (
        "unknown guard operator",
        _step(1, when={"eqq": [1, 2]}),
        "steps[1].when",
        "one operator of: eq, ne",
    ),
    ("guard arity", _step(1, when={"eq": [1]}), "steps[1].when.eq", "1 items; at least 2 needed"),
    (
        "unknown template root",
        _step(0, input="${inputs.ticket}"),
        "steps[0].input",
        "unknown root 'inputs'",
    ),
    (
        "step declared later",
        _step(1, when="${steps.summarise.output}"),
        "steps[1].when",
        "not a node declared earlier",
    ),
    (
        "step reads itself",
        _step(0, input="${steps.classify.output}"),
        "steps[0].input",
        "not a node declared earlier",
    ),
    (
        "branch reads a later node",
        lambda b: b["steps"][2]["branches"][0].update(input="${steps.summarise.status}"),
        "steps[2].branches[0].input",
        "not a node declared earlier",
    ),
    (
        "output reads an unknown node",
        lambda b: b.update(output="${steps.nowhere.output}"),
        "output",
        "not a node declared earlier",
    ),
    (
        "item outside a foreach body",
        _step(0, input={"x": ["${item}"]}),
        "steps[0].input.x[0]",
        "only a foreach body has",
    ),
    (
        "index in a foreach's own when",
        _append(
            {"id": "fe", "kind": "foreach", "items": [], "body": {"id": "b"}, "when": "${index}"}
        ),
        "steps[4].when",
        "only a foreach body has",
    ),
    (
        "iteration outside a loop",
        _step(3, when={"not": "${iteration}"}),
        "steps[3].when.not",
        "only a loop body and its until",
    ),
    (
        "a step field that is not one",
        _step(0, input="${steps.x.input}"),
        "steps[0].input",
        "a step has output, status and error",
    ),
    ("unclosed reference", _step(0, input="${input.ticket"), "steps[0].input", "without a closing"),
    (
        "exists of text",
        _step(1, when={"exists": "x ${input.ticket}"}),
        "steps[1].when.exists",
        'exactly one "${path}"',
    ),
    (
        "direct recursion",
        _append({"id": "again", "kind": "subworkflow", "definition_id": "refunds"}),
        "steps[4].definition_id",
        "may not run its own definition",
    ),
    (
        "invalid input_schema",
        lambda b: b.update(input_schema={"type": "text"}),
        "input_schema.type",
        "not a valid JSON Schema",
    ),
    (
        "input_schema not a schema",
        lambda b: b.update(input_schema=3),
        "input_schema",
        "must be of type object or boolean, got number",
    ),
    (
        "limits field",
        lambda b: b["limits"].update(max_tokens=3),
        "limits.max_tokens",
        "is not a field",
    ),
]


@pytest.mark.parametrize(
    ("mutate", "field", "says"),
    [case[1:] for case in REFUSALS],
    ids=[case[0] for case in REFUSALS],
)
def test_a_refusal_names_the_field(mutate: Mutation, field: str, says: str) -> None:
    body = copy.deepcopy(EXAMPLE)
    mutate(body)
    with pytest.raises(InvalidArgument) as caught:
        check_definition("refunds", body)
    assert caught.value.field == field
    assert caught.value.message.startswith(field)
    assert says in caught.value.message
    assert caught.value.reason == "INVALID_ARGUMENT"


def test_a_loop_body_may_read_its_own_last_iteration_and_nothing_after_the_loop() -> None:
    loop = copy.deepcopy(CONSTRUCTS["steps"][3])
    loop["body"]["input"] = "${steps.gate.output}"
    with pytest.raises(InvalidArgument) as caught:
        check_definition("flow", {"steps": [loop, {"id": "gate", "kind": "task"}]})
    assert caught.value.field == "steps[0].body.input"
