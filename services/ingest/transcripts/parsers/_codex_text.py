"""Text helpers of the Codex parser: injected context, tool output, runtime and history text."""

from __future__ import annotations

import json
import re
from typing import Any

from services.ingest.transcripts.parsers._common import block_text
from services.ingest.transcripts.tool_args import parse_arguments, tool_call_text

__all__ = ["Twins", "is_injected", "match_text", "render_history", "runtime_text", "tool_output"]

# Context Codex sends as user-role messages: never a person's prompt.
_INJECTED_TAGS = frozenset(
    {
        "environment_context",
        "user_instructions",
        "instructions",
        "recommended_plugins",
        "available_plugins",
        "plugins_instructions",
        "skills_instructions",
        "skill",
        "permissions instructions",
        "subagent_notification",
        "turn_aborted",
        "user_shell_command",
        "app-context",
        "apps_instructions",
        "collaboration_mode",
    }
)
_LEADING_TAG = re.compile(r"<([^<>/\n][^<>\n]{0,60})>")
_IMAGE_TAG = re.compile(r"</?image\b[^>]*>")
_EXIT_CODE = re.compile(r"^(?:Exit code:|Process exited with code) (-?\d+)\s*$")
_USAGE_FIELDS = ("input_tokens", "cached_input_tokens", "output_tokens", "reasoning_output_tokens")
_DETAIL_FIELDS = ("reason", "message", "exit_code", "success", "status", "query", "path")


def is_injected(text: str) -> bool:
    """Whether a user-role text is context Codex injected (environment context, AGENTS.md,
    instructions, plugin and skill lists, notifications, aborted-turn markers)."""
    stripped = text.lstrip()
    if stripped.startswith("# AGENTS.md instructions"):
        return True
    match = _LEADING_TAG.match(stripped)
    if not match:
        return False
    tag = match.group(1).strip().lower()
    first = tag.split(" ", 1)[0]
    if tag in _INJECTED_TAGS or first in _INJECTED_TAGS:
        return True
    return tag.endswith(" instructions") or first.endswith(("_instructions", "_context"))


def match_text(text: str) -> str:
    """The form in which a response_item message and its event_msg twin compare equal."""
    return _IMAGE_TAG.sub("", text).strip()


def tool_output(value: Any) -> tuple[str, int | None, dict[str, Any]]:
    """(text, exit code, extra payload) of a `function_call_output` / `custom_tool_call_output`
    `output`: plain text, `{content, success}`, content items, or the legacy JSON string
    `{"output": ..., "metadata": {"exit_code": ...}}`."""
    extra: dict[str, Any] = {}
    if isinstance(value, dict):
        content = value.get("content")
        text = content if isinstance(content, str) else block_text(content)
        if isinstance(value.get("success"), bool):
            extra["success"] = value["success"]
    elif isinstance(value, list):
        text = block_text(value)
    elif isinstance(value, str):
        text = value
    else:
        text = "" if value is None else json.dumps(value, ensure_ascii=False)
    exit_code: int | None = None
    if text.startswith("{"):
        try:
            legacy = json.loads(text)
        except ValueError:
            legacy = None
        if isinstance(legacy, dict) and isinstance(legacy.get("output"), str):
            metadata = legacy.get("metadata")
            if isinstance(metadata, dict):
                text = legacy["output"]
                code = metadata.get("exit_code")
                exit_code = code if isinstance(code, int) and not isinstance(code, bool) else None
    if exit_code is None:
        for header in text.splitlines()[:6]:
            match = _EXIT_CODE.match(header.strip())
            if match:
                exit_code = int(match.group(1))
                break
    return text, exit_code, extra


def runtime_text(kind: str, payload: dict[str, Any]) -> str:
    """A one-line description of a runtime event_msg: its type and its telling fields."""
    parts = [kind]
    if kind == "token_count":
        info = payload.get("info")
        usage = info.get("last_token_usage") if isinstance(info, dict) else None
        if isinstance(usage, dict):
            parts += [f"{name}={usage[name]}" for name in _USAGE_FIELDS if name in usage]
        return " ".join(parts)
    command = payload.get("command")
    if isinstance(command, list):
        parts.append(" ".join(str(part) for part in command))
    elif isinstance(command, str):
        parts.append(command)
    for name in _DETAIL_FIELDS:
        value = payload.get(name)
        if isinstance(value, str | int | float | bool) and value != "":
            parts.append(f"{name}={value}")
    return " ".join(parts)


def render_history(history: Any) -> str:
    """Readable text of a compaction's replacement history (one line or block per item)."""
    if not isinstance(history, list):
        return ""
    lines: list[str] = []
    for item in history:
        if not isinstance(item, dict):
            continue
        kind = str(item.get("type"))
        if kind == "message":
            lines.append(f"{item.get('role')}: {block_text(item.get('content'))}")
        elif kind == "reasoning":
            lines.append(block_text(item.get("summary")))
        elif kind in ("function_call", "custom_tool_call"):
            arguments = item.get("input", parse_arguments(item.get("arguments")))
            lines.append(tool_call_text(str(item.get("name")), arguments))
        elif kind.endswith("_call_output"):
            lines.append(tool_output(item.get("output"))[0])
        else:
            lines.append(kind)
    return "\n".join(line for line in lines if line)


class Twins:
    """Codex writes some content twice: as a `response_item` ("item") and as an `event_msg`
    ("event"). The first becomes the event; its twin from the other source is then taken once
    (one-to-one, so a prompt typed twice stays two events)."""

    def __init__(self) -> None:
        self._unmatched: dict[tuple[str, str], list[str]] = {}

    def take(self, kind: str, text: str, source: str) -> bool:
        """Whether the other source already brought this content (using that up)."""
        sources = self._unmatched.get((kind, match_text(text)), [])
        other = "event" if source == "item" else "item"
        if other in sources:
            sources.remove(other)
            return True
        return False

    def note(self, kind: str, text: str, source: str) -> None:
        self._unmatched.setdefault((kind, match_text(text)), []).append(source)

    def clear(self) -> None:
        self._unmatched.clear()
