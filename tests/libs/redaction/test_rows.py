"""`redact_row`: which columns of each signal are payload, and identities hashed once."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from mcpd.redaction import (
    IDENTITY_FIELDS,
    PAYLOAD_FIELDS,
    RedactionPolicy,
    Redactor,
    is_hashed,
    mask,
    redact_row,
)

KEY = b"k" * 32
GITHUB = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"
GH = mask("github_token")
R = Redactor(
    RedactionPolicy.parse(
        {
            "rules": [
                {"name": "internal", "pattern": "INTERNAL-ONLY", "mode": "drop"},
                {"name": "pw", "keys": ["pw"], "mode": "drop"},
            ]
        }
    ),
    key=KEY,
)


def span(**fields: Any) -> dict[str, Any]:
    row: dict[str, Any] = {
        "project": "shop",
        "trace_id": "0af7651916cd43dd8448eb211c80319c",
        "span_id": "b7ad6b7169203331",
        "name": f"call with {GITHUB}",
        "kind": "tool_call",
        "user_id": "ann@example.com",
        "session_id": GITHUB,
        "tags": [GITHUB],
        "input": None,
        "output": None,
        "attributes": None,
        "metadata": None,
        "error": None,
        "links": None,
        "model_parameters": None,
    }
    row.update(fields)
    return row


def test_span_payload_columns_are_redacted_and_the_rest_left_alone() -> None:
    row = span(
        input={"cmd": f"git push https://{GITHUB}@github.com", "pw": "x"},
        output=f"done {GITHUB}",
        attributes={"http.request.header.authorization": "Bearer abcdefghijklmnop"},
        metadata=[GITHUB],
        error={
            "message": f"auth failed for {GITHUB}",
            "kind": "AuthError",
            "details": {"t": GITHUB},
        },
        links=[
            {"trace_id": "1" * 32, "span_id": "2" * 16, "attributes": {"why": GITHUB}},
            {"trace_id": "3" * 32},
        ],
        model_parameters={"temperature": 0.2, "stop_sequences": [GITHUB, "END"]},
    )
    redact_row(R, "span", row)
    assert row["input"] == {"cmd": f"git push https://{GH}@github.com"}
    assert row["output"] == f"done {GH}"
    assert row["attributes"] == {"http.request.header.authorization": mask("secret_field")}
    assert row["metadata"] == [GH]
    assert row["error"] == {
        "message": f"auth failed for {GH}",
        "kind": "AuthError",
        "details": {"t": GH},
    }
    assert row["links"] == [
        {"trace_id": "1" * 32, "span_id": "2" * 16, "attributes": {"why": GH}},
        {"trace_id": "3" * 32},
    ]
    assert row["model_parameters"] == {"temperature": 0.2, "stop_sequences": [GH, "END"]}
    # Names, correlation ids and tags are not payload.
    assert GITHUB in row["name"]
    assert row["session_id"] == GITHUB
    assert row["tags"] == [GITHUB]
    assert is_hashed(row["user_id"])


def test_a_dropped_required_field_is_masked_and_an_optional_one_cleared() -> None:
    row = span(
        input="INTERNAL-ONLY",
        error={"message": "INTERNAL-ONLY", "stack": "INTERNAL-ONLY trace"},
    )
    redact_row(R, "span", row)
    assert row["input"] is None
    assert row["error"] == {"message": mask("internal")}
    log = {"project": "p", "message": "INTERNAL-ONLY", "fields": {"a": "INTERNAL-ONLY"}}
    redact_row(R, "log", log)
    assert log == {"project": "p", "message": mask("internal"), "fields": {}}
    score = {"project": "p", "label": "INTERNAL-ONLY", "reason": "fine", "metadata": None}
    redact_row(R, "score", score)
    assert score["label"] is None
    assert score["reason"] == "fine"
    feedback = {"project": "p", "value": "INTERNAL-ONLY", "comment": "INTERNAL-ONLY"}
    redact_row(R, "feedback", feedback)
    assert feedback["value"] == mask("internal")
    assert feedback["comment"] is None
    note = {"project": "p", "text": "INTERNAL-ONLY"}
    redact_row(R, "aspect_note", note)
    assert note["text"] == mask("internal")


def test_other_signals() -> None:
    log = {
        "project": "p",
        "message": f"token {GITHUB}",
        "fields": {"pw": 1, "k": GITHUB},
        "user_id": "u",
    }
    redact_row(R, "log", log)
    assert log["message"] == f"token {GH}"
    assert log["fields"] == {"k": GH}
    metric = {"project": "p", "name": GITHUB, "labels": {"route": "/x", "pw": "y", "t": GITHUB}}
    redact_row(R, "metric", metric)
    assert metric["labels"] == {"route": "/x", "t": GH}
    assert metric["name"] == GITHUB
    score = {"project": "p", "label": GITHUB, "reason": f"saw {GITHUB}", "metadata": {"k": GITHUB}}
    redact_row(R, "score", score)
    assert score == {"project": "p", "label": GH, "reason": f"saw {GH}", "metadata": {"k": GH}}
    feedback = {
        "project": "p",
        "value": {"correction": GITHUB},
        "comment": GITHUB,
        "metadata": None,
        "author_id": "reviewer-1",
        "user_id": None,
    }
    redact_row(R, "feedback", feedback)
    assert feedback["value"] == {"correction": GH}
    assert feedback["comment"] == GH
    assert feedback["author_id"] == R.hash_identifier("reviewer-1")
    assert feedback["user_id"] is None
    note = {"project": "p", "text": f"the agent printed {GITHUB}", "aspect": "behaviour"}
    redact_row(R, "aspect_note", note)
    assert note["text"] == f"the agent printed {GH}"


@pytest.mark.parametrize("signal", sorted(PAYLOAD_FIELDS))
def test_a_row_redacted_twice_is_unchanged(signal: str) -> None:
    rows = {
        "span": span(input={"a": GITHUB}, error={"message": GITHUB}),
        "log": {"project": "p", "message": GITHUB, "fields": {"a": GITHUB}, "user_id": "u"},
        "metric": {"project": "p", "labels": {"a": GITHUB}, "user_id": "u"},
        "score": {
            "project": "p",
            "label": GITHUB,
            "reason": None,
            "metadata": None,
            "user_id": "u",
        },
        "feedback": {"project": "p", "value": GITHUB, "author_id": "a", "user_id": "u"},
        "aspect_note": {"project": "p", "text": GITHUB, "user_id": "u"},
    }
    row = rows[signal]
    redact_row(R, signal, row)
    once = copy.deepcopy(row)
    redact_row(R, signal, row)
    assert row == once
    assert is_hashed(row["user_id"])


def test_unchanged_columns_are_not_reassigned() -> None:
    payload = {"a": "plain"}
    row = span(input=payload, user_id=None)
    redact_row(R, "span", row)
    assert row["input"] is payload


def test_identities_need_the_key() -> None:
    with pytest.raises(ValueError, match="redaction key"):
        redact_row(Redactor(), "log", {"project": "p", "message": "m", "user_id": "u"})


def test_unknown_signals_are_refused() -> None:
    with pytest.raises(ValueError, match="unknown signal"):
        redact_row(R, "trace", {})


def test_the_tables_cover_the_six_signals() -> None:
    assert (
        set(PAYLOAD_FIELDS)
        == set(IDENTITY_FIELDS)
        == {
            "span",
            "log",
            "metric",
            "score",
            "feedback",
            "aspect_note",
        }
    )
