"""The built-ins, and `intelligence.aspects_file`: what it defines, and every mistake refused
naming the entry and key."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from mcpd.aspects import (
    BUILT_INS,
    MAX_INSTRUCTION_BYTES,
    SETTING,
    AspectConfig,
    AspectDefinition,
    load_aspects_file,
)
from mcpd.aspects.definitions import NAME
from mcpd.runtime.config import BUILT_IN_ASPECTS, load_settings
from mcpd.runtime.errors import InvalidArgument

CUSTOM = """
[[aspects]]
name = "refund_reason"
label = "Refund reason"
description = "Why the user asked for their money back"
"""


def _load(
    tmp_path: Path, text: str, max_aspects: int = 16
) -> dict[str, tuple[AspectDefinition, ...]]:
    path = tmp_path / "aspects.toml"
    path.write_text(text)
    return load_aspects_file(path, default_project="local", max_aspects=max_aspects)


def test_the_built_ins_keep_the_rules_every_aspect_keeps() -> None:
    assert [definition.name for definition in BUILT_INS] == [
        "goal",
        "sentiment",
        "behaviour",
        "outcome",
    ]
    assert len(BUILT_INS) == BUILT_IN_ASPECTS  # what `intelligence.max_aspects` is checked against
    for definition in BUILT_INS:
        assert NAME.fullmatch(definition.name)
        assert (definition.instruction is None) == definition.derived
        assert len((definition.instruction or "").encode()) < MAX_INSTRUCTION_BYTES
    assert sorted(BUILT_INS, key=lambda definition: definition.sort_order) == list(BUILT_INS)


def test_a_file_defines_custom_aspects_and_changes_built_ins(tmp_path: Path) -> None:
    defined = _load(
        tmp_path,
        CUSTOM
        + """
[[aspects]]
project = "support"
name = "sentiment"
enabled = false
sort_order = 5

