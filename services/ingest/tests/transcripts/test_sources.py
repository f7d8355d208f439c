"""The source registry: standard locations under the home directory, `[sessions] sources`
selection, custom sources from the sources file, glob expansion."""

from __future__ import annotations

from pathlib import Path

import pytest

from mcpd.runtime.config import SessionsSettings
from mcpd.runtime.errors import InvalidArgument
from services.ingest.transcripts.registry import harnesses
from services.ingest.transcripts.sources import (
    STANDARD_SOURCES,
    Source,
    default_source_name,
    load_sources_file,
    resolve_sources,
    standard_sources,
)

HARNESSES = harnesses()


def _touch(path: Path, text: str = "{}\n") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def _resolve(home: Path, **settings: object) -> list[Source]:
    return resolve_sources(SessionsSettings(**settings), home=home, harnesses=HARNESSES)  # type: ignore[arg-type]


def test_standard_sources_are_those_of_sessions_md() -> None:
    assert [(s.name, s.harness) for s in STANDARD_SOURCES] == [
        ("codex", "codex"),
        ("claude", "claude-code"),
        ("claude-cowork", "claude-code"),
        ("qwen-code", "qwen-code"),
        ("cursor", "cursor"),
        ("kimi-cli", "kimi-cli"),
        ("pi", "pi-coding-agent"),
        ("omp", "pi-coding-agent"),
        ("prime-agent", "prime-agent"),
        ("prime-agent-subagents", "prime-agent"),
    ]
    assert {s.harness for s in STANDARD_SOURCES} <= set(HARNESSES)


def test_standard_globs_live_under_the_given_home(tmp_path: Path) -> None:
    by_name = {s.name: s for s in standard_sources(tmp_path)}
    assert by_name["codex"].glob == f"{tmp_path}/.codex/sessions/**/*.jsonl"
    assert by_name["codex"].root == tmp_path / ".codex/sessions"
    assert by_name["claude-cowork"].root == (
        tmp_path / "Library/Application Support/Claude/local-agent-mode-sessions"
    )
    assert by_name["qwen-code"].root == tmp_path / ".qwen/projects"


def test_globs_match_files_at_any_depth_in_the_standard_layouts(tmp_path: Path) -> None:
    codex = _touch(tmp_path / ".codex/sessions/2026/02/15/rollout-2026-02-15T03-50-40-abc.jsonl")
    claude = _touch(tmp_path / ".claude/projects/-repo/0b1c.jsonl")
    subagent = _touch(tmp_path / ".claude/projects/-repo/0b1c/subagents/agent-1.jsonl")
    qwen = _touch(tmp_path / ".qwen/projects/-repo/chats/chat.jsonl")
    _touch(tmp_path / ".qwen/projects/-repo/other/not-a-chat.jsonl")
    kimi = _touch(tmp_path / ".kimi/sessions/abc/def/wire.jsonl")
    _touch(tmp_path / ".kimi/sessions/abc/def/context.jsonl")
    cowork = _touch(
        tmp_path / "Library/Application Support/Claude/local-agent-mode-sessions/s1/x"
        "/.claude/projects/-p/a.jsonl"
    )
    (tmp_path / ".codex/sessions/2026/dir.jsonl").mkdir()  # directories never match
    by_name = {s.name: s for s in standard_sources(tmp_path)}
    assert by_name["codex"].files() == [codex]
    assert by_name["claude"].files() == sorted([claude, subagent])
    assert by_name["qwen-code"].files() == [qwen]
    assert by_name["kimi-cli"].files() == [kimi]
    assert by_name["claude-cowork"].files() == [cowork]
    assert by_name["cursor"].files() == []  # no such directory


def test_auto_enables_the_standard_sources_whose_directory_exists(tmp_path: Path) -> None:
    (tmp_path / ".codex/sessions").mkdir(parents=True)
    (tmp_path / ".pi/agent/sessions").mkdir(parents=True)
    assert [s.name for s in _resolve(tmp_path)] == ["codex", "pi"]


