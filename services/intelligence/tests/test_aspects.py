"""The aspect catalogue the intelligence service answers with: every aspect of the project in
sort_order, disabled ones included, and the deployment's limits."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import pytest
from google.protobuf import json_format

from mcpd.aspects import BUILT_INS, AspectCatalogues, AspectConfig
from mcpd.runtime.clock import ManualClock
from mcpd.runtime.config import IntelligenceSettings
from mcpd.storage import Stores, open_stores
from mcpd.testing.templates import SqliteTemplates
from services.intelligence.aspects import catalogue, enabled_aspects

T0 = datetime(2026, 12, 1, tzinfo=UTC)


@pytest.fixture
def stores(tmp_path: Path, sqlite_templates: SqliteTemplates) -> Iterator[Stores]:
    data_dir = sqlite_templates.data_dir(tmp_path)
    with open_stores(
        "sqlite", data_dir=data_dir, postgres_url=None, clickhouse_url=None, stores=("control",)
    ) as opened:
        yield opened


def test_a_projects_first_catalogue_is_the_seeded_built_ins_with_the_limits(
    stores: Stores,
) -> None:
    catalogues = AspectCatalogues(stores.control, AspectConfig(), ManualClock(T0), ttl_s=5.0)
    settings = IntelligenceSettings(pass_armed=False, max_aspects=8, page_size=100)

    answer = json_format.MessageToDict(catalogue(catalogues, "p", settings))

    assert answer["limits"] == {
        "minNotesToCluster": "50",
        "maxNotesPerPass": "20000",
        "pageSize": 100,
        "maxAspects": 8,
    }  # pass_armed false: the proto3 default, left out
    goal, sentiment, behaviour, outcome = answer["aspects"]
    assert goal == {
        "project": "p",
        "name": "goal",
        "label": "Goal",
        "description": "What the user wanted",
        "instruction": BUILT_INS[0].instruction,
        "builtIn": True,
        "enabled": True,
        "sortOrder": 10,
        "version": 1,
        "createdAt": "2026-12-01T00:00:00Z",
    }
    assert [sentiment["name"], behaviour["name"]] == ["sentiment", "behaviour"]
    assert (outcome["name"], outcome["derived"], "instruction" in outcome) == (
        "outcome",
        True,
        False,
    )


def test_a_switched_off_aspect_stays_in_the_catalogue_in_its_place(stores: Stores) -> None:
    config = AspectConfig({"p": (replace(BUILT_INS[1], enabled=False),)})
    catalogues = AspectCatalogues(stores.control, config, ManualClock(T0), ttl_s=5.0)

    answer = catalogue(catalogues, "p", IntelligenceSettings())

    assert [(aspect.name, aspect.enabled) for aspect in answer.aspects] == [
        ("goal", True),
        ("sentiment", False),
        ("behaviour", True),
        ("outcome", True),
    ]
    assert answer.limits.pass_armed
    assert enabled_aspects(catalogues, "p") == ["goal", "behaviour", "outcome"]
