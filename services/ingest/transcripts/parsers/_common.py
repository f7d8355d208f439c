"""Helpers every transcript parser may use. Small and stable: other parsers import these.

- `read_json_lines`: one JSON object per line; a bad line becomes a `ParseError`, never raises.
- `feed_records`: each object line to a handler; a line it cannot read is a `ParseError` too.
- `parse_timestamp`: RFC 3339 strings or epoch seconds/milliseconds, to an aware UTC datetime.
- `block_text`: the text of string-or-list-of-blocks content (Anthropic/OpenAI message shapes).
- `Parser`: what a harness parser looks like.
- `UniqueKeys`: makes event keys unique within a file when a harness id repeats.
- `tool_call_event`: a tool_call `ParsedEvent` with text, arguments, file paths and the
  self-tool flag filled in the same way for every harness.
- `mark_turn_start`: where the turn a genuine prompt opens begins (setup events before it).
"""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from datetime import UTC, datetime
from typing import Any, Protocol

from mcpd.sessions.model import EventType, ParsedEvent, ParsedSession, ParseError
from services.ingest.transcripts.tool_args import (
    file_paths,
    self_tool_name,
    tool_call_text,
    workdir,
)

__all__ = [
    "ENCRYPTED_REASONING",
    "Parser",
    "UniqueKeys",
    "block_text",
    "feed_records",
    "mark_turn_start",
    "parse_timestamp",
    "read_json_lines",
    "tool_call_event",
]

# The text of reasoning whose content is encrypted or redacted by the provider.
ENCRYPTED_REASONING = "[encrypted reasoning omitted]"

# Epoch numbers at or above this are milliseconds (1e11 seconds is in the year 5138).
_EPOCH_MS_FROM = 100_000_000_000


class Parser(Protocol):
    """Reads one transcript file into a `ParsedSession` (events in transcript order)."""

    harness: str

    def parse(self, lines: Sequence[str], *, path: str) -> ParsedSession:
        """`lines` are the file's complete lines (a partial last line is never passed)."""
        ...


def read_json_lines(
    lines: Iterable[str], start_line: int = 1
) -> Iterator[tuple[int, dict[str, Any]] | ParseError]:
    """(line number, object) per non-blank line, or a `ParseError` for a line that is not a
    JSON object. Line numbers are one-based from `start_line`; blank lines are skipped."""
    for number, raw in enumerate(lines, start=start_line):
        text = raw.strip().lstrip("\ufeff")
        if not text:
            continue
        try:
            value = json.loads(text)
        except json.JSONDecodeError as exc:
            yield ParseError(number, f"invalid JSON: {exc.msg} at column {exc.colno}")
            continue
        except (ValueError, RecursionError) as exc:
            yield ParseError(number, f"invalid JSON: {exc}")
            continue
        if not isinstance(value, dict):
            yield ParseError(number, f"expected a JSON object, got {_json_kind(value)}")
            continue
        yield number, value


def feed_records(
    lines: Iterable[str], handle: Callable[[int, dict[str, Any]], None]
) -> list[ParseError]:
    """Calls `handle(line, record)` for each JSON object line; returns the bad lines and the
    records `handle` failed on (TypeError, ValueError, AttributeError, KeyError: a record of an
    unexpected shape) as `ParseError`s, in line order. Nothing stops the file."""
    errors: list[ParseError] = []
    for item in read_json_lines(lines):
        if isinstance(item, ParseError):
            errors.append(item)
            continue
        line, record = item
        try:
            handle(line, record)
        except (TypeError, ValueError, AttributeError, KeyError) as exc:
            errors.append(ParseError(line, f"unreadable record: {exc!r}"))
    return errors


def _json_kind(value: object) -> str:
    if isinstance(value, list):
        return "an array"
    if isinstance(value, str):
        return "a string"
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    return "a number"


