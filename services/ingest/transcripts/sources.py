"""Transcript sources: where each harness writes its transcripts, and which ones are watched.

A source is a name (what `session.source` and the MCP `source` filter say), a harness (which
parser reads it) and a glob. The standard sources are those of docs/sessions.md, under the
home directory; `[sessions] sources` picks among them (`auto`: those whose directory exists),
and `[sessions] sources_file` adds custom ones or overrides a standard one by name:

    [[sources]]
    name = "codex-archive"
    harness = "codex"
    glob = "~/backups/codex/**/*.jsonl"
    enabled = true          # optional, default true
"""

from __future__ import annotations

import tomllib
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass
from pathlib import Path

from mcpd.runtime.config import SessionsSettings
from mcpd.runtime.errors import InvalidArgument

__all__ = [
    "STANDARD_SOURCES",
    "Source",
    "default_source_name",
    "load_sources_file",
    "resolve_sources",
    "standard_sources",
]

_GLOB_CHARS = frozenset("*?[")
_SOURCES_SETTING = "sessions.sources"
_FILE_SETTING = "sessions.sources_file"


@dataclass(frozen=True, slots=True)
class Source:
    """A named place transcripts of one harness are found. `glob` is absolute once resolved
    (`~` expanded); `**` matches any depth of directories, including none."""

    name: str
    harness: str
    glob: str
    enabled: bool = True

    @property
    def root(self) -> Path:
        """The directory the glob starts from: its longest prefix without wildcards."""
        return _split(self.glob)[0]

    def files(self) -> list[Path]:
        """Every regular file the glob matches now, sorted (an absent root matches nothing)."""
        root, pattern = _split(self.glob)
        if not pattern:
            return [root] if root.is_file() else []
        if not root.is_dir():
            return []
        return sorted(path for path in root.glob(pattern) if path.is_file())

    def expanded(self, home: Path, base: Path | None = None) -> Source:
        """This source with `~` in its glob expanded to `home`, relative globs made absolute
        against `base` (default: `home`)."""
        return Source(self.name, self.harness, _expand(self.glob, home, base or home), self.enabled)


def _expand(glob: str, home: Path, base: Path) -> str:
    if glob == "~" or glob.startswith("~/"):
        return str(home) + glob[1:]
    return glob if Path(glob).is_absolute() else str(base / glob)


def _split(glob: str) -> tuple[Path, str]:
    parts = Path(glob).parts
    for index, part in enumerate(parts):
        if _GLOB_CHARS.intersection(part):
            return Path(*parts[:index]), "/".join(parts[index:])
    return Path(glob), ""


# docs/sessions.md, "Where transcripts live"; the globs are relative to the home directory.
STANDARD_SOURCES: tuple[Source, ...] = (
    Source("codex", "codex", "~/.codex/sessions/**/*.jsonl"),
    Source("claude", "claude-code", "~/.claude/projects/**/*.jsonl"),
    Source(
        "claude-cowork",
        "claude-code",
        "~/Library/Application Support/Claude/local-agent-mode-sessions"
        "/**/.claude/projects/**/*.jsonl",
    ),
    Source("qwen-code", "qwen-code", "~/.qwen/projects/*/chats/*.jsonl"),
    Source("cursor", "cursor", "~/.cursor/projects/*/agent-transcripts/**/*.jsonl"),
    Source("kimi-cli", "kimi-cli", "~/.kimi/sessions/**/wire.jsonl"),
    Source("pi", "pi-coding-agent", "~/.pi/agent/sessions/**/*.jsonl"),
    Source("omp", "pi-coding-agent", "~/.omp/agent/sessions/**/*.jsonl"),
    Source("prime-agent", "prime-agent", "~/.prime/agent/sessions/**/*.jsonl"),
    # Prime Agent's RLM child transcripts (spec: the `prime-agent-subagents` source name).
    Source("prime-agent-subagents", "prime-agent", "~/.prime/agent/session-artifacts/**/*.jsonl"),
)


def standard_sources(home: Path) -> list[Source]:
    """The standard sources with their globs under `home`."""
    return [source.expanded(home) for source in STANDARD_SOURCES]