[[aspects]]
project = "support"
name = "refund_reason"
label = "Refund"
description = "Why"
instruction = "Write one plain sentence saying why the user wanted a refund."
enabled = false
sort_order = 15
""",
    )

    sentiment = BUILT_INS[1]
    assert defined == {
        "local": (
            AspectDefinition(
                name="refund_reason",
                label="Refund reason",
                description="Why the user asked for their money back",
                instruction=None,
                enabled=True,
                sort_order=100,
            ),
        ),
        "support": (
            replace(sentiment, enabled=False, sort_order=5),
            AspectDefinition(
                name="refund_reason",
                label="Refund",
                description="Why",
                instruction="Write one plain sentence saying why the user wanted a refund.",
                enabled=False,
                sort_order=15,
            ),
        ),
    }
    wanted = AspectConfig(defined).wanted("support")
    assert list(wanted) == ["goal", "sentiment", "behaviour", "outcome", "refund_reason"]
    assert wanted["sentiment"] == replace(sentiment, enabled=False, sort_order=5)


def test_an_instruction_may_take_all_of_its_bytes(tmp_path: Path) -> None:
    # Counted in UTF-8 bytes, not characters: 1000 two-byte characters fit exactly.
    defined = _load(tmp_path, CUSTOM + f'instruction = "{"é" * (MAX_INSTRUCTION_BYTES // 2)}"\n')
    (custom,) = defined["local"]
    assert custom.instruction is not None
    assert len(custom.instruction.encode()) == MAX_INSTRUCTION_BYTES


def test_settings_without_a_file_define_nothing(tmp_path: Path) -> None:
    assert AspectConfig.from_settings(load_settings(env={"HOME": str(tmp_path)})) == AspectConfig()


def test_settings_read_the_file_for_the_local_project(tmp_path: Path) -> None:
    path = tmp_path / "aspects.toml"
    path.write_text(CUSTOM)
    settings = load_settings(
        env={
            "HOME": str(tmp_path),
            "MCPD_INTELLIGENCE_ASPECTS_FILE": str(path),
            "MCPD_SECURITY_LOCAL_PROJECT": "lab",
        }
    )

    config = AspectConfig.from_settings(settings)

    assert config.projects() == ["lab"]
    assert "refund_reason" in config.wanted("lab")
    assert "refund_reason" not in config.wanted("other")


@pytest.mark.parametrize(
    ("text", "field", "problem"),
    [
        (CUSTOM.replace("refund_reason", "Refund"), "aspects[0].name", "lowercase letters"),
        (CUSTOM.replace("refund_reason", "9lives"), "aspects[0].name", "starting with a letter"),
        (CUSTOM.replace("refund_reason", "r" * 65), "aspects[0].name", "at most 64 characters"),
        ('[[aspects]]\nlabel = "L"\n', "aspects[0].name", "is required"),
        (CUSTOM.replace('label = "Refund reason"\n', ""), "aspects[0].label", "custom aspect"),
        (CUSTOM.replace("description = ", "# "), "aspects[0].description", "custom aspect"),
        (CUSTOM + 'label2 = "x"\n', "aspects[0].label2", "unknown setting"),
        (CUSTOM + f'instruction = "{"é" * 1001}"\n', "aspects[0].instruction", "2000 bytes"),
        (CUSTOM + 'instruction = "  "\n', "aspects[0].instruction", "non-empty string"),
        (CUSTOM + "derived = true\n", "aspects[0].derived", "cannot be derived"),
        ('[[aspects]]\nname = "outcome"\nderived = false\n', "aspects[0].derived", "derived"),
        ('[[aspects]]\nname = "goal"\nderived = true\n', "aspects[0].derived", "not derived"),
        ('[[aspects]]\nname = "outcome"\ninstruction = "x"\n', "aspects[0].instruction", "no"),
        (CUSTOM + "enabled = 1\n", "aspects[0].enabled", "true or false"),
        (CUSTOM + "sort_order = -1\n", "aspects[0].sort_order", "from 0 to 4294967295"),
        (CUSTOM + "sort_order = 4294967296\n", "aspects[0].sort_order", "from 0 to"),
        (CUSTOM + 'sort_order = "first"\n', "aspects[0].sort_order", "whole number"),
        (CUSTOM + 'project = ""\n', "aspects[0].project", "non-empty string"),
        (CUSTOM + CUSTOM, "aspects[1].name", "defined twice"),
        ('aspects = "goal"\n', "aspects", "array of tables"),
        ('colour = "blue"\n', "colour", "unknown setting"),
        ("[[aspects]\n", SETTING, "not valid TOML"),
    ],
)
def test_a_mistake_is_refused_naming_its_entry_and_key(
    tmp_path: Path, text: str, field: str, problem: str
) -> None:
    with pytest.raises(InvalidArgument) as raised:
        _load(tmp_path, text)
    assert raised.value.field == field
    assert problem in raised.value.message
    assert raised.value.message.startswith(SETTING)


def test_a_project_may_not_define_more_than_max_aspects(tmp_path: Path) -> None:
    two = CUSTOM + CUSTOM.replace("refund_reason", "churn_reason")
    assert len(_load(tmp_path, two, max_aspects=6)["local"]) == 2
    # Changes to built-ins do not count twice; the same names in another project are its own.
    _load(tmp_path, two + '[[aspects]]\nname = "goal"\nenabled = false\n', max_aspects=6)
    _load(tmp_path, two + CUSTOM + 'project = "other"\n', max_aspects=6)

    with pytest.raises(InvalidArgument) as raised:
        _load(tmp_path, two, max_aspects=5)

    assert raised.value.field == "aspects[1].name"
    assert "more than intelligence.max_aspects (5) aspects, the 4 built-ins included" in (
        raised.value.message
    )


def test_an_unreadable_file_names_the_setting(tmp_path: Path) -> None:
    with pytest.raises(InvalidArgument) as raised:
        load_aspects_file(tmp_path / "missing.toml", default_project="local", max_aspects=16)
    assert raised.value.field == SETTING
    assert "cannot read" in raised.value.message