def parse_timestamp(value: object) -> datetime | None:
    """An aware UTC datetime from an RFC 3339 / ISO 8601 string (naive means UTC) or an epoch
    number (seconds, or milliseconds when large); None for anything else."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return _from_epoch(float(value))
    if not isinstance(value, str):
        return None
    text = value.strip()
    if not text:
        return None
    try:
        return _from_epoch(float(text))
    except ValueError:
        pass
    if text.endswith(("z", "Z")):
        text = text[:-1] + "+00:00"
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        return None
    if parsed.tzinfo is None:
        return parsed.replace(tzinfo=UTC)
    return parsed.astimezone(UTC)


def _from_epoch(number: float) -> datetime | None:
    if not math.isfinite(number):
        return None
    seconds = number / 1000 if abs(number) >= _EPOCH_MS_FROM else number
    try:
        return datetime.fromtimestamp(seconds, tz=UTC)
    except (OverflowError, OSError, ValueError):
        return None


def block_text(content: object) -> str:
    """A string as is; for a list of blocks, the `text` of each text-like block (strings kept,
    nested `content` read the same way), joined by newlines. Images and unknown blocks add
    nothing."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    parts: list[str] = []
    for block in content:
        if isinstance(block, str):
            parts.append(block)
        elif isinstance(block, dict):
            text = block.get("text")
            if isinstance(text, str):
                parts.append(text)
            elif "content" in block:
                nested = block_text(block["content"])
                if nested:
                    parts.append(nested)
    return "\n".join(parts)


class UniqueKeys:
    """Harness ids can repeat within a file (replayed or copied history): the first use keeps
    the key, later uses get `#<n>`, so keys stay unique and stable in transcript order."""

    def __init__(self) -> None:
        self._seen: Counter[str] = Counter()

    def claim(self, key: str) -> str:
        count = self._seen[key]
        self._seen[key] += 1
        return key if count == 0 else f"{key}#{count}"


def tool_call_event(
    *,
    key: str,
    line: int,
    name: str,
    arguments: Any,
    call_id: str | None,
    timestamp: datetime | None,
    model: str | None = None,
    cwd: str | None = None,
    payload: dict[str, Any] | None = None,
) -> ParsedEvent:
    """A tool_call event: `text` is `name(k=v, ...)` (or `name` and the raw input), `payload`
    holds `arguments` and, for mcpd's own tools, `self_tool: True` and `canonical_tool`; file
    paths named by the arguments (not for self tools) and whether the tool mutates them; the
    event's cwd follows a `workdir` argument."""
    body: dict[str, Any] = {"arguments": arguments}
    if payload:
        body.update(payload)
    canonical = self_tool_name(name, arguments)
    paths: list[str] = []
    mutation = False
    if canonical is not None:
        body["self_tool"] = True
        body["canonical_tool"] = canonical
    else:
        paths, mutation = file_paths(name, arguments)
    return ParsedEvent(
        key=key,
        line=line,
        type=EventType.TOOL_CALL,
        text=tool_call_text(name, arguments),
        timestamp=timestamp,
        tool_name=name,
        call_id=call_id,
        model=model,
        payload=body,
        cwd=workdir(arguments, cwd),
        file_paths=paths,
        mutation=mutation,
    )


_SETUP_TYPES = (EventType.SYSTEM, EventType.RUNTIME)


def mark_turn_start(events: list[ParsedEvent], prompt: int, setup_from: int | None) -> None:
    """Marks where the turn opened by the genuine prompt `events[prompt]` begins.

    Harnesses write turn setup before the prompt (Codex: task_started, instructions,
    environment context; Claude: queue records). The turn starts at the earliest event of the
    unbroken run of non-terminal system/runtime events just before the prompt, not earlier
    than `setup_from` (where setup may begin: the file start or just after the last turn
    ended; None: nowhere); otherwise at the prompt itself. Exactly one event gets
    `starts_turn`."""
    start = prompt
    if setup_from is not None:
        while start - 1 >= setup_from:
            before = events[start - 1]
            if before.type not in _SETUP_TYPES or before.terminal or before.starts_turn:
                break
            start -= 1
    events[prompt].starts_turn = start == prompt
    events[start].starts_turn = True
