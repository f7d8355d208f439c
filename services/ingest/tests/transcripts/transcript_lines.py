"""Helpers for parser tests: JSONL lines from dicts, and the fixture transcripts."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from mcpd.sessions.model import ParsedSession

FIXTURES = Path(__file__).resolve().parents[4] / "tests" / "fixtures" / "transcripts"


def jsonl(*records: dict[str, Any]) -> list[str]:
    """One JSON line per record (no trailing newline, as a parser receives them)."""
    return [json.dumps(record) for record in records]


def fixture_lines(relative: str) -> list[str]:
    return (FIXTURES / relative).read_text(encoding="utf-8").splitlines()


def summary(parsed: ParsedSession) -> list[tuple[str, str, str]]:
    """(type, key, text) of every event, in order."""
    return [(event.type.value, event.key, event.text) for event in parsed.events]
