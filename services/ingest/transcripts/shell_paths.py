"""File operands of simple shell commands (file_attention), read conservatively.

Only a few common file commands count (`cat`, `head`, `sed -i`, `rm`, `mv`, ...) plus `>`/`>>`
redirection targets. Heredoc bodies are skipped, a line that does not tokenize contributes
nothing, and compound text is split into simple commands at `;`, `&&`, `||`, `|` and `&`.
"""

from __future__ import annotations

import posixpath
import re
import shlex
from typing import Any

__all__ = ["shell_paths"]

_READERS = frozenset(
    {"cat", "head", "tail", "less", "more", "wc", "nl", "bat", "stat", "file", "sed"}
)
_WRITERS = frozenset({"rm", "touch", "mv", "cp", "tee", "truncate"})
# Options that take the next token as their value.
_VALUE_OPTIONS = {
    "head": {"-n", "-c"},
    "tail": {"-n", "-c"},
    "sed": {"-e", "-f", "--expression", "--file"},
    "truncate": {"-s", "--size", "-r", "--reference"},
}
_SHELLS = frozenset({"bash", "sh", "zsh", "dash"})
_SEPARATORS = frozenset({";", "&&", "||", "|", "&", "(", ")", ";;", "|&"})
_WRITE_REDIRECTS = frozenset({">", ">>", ">|", "&>", "&>>"})
_OTHER_REDIRECTS = frozenset({"<", ">&", "<&", "<<", "<<<", "<<-", "<>"})
_HEREDOC = re.compile(r"<<-?\s*(['\"]?)([A-Za-z_][A-Za-z0-9_]*)\1")
_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")


def shell_paths(command: Any) -> tuple[list[str], bool]:
    """The file operands of a shell command (a script string, or an argv list such as
    `["bash", "-lc", "cat x"]`), and whether any command writes or removes a file."""
    script = _script(command)
    if script is None:
        return [], False
    paths: list[str] = []
    writes = False
    for line in _lines_outside_heredocs(script):
        try:
            lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
            lexer.whitespace_split = True
            lexer.commenters = "#"
            tokens = list(lexer)
        except ValueError:
            continue
        found, wrote = _from_tokens(tokens)
        paths.extend(found)
        writes = writes or wrote
    return paths, writes


def _script(command: Any) -> str | None:
    if isinstance(command, str):
        return command
    if not isinstance(command, list) or not all(isinstance(part, str) for part in command):
        return None
    if (
        len(command) >= 3
        and posixpath.basename(command[0]) in _SHELLS
        and command[-2].startswith("-")
        and "c" in command[-2]
    ):
        return str(command[-1])
    return shlex.join(command)


def _lines_outside_heredocs(script: str) -> list[str]:
    lines: list[str] = []
    terminator: str | None = None
    for line in script.splitlines():
        if terminator is not None:
            if line.strip() == terminator:
                terminator = None
            continue
        lines.append(line)
        match = _HEREDOC.search(line)
        if match:
            terminator = match.group(2)
    return lines


def _from_tokens(tokens: list[str]) -> tuple[list[str], bool]:
    paths: list[str] = []
    writes = False
    argv: list[str] = []
    index = 0
    while index <= len(tokens):
        token = tokens[index] if index < len(tokens) else ";"
        if token in _SEPARATORS:
            found, wrote = _command_paths(argv)
            paths.extend(found)
            writes = writes or wrote
            argv = []
        elif token in _WRITE_REDIRECTS or token in _OTHER_REDIRECTS:
            if argv and argv[-1].isdigit():
                argv.pop()  # a file descriptor number: `2>`, `1>>`
            target = tokens[index + 1] if index + 1 < len(tokens) else ""
            if token in _WRITE_REDIRECTS and target and not target.startswith("/dev/"):
                paths.append(target)
                writes = True
            elif token == "<" and target:
                paths.append(target)
            index += 1
        else:
            argv.append(token)
        index += 1
    return paths, writes


def _command_paths(argv: list[str]) -> tuple[list[str], bool]:
    while argv and _ASSIGNMENT.match(argv[0]):
        argv = argv[1:]
    if argv and argv[0] == "sudo":
        argv = argv[1:]
    if not argv:
        return [], False
    name = posixpath.basename(argv[0])
    if name not in _READERS and name not in _WRITERS:
        return [], False
    value_options = _VALUE_OPTIONS.get(name, set())
    options: list[str] = []
    operands: list[str] = []
    skip_next = False
    for token in argv[1:]:
        if skip_next:
            skip_next = False
            continue
        if token.startswith("-") and token != "-":
            options.append(token)
            skip_next = token in value_options
        elif token:
            operands.append(token)
    if name == "rm" and any(_is_recursive(option) for option in options):
        return [], False
    if name == "sed":
        in_place = any(option.startswith(("-i", "--in-place")) for option in options)
        has_script = any(
            o in ("-e", "-f") or o.startswith(("--expression", "--file")) for o in options
        )
        files = operands if has_script else operands[1:]
        return files, in_place
    return operands, name in _WRITERS


def _is_recursive(option: str) -> bool:
    if option.startswith("--"):
        return option == "--recursive"
    return "r" in option or "R" in option
