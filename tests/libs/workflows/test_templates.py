"""Templates: what a path reads, how a whole-string and an embedded reference render, the
literal `$${`, and the paths that do not parse."""

from __future__ import annotations

from typing import Any

import pytest

from mcpd.workflows.templates import Missing, TemplateError, parse_path, paths_in, render, resolve

SCOPE: dict[str, Any] = {
    "input": {"ticket": "T-1", "amount": 12.5, "tags": ["a", "b"], "nested": {"n": None}},
    "state": {"count": 3},
    "steps": {"classify": {"output": {"kind": "refund"}, "status": "succeeded", "error": None}},
    "item": {"sku": "x"},
    "index": 2,
}


def test_a_whole_string_reference_keeps_the_json_type() -> None:
    assert render("${input.amount}", SCOPE) == 12.5
    assert render("${input.tags}", SCOPE) == ["a", "b"]
    assert render("${steps.classify.output}", SCOPE) == {"kind": "refund"}
    assert render("${index}", SCOPE) == 2
    assert render("${input.nested.n}", SCOPE) is None


def test_an_embedded_reference_renders_as_text() -> None:
    assert render("ticket ${input.ticket}!", SCOPE) == "ticket T-1!"
    assert render("tags=${input.tags} n=${state.count}", SCOPE) == 'tags=["a","b"] n=3'
    assert render("${input.ticket}${index}", SCOPE) == "T-12"


def test_a_path_to_nothing_is_null_whole_and_empty_inside_text() -> None:
    assert render("${input.missing}", SCOPE) is None
    assert render("${input.tags[5]}", SCOPE) is None
    assert render("a${input.missing}b", SCOPE) == "ab"
    assert render("${iteration}", SCOPE) is None


def test_templates_render_inside_objects_and_arrays_and_leave_other_values_alone() -> None:
    template = {"t": "${input.ticket}", "list": ["${input.tags[1]}", 3, True, None], "n": 1.5}
    assert render(template, SCOPE) == {"t": "T-1", "list": ["b", 3, True, None], "n": 1.5}


def test_double_dollar_is_a_literal_reference() -> None:
    assert render("$${input.ticket}", SCOPE) == "${input.ticket}"
    assert render("cost $${x} for ${input.ticket}", SCOPE) == "cost ${x} for T-1"
    assert list(paths_in("$${input.ticket}")) == []


def test_resolve_tells_missing_from_null() -> None:
    assert resolve(parse_path("input.nested.n"), SCOPE) is None
    assert resolve(parse_path("input.nested.m"), SCOPE) is Missing
    assert resolve(parse_path("input.ticket[0]"), SCOPE) is Missing  # a string is not indexed


def test_a_parsed_path_keeps_its_text_root_and_segments() -> None:
    parsed = parse_path("steps.classify.output.items[3].name")
    assert (parsed.text, parsed.root, parsed.step_id) == (
        "steps.classify.output.items[3].name",
        "steps",
        "classify",
    )
    assert parsed.segments == ("classify", "output", "items", 3, "name")
    assert parse_path("input.a").step_id is None


def test_paths_in_walks_every_string_in_document_order() -> None:
    found = [p.text for p in paths_in({"a": ["${input.x}", {"b": "${state.y} ${index}"}]})]
    assert found == ["input.x", "state.y", "index"]


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("nope.x", "unknown root 'nope'"),
        ("", "does not start with a root name"),
        ("input.", "empty name after '.'"),
        ("input[x]", "expected '.name' or '[n]'"),
        ("steps.classify", "must read steps.<id>.output, .status or .error"),
        ("steps.classify.input", "a step has output, status and error"),
        ("steps[0].output", "must read steps.<id>.output"),
    ],
)
def test_a_malformed_path_is_refused_saying_why(text: str, says: str) -> None:
    with pytest.raises(TemplateError) as caught:
        parse_path(text)
    assert says in str(caught.value)
    assert caught.value.path == text


def test_an_unclosed_reference_is_refused() -> None:
    with pytest.raises(TemplateError, match="without a closing"):
        list(paths_in("a ${input.x"))
