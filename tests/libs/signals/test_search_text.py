"""The text spans and logs are searched by (`mcpd.signals.search`)."""

from __future__ import annotations

from collections import OrderedDict
from typing import Any, cast

from mcpd.signals.rows import LogRow, SpanRow
from mcpd.signals.search import log_search_text, span_search_text


class Note(str):
    pass


def _span(name: str, input: Any = None, output: Any = None) -> SpanRow:
    return cast(SpanRow, {"name": name, "input": input, "output": output})


def test_the_name_then_every_string_of_input_and_output_depth_first() -> None:
    document = {
        "role": "user",
        "parts": [{"type": "text", "content": "refund order A1"}, 42, None, True, 1.5],
        "nested": [["deep", {"deeper": "still"}]],
    }
    assert span_search_text(_span("chat", document, ["answer", {"k": "v"}])) == "\n".join(
        ["chat", "user", "text", "refund order A1", "deep", "still", "answer", "v"]
    )


def test_keys_and_numbers_are_not_searched_and_a_bare_string_is() -> None:
    assert span_search_text(_span("tool", {"role": 1, "content": 2.5}, "done")) == "tool\ndone"
    assert span_search_text(_span("empty")) == "empty"


def test_subclasses_of_the_json_types_count_as_them() -> None:
    document = OrderedDict(first=Note("a note"), second=[Note("in a list")])
    assert span_search_text(_span("s", document)) == "s\na note\nin a list"


def test_a_log_is_searched_by_its_message() -> None:
    assert log_search_text(cast(LogRow, {"message": "disk full"})) == "disk full"
