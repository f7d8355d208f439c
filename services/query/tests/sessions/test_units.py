"""The small pieces: RFC 3339 parsing, typed ids, own-tool names, summaries, timestamps."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from services.query.sessions.args import parse_datetime
from services.query.sessions.envelope import echo, request_timestamp, timestamp
from services.query.sessions.errors import ToolError
from services.query.sessions.ids import id_kind, is_own_tool
from services.query.sessions.text import cap, summarize


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2026-04-30T09:00:00-04:00", datetime(2026, 4, 30, 13, tzinfo=UTC)),
        ("2026-04-30T13:00:00Z", datetime(2026, 4, 30, 13, tzinfo=UTC)),
        ("2026-04-30t13:00:00.5z", datetime(2026, 4, 30, 13, 0, 0, 500000, tzinfo=UTC)),
        ("2026-04-30T13:00:00.123456789+00:00", None),
        (
            "2026-04-30T13:00:00.123456000+05:30",
            datetime(2026, 4, 30, 7, 30, 0, 123456, tzinfo=UTC),
        ),
    ],
)
def test_rfc3339(text: str, expected: datetime | None) -> None:
    if expected is None:
        with pytest.raises(ToolError):
            parse_datetime(text, "t", millisecond_precision=False)
        return
    assert parse_datetime(text, "t", millisecond_precision=False) == expected


@pytest.mark.parametrize(
    "text",
    [
        "2026-04-30",
        "2026-04-30 13:00:00Z",
        "2026-04-30T13:00Z",
        "2026-04-30T13:00:00+0400",
        "2026-13-01T00:00:00Z",
        "2026-04-30T24:00:00Z",
        "2026-04-30T13:00:00-24:00",
        " 2026-04-30T13:00:00Z",
    ],
)
def test_rfc3339_rejects(text: str) -> None:
    with pytest.raises(ToolError) as caught:
        parse_datetime(text, "when", millisecond_precision=False)
    assert caught.value.details == {"field": "when"}


def test_millisecond_precision() -> None:
    assert (
        parse_datetime("2026-04-30T13:00:00.120000Z", "t", millisecond_precision=True).microsecond
        == 120000
    )
    with pytest.raises(ToolError, match="millisecond"):
        parse_datetime("2026-04-30T13:00:00.1201Z", "t", millisecond_precision=True)


def test_timestamps() -> None:
    moment = datetime(2026, 4, 29, 18, 42, 31, 125999, tzinfo=timezone(timedelta(hours=2)))
    assert timestamp(moment) == "2026-04-29T16:42:31.125Z"  # cut, not rounded
    assert timestamp(datetime(2026, 4, 29, 18, 42, 31)) == "2026-04-29T18:42:31.000Z"  # naive: UTC
    assert request_timestamp(moment) == "2026-04-29T16:42:31.125999Z"
    assert request_timestamp(moment.replace(microsecond=125000)) == "2026-04-29T16:42:31.125Z"


@pytest.mark.parametrize(
    ("raw", "kind"),
    [
        ("session:ses_01J9Q3N7W6F9A8K2M4V5R6T7Y8", "session"),
        ("turn:turn_01J9Q3P4V8BN7XM9G2K6Q1W3E4", "turn"),
        ("event:evt_01J9Q3Q2C4TD9K7F8M1N5R6P2A", "event"),
        ("session:c2Vzcy0x", "session"),
        ("not-a-valid-id", None),
        ("Session:ses_x", None),
        ("session:ses x", None),
        ("session:" + "a" * 201, None),
    ],
)
def test_typed_ids(raw: str, kind: str | None) -> None:
    if kind is None:
        with pytest.raises(ToolError) as caught:
            id_kind(raw, "id")
        assert caught.value.code == "invalid_id"
    else:
        assert id_kind(raw, "id") == kind


@pytest.mark.parametrize(
    ("name", "payload", "own"),
    [
        ("search_sessions", None, True),
        ("mcp__moraine__search_sessions", None, True),
        ("mcp__mcpd__file_attention", None, True),
        ("mcpd.list_sessions", None, True),
        ("mcp__mcpd__open", None, True),
        ("mcp__browser__open", None, False),
        ("open", None, False),
        ("open", {"self_tool": True}, True),
        ("exec_command", None, False),
        (None, None, False),
    ],
)
def test_own_tools(name: str | None, payload: dict[str, bool] | None, own: bool) -> None:
    assert is_own_tool(name, payload) is own


def test_summaries() -> None:
    assert summarize("short") == ("short", False)
    assert summarize("first line\nsecond") == ("first line...", True)
    assert summarize("  \n  padded  \n") == ("padded", False)
    long, cut = summarize("word " * 100)
    assert cut
    assert len(long) <= 123
    assert long.endswith("word...")
    assert cap("x" * 10) == ("x" * 10, False)
    capped, was = cap("x" * 400)
    assert was
    assert len(capped) == 300


def test_echo_is_json_safe() -> None:
    assert echo({"a": (1, float("nan")), "b": object}) == {"a": [1, "nan"], "b": repr(object)}