def test_named_sources_are_enabled_even_before_their_directory_exists(tmp_path: Path) -> None:
    sources = _resolve(tmp_path, sources="omp, codex,omp")
    assert [s.name for s in sources] == ["omp", "codex"]
    assert _resolve(tmp_path, sources="") == []
    assert _resolve(tmp_path, sources="codex", enabled=False) == []


def test_an_unknown_standard_source_is_refused_with_the_valid_names(tmp_path: Path) -> None:
    with pytest.raises(InvalidArgument) as caught:
        _resolve(tmp_path, sources="codex,windsurf")
    assert caught.value.field == "sessions.sources"
    assert "'windsurf'" in caught.value.message
    assert "claude-cowork" in caught.value.message


def test_custom_sources_add_override_and_disable(tmp_path: Path) -> None:
    (tmp_path / ".codex/sessions").mkdir(parents=True)
    (tmp_path / ".claude/projects").mkdir(parents=True)
    file = _touch(
        tmp_path / "conf/sources.toml",
        "[[sources]]\n"
        'name = "archive"\nharness = "codex"\nglob = "archive/**/*.jsonl"\n'
        "[[sources]]\n"
        'name = "claude"\nharness = "claude-code"\nglob = "~/elsewhere/*.jsonl"\n'
        "[[sources]]\n"
        'name = "codex"\nharness = "codex"\nglob = "~/.codex/sessions/**/*.jsonl"\n'
        "enabled = false\n",
    )
    sources = _resolve(tmp_path, sources_file=file)
    assert sources == [
        Source("archive", "codex", f"{tmp_path}/conf/archive/**/*.jsonl"),
        Source("claude", "claude-code", f"{tmp_path}/elsewhere/*.jsonl"),
    ]
    # Custom sources apply whatever `sources` selects among the standard ones.
    assert [s.name for s in _resolve(tmp_path, sources="", sources_file=file)] == [
        "archive",
        "claude",
    ]


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("[[sources]]\nname = 'x'\nharness = 'codex'\n", "`glob`"),
        ("[[sources]]\nname = ' '\nharness = 'codex'\nglob = '*'\n", "`name`"),
        ("[[sources]]\nname = 'x'\nharness = 'codex'\nglob = '*'\nenabled = 'yes'\n", "enabled"),
        ("[[sources]]\nname = 'x'\nharness = 'codex'\nglob = '*'\nwatch = 1\n", "unknown keys"),
        ("[[sources]]\nname='x'\nharness='codex'\nglob='*'\n" * 2, "appears twice"),
        ("sources = 3\n", "array of tables"),
        ("[other]\n", "unknown keys"),
        ("not toml ===", "not valid TOML"),
    ],
)
def test_malformed_sources_files_are_refused(tmp_path: Path, text: str, problem: str) -> None:
    file = _touch(tmp_path / "sources.toml", text)
    with pytest.raises(InvalidArgument) as caught:
        load_sources_file(file, home=tmp_path)
    assert caught.value.field == "sessions.sources_file"
    assert problem in caught.value.message
    assert str(file) in caught.value.message


def test_a_missing_sources_file_and_an_unknown_harness_are_refused(tmp_path: Path) -> None:
    with pytest.raises(InvalidArgument, match="does not exist"):
        _resolve(tmp_path, sources_file=tmp_path / "absent.toml")
    file = _touch(tmp_path / "s.toml", "[[sources]]\nname='w'\nharness='windsurf'\nglob='*'\n")
    with pytest.raises(InvalidArgument, match="'windsurf', which has no parser") as caught:
        _resolve(tmp_path, sources="", sources_file=file)
    assert "codex" in caught.value.message


def test_a_glob_without_wildcards_names_one_file(tmp_path: Path) -> None:
    path = _touch(tmp_path / "one.jsonl")
    assert Source("one", "codex", str(path)).files() == [path]
    assert Source("one", "codex", str(tmp_path / "absent.jsonl")).files() == []


def test_one_off_imports_default_to_the_standard_source_of_the_harness() -> None:
    assert default_source_name("codex") == "codex"
    assert default_source_name("claude-code") == "claude"
    assert default_source_name("pi-coding-agent") == "pi"
    assert default_source_name("hermes") == "hermes"
