"""What an error message may hold: `quoted` values, and the cap every McpdError applies."""

from __future__ import annotations

import grpc
import pytest

from mcpd.runtime.errors import (
    MAX_MESSAGE_LENGTH,
    QUOTE_LIMIT,
    InvalidArgument,
    McpdError,
    quoted,
    shortened,
)
from mcpd.runtime.errors_grpc import RpcFailure, to_rpc_status

HUGE = "x" * 2_000_000


@pytest.mark.parametrize("value", ["x" * (QUOTE_LIMIT - 2), "ab'c", 3.5, None, {"a": [1, 2]}])
def test_a_short_value_is_quoted_as_its_repr(value: object) -> None:
    assert quoted(value) == repr(value)


def test_a_huge_string_is_quoted_by_its_start_and_how_much_more_there_was() -> None:
    text = quoted(HUGE)

    assert len(text) <= QUOTE_LIMIT
    shown, _, rest = text.partition("…")
    assert shown == "'" + "x" * (len(shown) - 1)
    assert rest == f" ({len(repr(HUGE)) - len(shown)} more characters)"


def test_any_value_is_quoted_within_the_limit() -> None:
    value = {"rows": list(range(100_000))}
    text = quoted(value, 50)
    assert len(text) <= 50
    assert text.startswith("{'rows': [0, 1, 2")
    assert text.endswith(" more characters)")


def test_shortening_twice_changes_nothing_more() -> None:
    once = shortened(HUGE, 100)
    assert len(once) == 100
    assert shortened(once, 100) == once


def test_an_error_message_and_field_are_capped_keeping_their_start() -> None:
    message = f"{HUGE}: unknown field"
    error = InvalidArgument(message, field=f"spans[0].{HUGE}")

    assert len(error.message) <= MAX_MESSAGE_LENGTH
    assert str(error) == error.message
    kept = error.message.index("…")
    assert error.message == message[:kept] + f"… ({len(message) - kept} more characters)"
    assert error.field is not None
    assert len(error.field) <= QUOTE_LIMIT
    assert error.field.startswith("spans[0].xxx")


def test_a_capped_error_crosses_grpc_unchanged() -> None:
    error = InvalidArgument("from: " + HUGE, field="from")
    status = to_rpc_status(error)
    failure = RpcFailure(grpc.StatusCode.INVALID_ARGUMENT, status.message, "INVALID_ARGUMENT")

    relayed: McpdError = failure.to_error()

    assert relayed.message == error.message
    assert relayed.message.startswith("from: xxx")
