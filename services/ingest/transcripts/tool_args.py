"""What a tool call's arguments say: readable text, mcpd's own tools, a working directory, and
the file paths it names (file_attention).

Path extraction is deliberately conservative: top-level path arguments, patch headers, and the
operands of a few common file commands in simple shell text. No URLs, globs, prose, variables
or directories; a shell line that does not tokenize contributes nothing.
"""

from __future__ import annotations

import json
import posixpath
import re
from typing import Any

from services.ingest.transcripts.shell_paths import shell_paths

__all__ = [
    "file_paths",
    "parse_arguments",
    "self_tool_name",
    "tool_call_text",
    "workdir",
]

# mcpd's MCP tools (spec: search_sessions, open, list_sessions, file_attention).
_SELF_TOOLS = frozenset({"search_sessions", "list_sessions", "file_attention"})
_SELF_SERVERS = ("mcpd", "moraine")
_ID_PREFIXES = ("session:", "turn:", "event:")

_PATH_KEYS = ("file_path", "path", "notebook_path", "filePath", "target_file")
_LIST_KEYS = ("paths",)
# Tools whose `path` names a directory to list or search, not a file.
_DIRECTORY_TOOLS = frozenset({"glob", "ls", "list", "list_dir", "list_directory"})
_MUTATING_TOOLS = frozenset(
    {
        "edit",
        "multiedit",
        "write",
        "notebookedit",
        "apply_patch",
        "write_file",
        "edit_file",
        "create_file",
        "delete_file",
        "replace",
        "search_replace",
        "str_replace",
        "str_replace_editor",
        "str_replace_based_edit_tool",
    }
)
_SHELL_TOOLS = frozenset(
    {
        "bash",
        "shell",
        "shell_command",
        "exec_command",
        "local_shell",
        "run_shell_command",
        "run_terminal_cmd",
        "terminal",
        "execute_command",
    }
)
_PATCH_HEADER = re.compile(
    r"^\*\*\* (?:Update|Add|Delete) File: (.+?)\s*$|^\*\*\* Move to: (.+?)\s*$"
)


def base_tool_name(name: str) -> tuple[str | None, str]:
    """(server, tool) of a provider-qualified MCP tool name (`mcp__server__tool`,
    `server__tool`, `server.tool`, `server/tool`), or (None, name)."""
    if name.startswith("mcp__"):
        server, sep, tool = name[5:].partition("__")
        if sep and tool:
            return server, tool
    for separator in ("__", "/", "."):
        server, sep, tool = name.rpartition(separator)
        if sep and server and tool:
            return server, tool
    return None, name


def self_tool_name(name: str, arguments: Any) -> str | None:
    """The canonical mcpd tool name when this call is one of mcpd's (or Moraine's) own
    retrieval tools, else None. A bare or foreign `open` counts only with mcpd-shaped
    arguments (an mcpd id or a cursor)."""
    server, tool = base_tool_name(name)
    if tool in _SELF_TOOLS:
        return tool
    if tool != "open":
        return None
    if server is not None and any(own in server.lower() for own in _SELF_SERVERS):
        return tool
    if isinstance(arguments, dict) and arguments and set(arguments) <= {"id", "limit", "cursor"}:
        ident = arguments.get("id")
        if isinstance(ident, str) and ident.startswith(_ID_PREFIXES):
            return tool
        if "cursor" in arguments and "id" not in arguments:
            return tool
    return None


def parse_arguments(raw: Any) -> Any:
    """A JSON-encoded arguments string decoded to its object or array; anything else (an
    unparseable or free-form string, an already-decoded value) unchanged."""
    if isinstance(raw, str):
        try:
            value = json.loads(raw)
        except ValueError:
            return raw
        if isinstance(value, dict | list):
            return value
    return raw


