"""The pipeline holds every record to the per-record limits, after redaction, and quotes at
most a few hundred characters of what it refuses: over a real SQLite control and trace store,
through `IngestPipeline.prepare`."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mcpd.auth import ALL_SCOPES
from mcpd.auth.principal import ANONYMOUS, Principal, PrincipalKind
from mcpd.runtime.errors import MAX_MESSAGE_LENGTH, QUOTE_LIMIT
from mcpd.storage import Stores, open_stores
from mcpd.storage.stored_json import json_size
from mcpd.testing.templates import SqliteTemplates
from services.ingest.incoming import IncomingBatch
from services.ingest.limits import MARKER_KEY
from services.ingest.pipeline import IngestPipeline
from services.ingest.tests.pipelines import build_pipeline
from tests.libs.signals.samples import log, metric, score, span

LIMIT = 64 * 1024
TRACE = "0af7651916cd43dd8448eb211c80319c"
PRINCIPAL = Principal(
    kind=PrincipalKind.ANONYMOUS,
    audit_id=ANONYMOUS,
    scopes=ALL_SCOPES,
    projects=frozenset({"p"}),
)
SPAN_FIELDS = ("input", "output", "attributes", "metadata", "error", "links")


@pytest.fixture
def stores(tmp_path: Path, sqlite_templates: SqliteTemplates) -> Iterator[Stores]:
    data_dir = sqlite_templates.data_dir(tmp_path)
    with open_stores("sqlite", data_dir=data_dir, postgres_url=None, clickhouse_url=None) as opened:
        yield opened


@pytest.fixture
def pipeline(stores: Stores) -> IngestPipeline:
    return build_pipeline(stores, payload_bytes=LIMIT)


def _span(**payload: Any) -> Any:
    return span("b7ad6b7169203331", trace_id=TRACE, **payload)


def _prepared_span(pipeline: IngestPipeline, **payload: Any) -> Any:
    prepared = pipeline.prepare(IncomingBatch(spans=[(0, _span(**payload))]), PRINCIPAL)
    assert prepared.errors == []
    assert prepared.valid == 1
    (row,) = prepared.batch.spans
    return row


def test_an_oversized_span_is_accepted_truncated_with_the_rest_intact(
    pipeline: IngestPipeline,
) -> None:
    original = "tool output line\n" * 300_000
    row = _prepared_span(
        pipeline, input=original, output={"answer": "42"}, attributes={"tool": "grep"}
    )

    marker = row["input"]
    assert marker["truncated"] is True
    assert marker["original_bytes"] == json_size(original)
    assert original.startswith(marker["head"])
    assert row["output"] == {"answer": "42"}
    assert row["attributes"] == {
        "tool": "grep",
        MARKER_KEY: {"fields": {"input": json_size(original)}},
    }
    assert (row["name"], row["status"], row["duration_ns"]) == (
        "span b7ad6b7169203331",
        "ok",
        10**7,
    )
    assert json_size(tuple(row[name] for name in SPAN_FIELDS)) <= LIMIT


def test_truncation_comes_after_redaction_so_no_cut_leaves_part_of_a_secret(
    pipeline: IngestPipeline,
) -> None:
    # Where the cut falls in a span of this shape, found with text that holds no secret.
    filler = "z" * (2 * LIMIT)
    head_length = len(_prepared_span(pipeline, input=filler)["input"]["head"])
    token = "ghp_" + "A1b2C3d4E5" * 4
    # The token starts 30 characters before the cut: a cut made first would keep `ghp_` and 25
    # characters, too short for the redactor to recognise as a token.
    text = "z" * (head_length - 30) + " " + token + " " + filler

    head = _prepared_span(pipeline, input=text)["input"]["head"]

    assert "ghp_" not in head
    assert "[REDACTED:github_token]" in head


def test_logs_and_scores_are_held_to_the_limit_too(pipeline: IngestPipeline) -> None:
    incoming = IncomingBatch(
        logs=[(0, log("l1", trace_id=TRACE, message="m" * (2 * LIMIT)))],
        scores=[(0, score("s1", trace_id=TRACE, reason="r" * (2 * LIMIT)))],
    )

    prepared = pipeline.prepare(incoming, PRINCIPAL)

    assert prepared.errors == []
    (log_row,) = prepared.batch.logs
    (score_row,) = prepared.batch.scores
    assert log_row["message"].endswith(f" … [truncated: {2 * LIMIT + 2} bytes]")
    assert log_row["fields"] == {MARKER_KEY: {"fields": {"message": 2 * LIMIT + 2}}}
    assert str(score_row["reason"]).endswith(f" … [truncated: {2 * LIMIT + 2} bytes]")
    assert score_row["metadata"] == {MARKER_KEY: {"fields": {"reason": 2 * LIMIT + 2}}}


def test_a_refusal_of_a_bad_id_quotes_at_most_the_limit(pipeline: IngestPipeline) -> None:
    incoming = IncomingBatch(spans=[(0, span("b7ad6b7169203331", trace_id="g" * 2_000_000))])

    prepared = pipeline.prepare(incoming, PRINCIPAL)
    (error,) = prepared.errors

    opening = "trace_id must be 32 hex characters (a 128-bit trace id), got "
    assert error.message.startswith(opening + "'gggg")
    assert error.message.endswith(" more characters)")
    assert len(error.message) <= len(opening) + QUOTE_LIMIT
    # The field travels with the refusal: nobody reads it back out of the message.
    (reason,) = prepared.reasons
    assert (reason.field, reason.reason) == ("trace_id", "INVALID_ARGUMENT")


def test_a_refusal_message_is_capped_whatever_it_holds(pipeline: IngestPipeline) -> None:
    key = "k" * 2_000_000
    incoming = IncomingBatch(metrics=[(0, metric("m1", labels={key: {"nested": True}}))])

    (error,) = pipeline.prepare(incoming, PRINCIPAL).errors

    assert len(error.message) <= MAX_MESSAGE_LENGTH
    assert error.message.startswith("labels.kkkk")
