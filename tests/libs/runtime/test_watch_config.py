"""`[[monitors]]`: every key read, defaults filled, and each mistake named as monitors[i].key
with the webhook URL kept out of the message."""

from __future__ import annotations

from typing import Any

import pytest

from mcpd.runtime.errors import InvalidArgument
from mcpd.runtime.watch_config import MonitorSettings, SloSettings, parse_monitors, parse_slos

BASE = {
    "id": "errors",
    "name": "Failing",
    "watch": "error_rate",
    "compare": "above",
    "threshold": 0.2,
    "window_seconds": 900,
}


def test_every_key_is_read_and_defaults_filled() -> None:
    full = {
        **BASE,
        "id": "quality",
        "project": "support",
        "watch": "score_mean",
        "compare": "below",
        "threshold": 1,
        "min_samples": 20,
        "scorer_id": "contains",
        "webhook": "https://hooks.example.com/T0/B0/secret",
        "enabled": False,
    }
    assert parse_monitors([BASE, full], "mcpd.toml", default_project="default") == (
        MonitorSettings("errors", "Failing", "default", "error_rate", "above", 0.2, 900),
        MonitorSettings(
            "quality",
            "Failing",
            "support",
            "score_mean",
            "below",
            1.0,
            900,
            min_samples=20,
            scorer_id="contains",
            webhook="https://hooks.example.com/T0/B0/secret",
            enabled=False,
        ),
    )


def test_the_run_watches_are_read_and_divergence_has_its_bound_by_default() -> None:
    divergence = {"id": "shape", "name": "Shape", "watch": "step_count_divergence"}
    repetition = {**BASE, "id": "loops", "watch": "run_repetition", "threshold": 2}
    assert parse_monitors(
        [{**divergence, "window_seconds": 60}, repetition], "f", default_project="d"
    ) == (
        MonitorSettings("shape", "Shape", "d", "step_count_divergence", "above", 3.5, 60),
        MonitorSettings("loops", "Failing", "d", "run_repetition", "above", 2.0, 900),
    )
    bounded = {**divergence, "window_seconds": 60, "compare": "above", "threshold": 5}
    assert parse_monitors([bounded], "f", default_project="d")[0].threshold == 5.0
    with pytest.raises(InvalidArgument, match="above its bound only") as below:
        parse_monitors([{**bounded, "compare": "below"}], "f", default_project="d")
    assert below.value.field == "monitors[0].compare"
    without = {key: value for key, value in repetition.items() if key != "compare"}
    with pytest.raises(InvalidArgument, match="is required") as missing:
        parse_monitors([without], "f", default_project="d")
    assert missing.value.field == "monitors[0].compare"


@pytest.mark.parametrize(
    ("changes", "field", "words"),
    [
        ({"colour": "red"}, "monitors[0].colour", "unknown setting"),
        ({"watch": "errors"}, "monitors[0].watch", "expected one of error_rate"),
        ({"compare": "over"}, "monitors[0].compare", "expected one of above, below"),
        ({"threshold": "high"}, "monitors[0].threshold", "finite number"),
        ({"threshold": float("nan")}, "monitors[0].threshold", "finite number"),
        ({"window_seconds": 0}, "monitors[0].window_seconds", "at least 1"),
        ({"min_samples": -1}, "monitors[0].min_samples", "at least 0"),
        ({"enabled": "yes"}, "monitors[0].enabled", "true or false"),
        ({"id": "Bad Id"}, "monitors[0].id", "must match"),
        ({"scorer_id": "contains"}, "monitors[0].scorer_id", "score_mean"),
        ({"watch": "score_mean"}, "monitors[0].scorer_id", "score_mean"),
        ({"webhook": "ftp://user:pw@example.com/x"}, "monitors[0].webhook", "http or https"),
    ],
)
def test_a_mistake_names_its_key(changes: dict[str, Any], field: str, words: str) -> None:
    with pytest.raises(InvalidArgument, match=words) as refused:
        parse_monitors([{**BASE, **changes}], "mcpd.toml", default_project="default")
    assert refused.value.field == field
    assert "pw@" not in refused.value.message


def test_a_missing_key_an_id_used_twice_and_a_table_that_is_not_an_array() -> None:
    without = {key: value for key, value in BASE.items() if key != "threshold"}
    with pytest.raises(InvalidArgument) as missing:
        parse_monitors([without], "f", default_project="d")
    assert (missing.value.field, "is required" in missing.value.message) == (
        "monitors[0].threshold",
        True,
    )
    with pytest.raises(InvalidArgument) as twice:
        parse_monitors([BASE, BASE], "f", default_project="d")
    assert twice.value.field == "monitors[1].id"
    with pytest.raises(InvalidArgument) as table:
        parse_monitors(BASE, "f", default_project="d")
    assert table.value.field == "monitors"


SLO = {"id": "answers", "name": "Answers", "objective": 0.995, "window_days": 30}


def test_an_objective_is_read_with_its_defaults() -> None:
    full = {**SLO, "id": "strict", "project": "p", "min_samples": 50, "enabled": False}
    assert parse_slos([SLO, full], "f", default_project="default") == (
        SloSettings("answers", "Answers", "default", 0.995, 30),
        SloSettings("strict", "Answers", "p", 0.995, 30, min_samples=50, enabled=False),
    )


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"objective": 1.0}, "slos[0].objective"),
        ({"objective": 0}, "slos[0].objective"),
        ({"window_days": 0}, "slos[0].window_days"),
        ({"threshold": 1}, "slos[0].threshold"),
        ({"webhook": "mailto:a@b"}, "slos[0].webhook"),
    ],
)
def test_an_objective_mistake_names_its_key(changes: dict[str, Any], field: str) -> None:
    with pytest.raises(InvalidArgument) as refused:
        parse_slos([{**SLO, **changes}], "f", default_project="d")
    assert refused.value.field == field
