"""`check_span` with its checks inline (messages built only on failure) against the reference:
the same refusal, word for word, or the same normalised row."""

from __future__ import annotations

import copy
import math
import random
import re
from typing import Any

import pytest

from mcpd.runtime.errors import quoted
from services.ingest.validation import (
    MAX_NAME_LENGTH,
    MAX_TAGS,
    InvalidRecordError,
    check_score,
    check_span,
)

_HEX32 = re.compile(r"[0-9a-f]{32}")
_HEX16 = re.compile(r"[0-9a-f]{16}")


def _require(condition: bool, message: str) -> None:
    if not condition:
        raise InvalidRecordError(message.split(" ", 1)[0].rstrip(":"), message)


def _trace_id(value: str | None, field: str, *, required: bool) -> str | None:
    if value is None or value == "":
        _require(not required, f"{field} is required (32 hex characters)")
        return None
    lowered = value.lower()
    _require(
        _HEX32.fullmatch(lowered) is not None,
        f"{field} must be 32 hex characters (a 128-bit trace id), got {quoted(value)}",
    )
    _require(lowered != "0" * 32, f"{field} must not be all zeros")
    return lowered


def _span_id(value: str | None, field: str, *, required: bool) -> str | None:
    if value is None or value == "":
        _require(not required, f"{field} is required (16 hex characters)")
        return None
    lowered = value.lower()
    _require(
        _HEX16.fullmatch(lowered) is not None,
        f"{field} must be 16 hex characters (a 64-bit span id), got {quoted(value)}",
    )
    _require(lowered != "0" * 16, f"{field} must not be all zeros")
    return lowered


def _present(value: object, field: str) -> None:
    _require(value is not None, f"{field} is required")


def _in_range(value: int | None, field: str) -> None:
    _present(value, field)
    assert value is not None
    _require(0 <= value < 2**63, f"{field} must be between 1970-01-01 and 2262-04-11 (UTC)")


def _check_cost(row: dict[str, Any]) -> None:
    total = row.get("total_cost")
    if total is None:
        return
    _present(total, "cost.total_cost")
    _require(math.isfinite(total), f"cost.total_cost must be a finite number, got {total!r}")
    _require(total >= 0, "cost.total_cost must not be negative")
    _require(bool(row.get("cost_currency")), "cost.currency is required when cost is set")
    row["cost_is_estimated"] = False


def reference_check_span(row: dict[str, Any]) -> None:
    """`check_span` as it was, one `_require` per check."""
    row["trace_id"] = _trace_id(row.get("trace_id"), "trace_id", required=True) or ""
    row["span_id"] = _span_id(row.get("span_id"), "span_id", required=True) or ""
    row["parent_span_id"] = _span_id(row.get("parent_span_id"), "parent_span_id", required=False)
    _require(row["parent_span_id"] != row["span_id"], "parent_span_id must differ from span_id")
    name = row.get("name")
    _require(bool(name), "name is required")
    assert name is not None
    _require(len(name) <= MAX_NAME_LENGTH, f"name is longer than {MAX_NAME_LENGTH} characters")
    _present(row.get("kind"), "kind")
    if row.get("status") is None:
        row["status"] = "unset"
    start = row.get("start_time")
    _in_range(start, "start_time")
    end = row.get("end_time")
    if end is not None:
        _in_range(end, "end_time")
    if row.get("is_event"):
        _require(end is None or end == start, "end_time must be absent on an event span (is_event)")
        row["end_time"] = None
        row["duration_ns"] = None
    elif end is not None:
        assert start is not None
        _require(end >= start, "end_time is before start_time")
        row["duration_ns"] = end - start
    else:
        row["duration_ns"] = None
    row["is_root"] = row["parent_span_id"] is None
    row["is_event"] = bool(row.get("is_event"))
    error = row.get("error")
    if error is not None:
        _require(bool(error.get("message")), "error.message is required when error is set")
    tags = row.get("tags")
    if tags is not None:
        _require(len(tags) <= MAX_TAGS, f"tags: at most {MAX_TAGS} tags")
    for position, link in enumerate(row.get("links") or []):
        link["trace_id"] = _trace_id(
            link.get("trace_id"), f"links[{position}].trace_id", required=True
        )
        if link.get("span_id") is not None:
            link["span_id"] = _span_id(
                link.get("span_id"), f"links[{position}].span_id", required=False
            )
    _check_cost(row)


