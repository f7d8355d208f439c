"""A note is filed under an enabled aspect of its project's catalogue, at a stored version of it:
over a real SQLite control and trace store, through `IngestPipeline.prepare`."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from mcpd.aspects import BUILT_INS, AspectConfig, AspectDefinition, sync_aspects
from mcpd.auth import ALL_SCOPES
from mcpd.auth.principal import ANONYMOUS, Principal, PrincipalKind
from mcpd.model.v1 import enums_pb2
from mcpd.runtime.clock import ManualClock
from mcpd.storage import Stores, open_stores
from mcpd.testing.templates import SqliteTemplates
from services.ingest.incoming import IncomingBatch
from services.ingest.pipeline import Prepared
from services.ingest.tests.pipelines import build_pipeline
from tests.libs.signals.samples import aspect_note

TRACE = "0af7651916cd43dd8448eb211c80319c"
PRINCIPAL = Principal(
    kind=PrincipalKind.ANONYMOUS,
    audit_id=ANONYMOUS,
    scopes=ALL_SCOPES,
    projects=frozenset({"p"}),
)
GOAL, SENTIMENT = BUILT_INS[0], BUILT_INS[1]
REFUND_REASON = AspectDefinition(
    name="refund_reason",
    label="Refund reason",
    description="Why the user asked for their money back",
    instruction="Write one short, plain sentence saying why the user wanted their money back.",
)
# Sentiment switched off, goal edited (its version 2 once the built-ins are seeded), one custom.
CONFIGURED = AspectConfig(
    {"p": (replace(SENTIMENT, enabled=False), replace(GOAL, label="Aim"), REFUND_REASON)}
)


@pytest.fixture
def stores(tmp_path: Path, sqlite_templates: SqliteTemplates) -> Iterator[Stores]:
    data_dir = sqlite_templates.data_dir(tmp_path)
    with open_stores("sqlite", data_dir=data_dir, postgres_url=None, clickhouse_url=None) as opened:
        yield opened


def _prepare(stores: Stores, config: AspectConfig | None, *notes: dict[str, Any]) -> Prepared:
    pipeline = build_pipeline(stores, aspects=config)
    incoming = IncomingBatch(
        aspect_notes=[
            (index, aspect_note(f"n{index}", trace_id=TRACE, **note))
            for index, note in enumerate(notes)
        ]
    )
    return pipeline.prepare(incoming, PRINCIPAL)


def _refusal(prepared: Prepared) -> tuple[str | None, str]:
    (error,) = prepared.errors
    (reason,) = prepared.reasons
    assert (error.signal, error.index) == (enums_pb2.SIGNAL_TYPE_ASPECT_NOTE, 0)
    return reason.field, error.message


def test_a_note_under_a_built_in_seeds_the_projects_aspects_and_is_accepted(
    stores: Stores,
) -> None:
    prepared = _prepare(stores, None, {"aspect": "goal", "definition_version": 1})

    assert (prepared.errors, prepared.valid) == ([], 1)
    assert [row["aspect"] for row in prepared.batch.aspect_notes] == ["goal"]
    # Its wording is sketched as stored, after redaction: what the clustering pass compares.
    (note,) = prepared.batch.aspect_notes
    assert note["sketch"] is not None
    assert len(note["sketch"]) == 512
    assert [record.name for record in stores.control.aspects("p")] == [
        "goal",
        "sentiment",
        "behaviour",
        "outcome",
    ]


def test_a_note_under_an_aspect_the_project_lacks_is_refused_naming_aspect(
    stores: Stores,
) -> None:
    prepared = _prepare(
        stores,
        None,
        {"aspect": "risk", "definition_version": 1},
        {"aspect": "goal", "definition_version": 1},
    )

    assert prepared.valid == 1  # one bad note costs the others nothing
    field, message = _refusal(prepared)
    assert field == "aspect"
    assert message == (
        "aspect: 'risk' is not an aspect of this project (it has goal, sentiment, behaviour,"
        " outcome)"
    )


def test_a_note_under_a_switched_off_aspect_is_refused(stores: Stores) -> None:
    prepared = _prepare(stores, CONFIGURED, {"aspect": "sentiment", "definition_version": 1})

    assert _refusal(prepared) == ("aspect", "aspect: sentiment is switched off in this project")


@pytest.mark.parametrize("version", [0, 3])
def test_a_note_at_a_version_that_is_not_stored_is_refused_naming_definition_version(
    stores: Stores, version: int
) -> None:
    sync_aspects(stores.control, AspectConfig(), ["p"], ManualClock())  # goal 1, then Aim 2

    prepared = _prepare(stores, CONFIGURED, {"aspect": "goal", "definition_version": version})

    assert _refusal(prepared) == (
        "definition_version",
        f"definition_version: goal has versions 1 to 2, got {version}",
    )


def test_every_stored_version_and_a_custom_aspect_are_accepted(stores: Stores) -> None:
    sync_aspects(stores.control, AspectConfig(), ["p"], ManualClock())

    prepared = _prepare(
        stores,
        CONFIGURED,
        {"aspect": "goal", "definition_version": 1},
        {"aspect": "goal", "definition_version": 2},
        {"aspect": "refund_reason", "definition_version": 1},
    )

    assert (prepared.errors, prepared.valid) == ([], 3)