def default_source_name(harness: str) -> str:
    """The source name a one-off import of `harness` files uses: the first standard source of
    that harness (so ids match what tailing the standard location gives), else the harness."""
    return next((s.name for s in STANDARD_SOURCES if s.harness == harness), harness)


def resolve_sources(
    settings: SessionsSettings, *, home: Path, harnesses: Collection[str]
) -> list[Source]:
    """The enabled sources `settings` describe, standard ones first, each harness checked
    against `harnesses` (those with a parser).

    Raises InvalidArgument naming `sessions.sources` for an unknown standard source name and
    `sessions.sources_file` for an unreadable or malformed sources file.
    """
    if not settings.enabled:
        return []
    standard = {source.name: source for source in standard_sources(home)}
    names = [n.strip() for n in settings.sources.split(",")] if settings.sources.strip() else []
    if names == ["auto"]:
        chosen = [s for s in standard.values() if s.root.is_dir()]
    else:
        unknown = [name for name in names if name not in standard]
        if unknown:
            raise InvalidArgument(
                f"unknown standard transcript source {unknown[0]!r} in {_SOURCES_SETTING}; "
                f"choose from auto, {', '.join(standard)} (custom sources go in "
                f"{_FILE_SETTING})",
                field=_SOURCES_SETTING,
            )
        chosen = [standard[name] for name in dict.fromkeys(names)]
    custom = (
        load_sources_file(settings.sources_file, home=home)
        if settings.sources_file is not None
        else []
    )
    overridden = {source.name for source in custom}
    resolved = [s for s in chosen if s.name not in overridden] + custom
    _check_harnesses(resolved, harnesses)
    return [source for source in resolved if source.enabled]


def _check_harnesses(sources: Iterable[Source], harnesses: Collection[str]) -> None:
    for source in sources:
        if source.harness not in harnesses:
            raise InvalidArgument(
                f"transcript source {source.name!r} names harness {source.harness!r}, which has "
                f"no parser; choose from {', '.join(sorted(harnesses))}",
                field=_FILE_SETTING,
            )


def load_sources_file(path: Path, *, home: Path) -> list[Source]:
    """The custom sources of a TOML file (`[[sources]]` tables), in file order. Relative globs
    are relative to the file's directory; `~` is `home`."""

    def bad(message: str) -> InvalidArgument:
        return InvalidArgument(f"sources file {path}: {message}", field=_FILE_SETTING)

    try:
        with path.open("rb") as handle:
            document = tomllib.load(handle)
    except FileNotFoundError:
        raise bad("does not exist") from None
    except tomllib.TOMLDecodeError as exc:
        raise bad(f"not valid TOML: {exc}") from exc
    except OSError as exc:
        raise bad(f"cannot be read: {exc.strerror}") from exc
    if set(document) - {"sources"}:
        raise bad(f"unknown keys {sorted(set(document) - {'sources'})}; expected [[sources]]")
    entries = document.get("sources", [])
    if not isinstance(entries, list):
        raise bad("`sources` must be an array of tables ([[sources]])")
    found: list[Source] = []
    for index, entry in enumerate(entries, start=1):
        source = _source_entry(entry, f"source #{index}", bad)
        if any(s.name == source.name for s in found):
            raise bad(f"source name {source.name!r} appears twice")
        found.append(source.expanded(home, path.parent))
    return found


def _source_entry(entry: object, where: str, bad: Callable[[str], InvalidArgument]) -> Source:
    if not isinstance(entry, dict):
        raise bad(f"{where} must be a table")
    unknown = set(entry) - {"name", "harness", "glob", "enabled"}
    if unknown:
        raise bad(f"{where} has unknown keys {sorted(unknown)}")
    values: dict[str, str] = {}
    for key in ("name", "harness", "glob"):
        value = entry.get(key)
        if not isinstance(value, str) or not value.strip():
            raise bad(f"{where} needs a non-empty string `{key}`")
        values[key] = value.strip()
    enabled = entry.get("enabled", True)
    if not isinstance(enabled, bool):
        raise bad(f"{where}: `enabled` must be true or false")
    return Source(values["name"], values["harness"], values["glob"], enabled)