def _outcome(check: Any, row: dict[str, Any]) -> tuple[str | None, dict[str, Any]]:
    try:
        check(row)
    except InvalidRecordError as refusal:
        caught = refusal
    else:
        return None, row
    # The field at fault is carried, and is what the message names first.
    assert caught.field is not None
    assert str(caught).startswith(caught.field), (caught.field, str(caught))
    return str(caught), row


CHOICES: dict[str, list[Any]] = {
    "trace_id": [
        "0AF7651916CD43DD8448EB211C80319C",
        "0af7651916cd43dd8448eb211c80319c",
        "0" * 32,
        "",
        None,
        "xyz",
        "0af7651916cd43dd8448eb211c80319",
        "g" * 50,
    ],
    "span_id": ["B7AD6B7169203331", "b7ad6b7169203331", "0" * 16, "", None, "nothex!!"],
    "parent_span_id": ["00f067aa0ba902b7", "b7ad6b7169203331", "0" * 16, "", None, "zz"],
    "name": ["chat", "", None, "n" * MAX_NAME_LENGTH, "n" * (MAX_NAME_LENGTH + 1)],
    "kind": ["model_inference", None],
    "status": [None, "ok", "error"],
    "start_time": [100, None, 0, -1, 2**63],
    "end_time": [None, 100, 150, 50, 2**63],
    "is_event": [None, False, True, 1],
    "error": [None, {"message": "boom"}, {"message": ""}, {}],
    "tags": [None, [], ["a"], ["t"] * MAX_TAGS, ["t"] * (MAX_TAGS + 1)],
    "links": [
        None,
        [],
        [{"trace_id": "1" * 32}],
        [{"trace_id": "1" * 32, "span_id": "2" * 16}, {"trace_id": "ABC"}],
        [{"trace_id": "3" * 32, "span_id": "0" * 16}],
        [{"span_id": "2" * 16}],
    ],
    "total_cost": [None, 0.5, -1.0, math.inf, 0],
    "cost_currency": [None, "", "USD"],
}


def test_check_span_is_the_reference() -> None:
    rng = random.Random(0)
    refusals: set[str] = set()
    for index in range(5000):
        # Mostly the first (valid) choice, so that the later checks are reached too.
        row = {
            field: values[0] if rng.random() < 0.8 else rng.choice(values)
            for field, values in CHOICES.items()
        }
        if index % 4 == 0:
            for field in rng.sample(sorted(CHOICES), 3):
                del row[field]  # fields a row leaves out
        expected_row = copy.deepcopy(row)
        expected = _outcome(reference_check_span, expected_row)
        got = _outcome(check_span, row)
        assert got == expected, row
        if expected[0] is not None:
            refusals.add(expected[0].split(" ", 1)[0])
    # Every kind of refusal came up.
    assert len(refusals) >= 14, refusals


@pytest.mark.parametrize("row", [{"trace_id": 5}, {"trace_id": "1" * 32, "span_id": ["x"]}])
def test_check_span_fails_like_the_reference_on_wrong_types(row: dict[str, Any]) -> None:
    with pytest.raises(AttributeError) as expected:
        reference_check_span(copy.deepcopy(row))
    with pytest.raises(AttributeError) as raised:
        check_span(row)  # type: ignore[arg-type]
    assert str(raised.value) == str(expected.value)


def test_scores_keep_their_cost_check() -> None:
    row: dict[str, Any] = {
        "score_id": "s",
        "trace_id": "1" * 32,
        "scorer_id": "judge",
        "source": "api",
        "value": 1.0,
        "timestamp": 1,
        "total_cost": 0.2,
        "cost_currency": "USD",
    }
    check_score(row)  # type: ignore[arg-type]
    assert row["cost_is_estimated"] is False
    # The evaluation service prices its judge's calls from the price book, as ingest would.
    priced = {**row, "cost_is_estimated": True}
    check_score(priced, from_service=True)  # type: ignore[arg-type]
    assert priced["cost_is_estimated"] is True
    claimed = {**row, "cost_is_estimated": True}
    check_score(claimed)  # type: ignore[arg-type]
    assert claimed["cost_is_estimated"] is False
    row["total_cost"] = -1.0
    with pytest.raises(InvalidRecordError, match=r"cost\.total_cost must not be negative"):
        check_score(row)  # type: ignore[arg-type]
