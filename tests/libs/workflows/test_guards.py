"""Guards: JSON truthiness, the comparison operators with JSON's types, exists, and the
combinators; step keys and handler names."""

from __future__ import annotations

import hashlib
from typing import Any

import pytest

from mcpd.workflows.guards import holds, truthy
from mcpd.workflows.step_keys import (
    branch_key,
    handler_name,
    idempotency_key,
    item_key,
    iteration_key,
)

SCOPE: dict[str, Any] = {
    "input": {"n": 3, "s": "refund", "flag": True, "list": ["a", 1], "empty": {}, "null": None},
    "steps": {"classify": {"output": {"kind": "refund"}, "status": "succeeded", "error": None}},
}


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (None, False),
        (False, False),
        (0, False),
        (0.0, False),
        ("", False),
        ([], False),
        ({}, False),
        (True, True),
        (-1, True),
        ("0", True),
        ([0], True),
        ({"a": None}, True),
    ],
)
def test_json_truthiness(value: Any, expected: bool) -> None:
    assert truthy(value) is expected


@pytest.mark.parametrize(
    ("guard", "expected"),
    [
        ("${input.flag}", True),
        ("${input.empty}", False),
        ("${input.missing}", False),
        ("n is ${input.n}", True),
        ({"eq": ["${steps.classify.output.kind}", "refund"]}, True),
        ({"eq": ["${input.n}", 3.0]}, True),
        ({"eq": ["${input.flag}", 1]}, False),
        ({"eq": [{"a": [1, True]}, {"a": [1, True]}]}, True),
        ({"eq": [[1], [True]]}, False),
        ({"ne": ["${input.s}", "refund"]}, False),
        ({"lt": ["${input.n}", 4]}, True),
        ({"gte": ["${input.n}", 3]}, True),
        ({"gt": ["b", "a"]}, True),
        ({"lt": ["${input.n}", "4"]}, False),
        ({"lt": ["${input.flag}", 2]}, False),
        ({"lte": [None, 1]}, False),
        ({"in": ["a", "${input.list}"]}, True),
        ({"in": [1, "${input.list}"]}, True),
        ({"in": [True, "${input.list}"]}, False),
        ({"in": ["fun", "${input.s}"]}, True),
        ({"in": [1, "${input.s}"]}, False),
        ({"exists": "${input.null}"}, True),
        ({"exists": "${input.nope}"}, False),
        ({"exists": "${steps.classify.error}"}, True),
        ({"and": ["${input.flag}", {"eq": ["${input.n}", 3]}]}, True),
        ({"and": ["${input.flag}", "${input.null}"]}, False),
        ({"or": ["${input.null}", "${input.n}"]}, True),
        ({"not": {"exists": "${input.nope}"}}, True),
    ],
)
def test_a_guard_holds_as_the_format_says(guard: Any, expected: bool) -> None:
    assert holds(guard, SCOPE) is expected


def test_step_keys_fold_the_construct_and_handler_names_drop_the_numbers() -> None:
    assert branch_key("refund", "issue") == "refund/issue"
    assert item_key("classify", 3) == "classify[3]"
    assert iteration_key("poll", 7, "check") == "poll[7]/check"
    assert [
        handler_name(k) for k in ("classify", "refund/issue", "classify[3]", "poll[7]/check")
    ] == [
        "classify",
        "refund/issue",
        "classify",
        "poll/check",
    ]


def test_the_idempotency_key_is_the_sha256_of_run_and_step() -> None:
    key = idempotency_key("run-1", "refund/issue")
    assert key == hashlib.sha256(b"run-1:refund/issue").hexdigest()
    assert len(key) == 64
    assert key == key.lower()
    assert idempotency_key("run-1", "refund/notify") != key
