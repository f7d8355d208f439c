"""Project policies: from the projects file to the control store to what ingest applies."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from cli.projects import apply_projects, load_projects_file
from mcpd.pricing import load_price_book
from mcpd.runtime.clock import ManualClock
from mcpd.runtime.errors import InvalidArgument
from mcpd.storage import Stores, open_stores
from mcpd.testing.templates import SqliteTemplates
from services.ingest.policies import ProjectPolicies

PROJECTS = """
[[projects]]
id = "shop"
name = "Shop"
retention_days = 30
sampling = { kind = "tail", rate = 0.1, slow_ms = 60000, settle_s = 1, max_wait_s = 30 }
redaction = { rules = [
  { name = "card", pattern = '\\b\\d{16}\\b', mode = "partial", keep_prefix = 2, keep_suffix = 3 },
] }

[projects.prices."gpt-4o"]
input = 1.0
output = 4.0
"""


@pytest.fixture
def stores(tmp_path: Path, sqlite_templates: SqliteTemplates) -> Iterator[Stores]:
    data_dir = sqlite_templates.data_dir(tmp_path)
    with open_stores("sqlite", data_dir=data_dir, postgres_url=None, clickhouse_url=None) as opened:
        yield opened


def _policies(stores: Stores, clock: ManualClock) -> ProjectPolicies:
    return ProjectPolicies(
        stores.control, key=b"k" * 32, book=load_price_book(), monotonic=clock.monotonic, ttl_s=5
    )


def test_whole_numbers_survive_the_control_store_and_policies_apply(
    stores: Stores, tmp_path: Path
) -> None:
    path = tmp_path / "projects.toml"
    path.write_text(PROJECTS)
    apply_projects(stores.control, load_projects_file(path))

    policy = _policies(stores, ManualClock()).get("shop")

    assert policy.sampling.is_tail
    assert policy.sampling.to_json()["slow_ms"] == 60000
    assert policy.redactor.redact_text("card 4111111111111111 ok") == "card 41***********111 ok"
    assert policy.prices.id == "mcpd-2026-11+shop"
    row: dict[str, object] = {
        "model": "gpt-4o",
        "provider": "openai",
        "input_tokens": 1_000_000,
        "output_tokens": 1_000_000,
        "usage_details": None,
        "total_cost": None,
        "cost_is_estimated": None,
    }
    policy.price(row)
    assert row["total_cost"] == pytest.approx(5.0)
    assert row["cost_price_book"] == "mcpd-2026-11+shop"


def test_an_unconfigured_project_gets_the_server_defaults(stores: Stores) -> None:
    policy = _policies(stores, ManualClock()).get("elsewhere")

    assert not policy.sampling.is_tail
    assert policy.sampling.decide("4bf92f3577b34da6a3ce929d0e0e4736") is True
    assert policy.prices.id == "mcpd-2026-11"
    assert "[REDACTED:" in policy.redactor.redact_text("token ghp_" + "a" * 36)


def test_a_policy_change_is_seen_once_the_cache_expires(stores: Stores, tmp_path: Path) -> None:
    clock = ManualClock()
    policies = _policies(stores, clock)
    assert not policies.get("shop").sampling.is_tail
    path = tmp_path / "projects.toml"
    path.write_text(PROJECTS)
    apply_projects(stores.control, load_projects_file(path))

    cached = policies.get("shop")
    clock.advance(5.1)
    fresh = policies.get("shop")

    assert not cached.sampling.is_tail
    assert fresh.sampling.is_tail


@pytest.mark.parametrize(
    ("text", "names"),
    [
        ('[[projects]]\nid = "a"\nsampling = { kind = "ratio" }\n', "sampling.rate"),
        (
            '[[projects]]\nid = "a"\nredaction = { rules = [{ name = "x", mode = "zap" }] }\n',
            "mode",
        ),
        ('[[projects]]\nid = "a"\n[projects.prices."gpt-4o"]\ninput = -1\n', "prices"),
        ('[[projects]]\nname = "no id"\n', "projects[0].id"),
        ('[[projects]]\nid = "a"\nsurprise = 1\n', "surprise"),
        ("projects = 3\n", "array of tables"),
        ("[[projects]\n", "not valid TOML"),
    ],
)
def test_a_bad_projects_file_names_what_is_wrong(tmp_path: Path, text: str, names: str) -> None:
    path = tmp_path / "projects.toml"
    path.write_text(text)

    with pytest.raises(InvalidArgument) as raised:
        load_projects_file(path)

    assert raised.value.field == "ingest.projects_file"
    assert names in str(raised.value)
