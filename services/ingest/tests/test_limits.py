"""Per-record limits (`services.ingest.limits`): each rule, the marker shapes, and that what is
cut fits and decodes where the reader expects it to."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from mcpd import codec
from mcpd.model.v1 import telemetry_pb2
from mcpd.runtime.config import IngestSettings
from mcpd.storage.stored_json import json_size
from services.ingest.limits import MARKER_KEY, RecordLimits
from tests.libs.signals.samples import aspect_note, feedback, log, score, span

LIMIT = 64 * 1024
LIMITS = RecordLimits(payload_bytes=LIMIT, attributes=4, span_events=2, span_links=2)
BIG = 5 * 1024 * 1024
TRACE = "a" * 32


def _payload_size(row: Any, *fields: str) -> int:
    return json_size(tuple(row.get(name) for name in fields))


SPAN_FIELDS = ("input", "output", "attributes", "metadata", "error", "links")


def _assert_marker(value: Any, original: Any) -> str:
    """`value` is the truncation marker of `original`; its head."""
    assert set(value) == {"truncated", "original_bytes", "head"}
    assert value["truncated"] is True
    assert value["original_bytes"] == json_size(original)
    text = original if isinstance(original, str) else json.dumps(original, separators=(",", ":"))
    head: str = value["head"]
    assert text.startswith(head)
    return head


def test_defaults_come_from_the_settings() -> None:
    limits = RecordLimits.from_settings(IngestSettings())
    assert limits == RecordLimits(
        payload_bytes=1024 * 1024, attributes=128, span_events=128, span_links=128
    )


def test_a_record_within_every_limit_is_left_exactly_as_it_was() -> None:
    attributes = {"a": 1, "b": "two", "otel.events": [{"name": "e1"}, {"name": "e2"}]}
    links = [{"trace_id": TRACE}, {"trace_id": TRACE, "attributes": {"why": "retry"}}]
    row = span("s1", input="x" * 1000, output={"ok": True}, attributes=attributes, links=links)
    before = copy.deepcopy(row)

    LIMITS.fit_span(row)

    assert row == before
    assert row["attributes"] is attributes
    assert row["links"] is links


def test_a_large_string_input_becomes_a_marker_with_its_own_prefix() -> None:
    original = "q" * BIG
    row = span("s1", input=original, output="answer", attributes={"model": "m"})

    LIMITS.fit_span(row)

    head = _assert_marker(row["input"], original)
    assert json_size(head) > LIMIT - 256
    assert _payload_size(row, *SPAN_FIELDS) <= LIMIT
    assert row["attributes"] == {
        "model": "m",
        MARKER_KEY: {"fields": {"input": json_size(original)}},
    }
    assert row == span("s1", input=row["input"], output="answer", attributes=row["attributes"])


def test_a_large_structured_value_keeps_a_prefix_of_its_json_text() -> None:
    original = {"messages": [{"role": "user", "content": f"turn {n} " * 50} for n in range(2000)]}
    row = span("s1", output=original)

    LIMITS.fit_span(row)

    head = _assert_marker(row["output"], original)
    assert head.startswith('{"messages":[{"role":"user","content":"turn 0 ')
    assert row["attributes"] == {MARKER_KEY: {"fields": {"output": json_size(original)}}}
    assert _payload_size(row, *SPAN_FIELDS) <= LIMIT


@pytest.mark.parametrize(
    "character", ["é", "€", "😀", '"', "\n"], ids=["2B", "3B", "4B", "quote", "newline"]
)
def test_heads_end_on_a_character_boundary_and_the_record_fits(character: str) -> None:
    # An odd prefix shifts every multi-byte character across the cut point.
    original = "x" + character * (BIG // 4)
    row = span("s1", input=original)

    LIMITS.fit_span(row)

    head = _assert_marker(row["input"], original)
    # The head fills what the rest of the span leaves (its marker and the field names).
    assert json_size(head) > LIMIT - 256
    assert _payload_size(row, *SPAN_FIELDS) <= LIMIT


def test_large_values_share_the_room_left() -> None:
    row = span("s1", input="i" * BIG, output="o" * (BIG // 2), metadata={"note": "small"})

    LIMITS.fit_span(row)

    heads = [len(row[name]["head"]) for name in ("input", "output")]
    assert abs(heads[0] - heads[1]) <= 1
    assert sum(heads) > LIMIT * 0.9
    assert row["metadata"] == {"note": "small"}
    assert row["attributes"][MARKER_KEY]["fields"] == {
        "input": BIG + 2,
        "output": BIG // 2 + 2,
    }
    assert _payload_size(row, *SPAN_FIELDS) <= LIMIT


def test_attribute_values_are_cut_one_by_one_and_keep_their_keys() -> None:
    attributes = {"small": "s", "http.response.body": "b" * BIG, "count": 3}
    original_size = json_size(attributes)
    row = span("s1", attributes=attributes)

    LIMITS.fit_span(row)

    cut = row["attributes"]
    assert list(cut) == ["small", "http.response.body", "count", MARKER_KEY]
    assert (cut["small"], cut["count"]) == ("s", 3)
    _assert_marker(cut["http.response.body"], "b" * BIG)
    assert cut[MARKER_KEY] == {"fields": {"attributes": original_size}}
    assert _payload_size(row, *SPAN_FIELDS) <= LIMIT


def test_attributes_whose_keys_alone_are_too_large_are_dropped() -> None:
    attributes = {"k" * 40_000: 1, "kept": "v", "K" * 30_000: 2}
    row = span("s1", attributes=attributes)

    LIMITS.fit_span(row)

    assert row["attributes"] == {
        "kept": "v",
        "K" * 30_000: 2,
        MARKER_KEY: {"dropped_attributes": 1},
    }
    assert _payload_size(row, *SPAN_FIELDS) <= LIMIT


def test_a_span_error_keeps_its_shape_and_decodes() -> None:
    error = {
        "message": "boom " * BIG,
        "kind": "ValueError",
        "stack": "frame\n" * 1000,
        "details": {"dump": "d" * BIG},
    }
    row = span("s1", status="error", error=error)

    LIMITS.fit_span(row)

    cut: Any = row["error"]
    assert cut["kind"] == "ValueError"
    assert cut["stack"] == "frame\n" * 1000
    assert cut["message"].startswith("boom boom ")
    assert cut["message"].endswith(f" … [truncated: {len('boom ') * BIG + 2} bytes]")
    _assert_marker(cut["details"], {"dump": "d" * BIG})
    decoded = codec.decode(cut, telemetry_pb2.SpanError)
    assert decoded.kind == "ValueError"
    assert _payload_size(row, *SPAN_FIELDS) <= LIMIT


def test_links_past_the_limit_are_dropped_and_large_link_attributes_cut() -> None:
    links = [
        {"trace_id": TRACE, "kind": "retry_of", "attributes": {"blob": "z" * BIG}},
        {"trace_id": TRACE, "span_id": "b" * 16},
        {"trace_id": TRACE, "span_id": "c" * 16},
    ]
    kept_size = json_size(links[:2])
    row = span("s1", links=links)

    LIMITS.fit_span(row)

    kept: Any = row["links"]
    first, second = kept
    assert first["kind"] == "retry_of"
    _assert_marker(first["attributes"], {"blob": "z" * BIG})
    assert second == {"trace_id": TRACE, "span_id": "b" * 16}
    assert [codec.decode(link, telemetry_pb2.SpanLink).trace_id for link in kept] == [TRACE, TRACE]
    assert row["attributes"] == {MARKER_KEY: {"fields": {"links": kept_size}, "dropped_links": 1}}


def test_attributes_past_the_count_keep_the_first_in_order_and_mcpds_own_keys() -> None:
    attributes: dict[str, Any] = {f"k{n}": n for n in range(7)}
    attributes |= {"otel.events": [{"name": f"e{n}"} for n in range(5)], "otel.scope.name": "s"}
    row = span("s1", attributes=attributes)

    LIMITS.fit_span(row)

    assert row["attributes"] == {
        "k0": 0,
        "k1": 1,
        "k2": 2,
        "k3": 3,
        "otel.events": [{"name": "e0"}, {"name": "e1"}],
        "otel.scope.name": "s",
        MARKER_KEY: {"dropped_attributes": 3, "dropped_events": 3},
    }


def test_a_log_message_stays_a_string_and_its_fields_carry_the_marker() -> None:
    fields = {f"f{n}": n for n in range(6)}
    row = log("l1", message="line " * BIG, fields=fields)

    LIMITS.fit_log(row)

    assert row["message"].startswith("line line ")
    assert row["message"].endswith(f" … [truncated: {len('line ') * BIG + 2} bytes]")
    assert row["fields"] == {
        "f0": 0,
        "f1": 1,
        "f2": 2,
        "f3": 3,
        MARKER_KEY: {"fields": {"message": len("line ") * BIG + 2}, "dropped_attributes": 2},
    }
    assert _payload_size(row, "message", "fields") <= LIMIT


def test_a_note_is_cut_in_its_text_alone() -> None:
    row = aspect_note("n1", text="The user " * BIG)

    LIMITS.fit_note(row)

    assert row["text"].startswith("The user The user ")
    assert row["text"].endswith(" bytes]")
    assert json_size(row["text"]) <= LIMIT
    assert row["aspect"] == "goal"


def test_a_score_reason_is_cut_and_its_metadata_carries_the_marker() -> None:
    row = score("sc1", reason="because " * BIG, metadata=None)

    LIMITS.fit_score(row)

    assert str(row["reason"]).startswith("because because ")
    assert row["metadata"] == {MARKER_KEY: {"fields": {"reason": len("because ") * BIG + 2}}}
    assert _payload_size(row, "label", "reason", "metadata") <= LIMIT


def test_a_text_feedback_value_stays_text() -> None:
    row = feedback("f1", kind="correction", value="fix " * BIG, metadata={"by": "reviewer"})

    LIMITS.fit_feedback(row)

    assert isinstance(row["value"], str)
    assert row["value"].startswith("fix fix ")
    assert row["metadata"] == {
        "by": "reviewer",
        MARKER_KEY: {"fields": {"value": len("fix ") * BIG + 2}},
    }
    assert _payload_size(row, "value", "comment", "metadata") <= LIMIT