def tool_call_text(name: str, arguments: Any) -> str:
    """`name(key="value", n=1)` for object arguments (string values quoted, not escaped, so
    their words stay searchable); `name` and the raw input on the next line for free-form
    input; `name()` for none."""
    if isinstance(arguments, dict):
        parts = [f"{key}={_value_text(value)}" for key, value in arguments.items()]
        return f"{name}({', '.join(parts)})"
    if isinstance(arguments, str):
        return f"{name}\n{arguments}" if arguments else f"{name}()"
    if arguments is None:
        return f"{name}()"
    return f"{name}({_value_text(arguments)})"


def _value_text(value: Any) -> str:
    if isinstance(value, str):
        return f'"{value}"'
    if isinstance(value, list) and all(isinstance(item, str) for item in value):
        return "[" + ", ".join(f'"{item}"' for item in value) + "]"  # argv: scripts readable
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


def workdir(arguments: Any, cwd: str | None) -> str | None:
    """The directory a tool call runs in: its `workdir`/`working_directory`/`cwd` argument
    (relative ones resolved against `cwd`), else `cwd`."""
    if isinstance(arguments, dict):
        for key in ("workdir", "working_directory", "cwd"):
            value = arguments.get(key)
            if isinstance(value, str) and value.strip():
                value = value.strip()
                if posixpath.isabs(value) or cwd is None:
                    return posixpath.normpath(value)
                return posixpath.normpath(posixpath.join(cwd, value))
    return cwd


def file_paths(name: str, arguments: Any) -> tuple[list[str], bool]:
    """The file paths a tool call names, in first-seen order, and whether it mutates them."""
    tool = base_tool_name(name)[1].lower()
    mutation = tool in _MUTATING_TOOLS
    found: list[str] = []
    patch_text: str | None = None
    if isinstance(arguments, str):
        patch_text = arguments
    elif isinstance(arguments, dict):
        if tool not in _DIRECTORY_TOOLS:
            for key in _PATH_KEYS:
                found.extend(_plausible([arguments.get(key)]))
            for key in _LIST_KEYS:
                value = arguments.get(key)
                if isinstance(value, list):
                    found.extend(_plausible(value))
        for key in ("input", "patch"):
            if isinstance(arguments.get(key), str):
                patch_text = arguments[key]
        if tool == "str_replace_based_edit_tool" or tool == "str_replace_editor":
            mutation = arguments.get("command") != "view"
        if tool in _SHELL_TOOLS:
            command = arguments.get("command", arguments.get("cmd"))
            shell_found, shell_writes = shell_paths(command)
            found.extend(_plausible(shell_found))
            mutation = mutation or shell_writes
            # `apply_patch` run through the shell (argv or heredoc) carries a whole patch.
            script = "\n".join(map(str, command)) if isinstance(command, list) else command
            if isinstance(script, str) and "*** Begin Patch" in script:
                patch_text = script
    if patch_text is not None:
        headers = patch_paths(patch_text)
        if headers:
            found.extend(_plausible(headers))
            mutation = True
    return list(dict.fromkeys(found)), mutation


def patch_paths(text: str) -> list[str]:
    """Paths from apply_patch headers (`*** Update File:`, `*** Add File:`, `*** Delete
    File:`, `*** Move to:`)."""
    paths: list[str] = []
    for line in text.splitlines():
        match = _PATCH_HEADER.match(line)
        if match:
            paths.append(match.group(1) or match.group(2))
    return paths


def _plausible(values: list[Any]) -> list[str]:
    return [value.strip() for value in values if isinstance(value, str) and plausible_path(value)]


def plausible_path(value: str) -> bool:
    """A string that reads as one file path: no URL, glob, variable, newline or option, not a
    bare directory marker."""
    text = value.strip()
    if not text or len(text) > 1024 or text in {".", "..", "/", "~"}:
        return False
    if "://" in text or text.startswith(("-", "/dev/")) or text.endswith("/"):
        return False
    return not any(char in text for char in "\n\r\0*?$`")
