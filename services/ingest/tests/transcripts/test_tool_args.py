"""Tool-call arguments: text, mcpd's own tools, working directory, file paths."""

from __future__ import annotations

from typing import Any

import pytest

from services.ingest.transcripts.shell_paths import shell_paths
from services.ingest.transcripts.tool_args import (
    base_tool_name,
    file_paths,
    parse_arguments,
    self_tool_name,
    tool_call_text,
    workdir,
)


@pytest.mark.parametrize(
    ("name", "arguments", "expected"),
    [
        ("search_sessions", {"query": "x"}, "search_sessions"),
        ("mcp__mcpd__search_sessions", {"query": "x"}, "search_sessions"),
        ("mcp__moraine__search_sessions", {"query": "x"}, "search_sessions"),
        ("mcpd__list_sessions", {}, "list_sessions"),
        ("mcpd.file_attention", {"path": "a"}, "file_attention"),
        ("mcp__mcpd__open", {"id": "anything"}, "open"),
        ("mcp__moraine__open", {}, "open"),
        ("open", {"id": "session:ses_abc"}, "open"),
        ("open", {"id": "event:evt_abc", "limit": 3}, "open"),
        ("open", {"cursor": "opaque"}, "open"),
        ("open", {"url": "https://example.com"}, None),
        ("open", {"id": "42"}, None),
        ("mcp__browser__open", {"url": "x"}, None),
        ("Read", {"file_path": "a"}, None),
        ("search", {"query": "x"}, None),
    ],
)
def test_self_tool_name(name: str, arguments: Any, expected: str | None) -> None:
    assert self_tool_name(name, arguments) == expected


def test_base_tool_name() -> None:
    assert base_tool_name("mcp__github__create_issue") == ("github", "create_issue")
    assert base_tool_name("server__tool") == ("server", "tool")
    assert base_tool_name("Bash") == (None, "Bash")


def test_parse_arguments() -> None:
    assert parse_arguments('{"path": "a"}') == {"path": "a"}
    assert parse_arguments("[1]") == [1]
    assert parse_arguments("not json") == "not json"
    assert parse_arguments('"just a string"') == '"just a string"'
    assert parse_arguments({"k": 1}) == {"k": 1}


def test_tool_call_text() -> None:
    assert tool_call_text("exec_command", {"cmd": "cargo test", "timeout": 5, "env": ["A"]}) == (
        'exec_command(cmd="cargo test", timeout=5, env=["A"])'
    )
    assert tool_call_text("apply_patch", "*** Begin Patch\n") == "apply_patch\n*** Begin Patch\n"
    assert tool_call_text("noop", None) == "noop()"
    assert tool_call_text("noop", "") == "noop()"
    assert tool_call_text("Write", {"content": "a\nb"}) == 'Write(content="a\nb")'
    assert tool_call_text("shell", {"command": ["bash", "-lc", "ls\npwd"]}) == (
        'shell(command=["bash", "-lc", "ls\npwd"])'
    )


def test_workdir() -> None:
    assert workdir({"workdir": "/abs"}, "/repo") == "/abs"
    assert workdir({"working_directory": "sub/../x"}, "/repo") == "/repo/x"
    assert workdir({"cwd": "rel"}, None) == "rel"
    assert workdir({"cmd": "ls"}, "/repo") == "/repo"
    assert workdir("raw", None) is None


@pytest.mark.parametrize(
    ("name", "arguments", "paths", "mutation"),
    [
        ("Read", {"file_path": "/r/a.py"}, ["/r/a.py"], False),
        ("Read", {"path": "Cargo.toml"}, ["Cargo.toml"], False),
        ("Edit", {"file_path": "a.py", "old_string": "x"}, ["a.py"], True),
        ("MultiEdit", {"file_path": "a.py", "edits": []}, ["a.py"], True),
        ("Write", {"file_path": "new.md", "content": "# x"}, ["new.md"], True),
        ("NotebookEdit", {"notebook_path": "n.ipynb"}, ["n.ipynb"], True),
        ("read_many", {"paths": ["a.py", "b.py", 3, "https://x.y/z"]}, ["a.py", "b.py"], False),
        ("edit_file", {"target_file": "t.ts"}, ["t.ts"], True),
        ("Glob", {"pattern": "**/*.py", "path": "src"}, [], False),
        ("Grep", {"pattern": "x", "path": "."}, [], False),
        ("Read", {"file_path": "https://example.com/a.py"}, [], False),
        ("Read", {"file_path": "src/*.py"}, [], False),
        ("Read", {"file_path": "$HOME/a"}, [], False),
        ("Read", {"file_path": "dir/"}, [], False),
        ("Read", {"file_path": "two\nlines"}, [], False),
        ("str_replace_based_edit_tool", {"command": "view", "path": "a"}, ["a"], False),
        ("str_replace_based_edit_tool", {"command": "create", "path": "a"}, ["a"], True),
        ("mcp__fs__write_file", {"path": "w.txt"}, ["w.txt"], True),
        (
            "apply_patch",
            "*** Begin Patch\n*** Update File: src/a.py\n@@\n-x\n+y\n*** Add File: b.py\n"
            "+z\n*** Delete File: old.py\n*** Update File: c.py\n*** Move to: d.py\n"
            "*** End Patch\n",
            ["src/a.py", "b.py", "old.py", "c.py", "d.py"],
            True,
        ),
        ("apply_patch", {"input": "*** Begin Patch\n*** Add File: x.rs\n"}, ["x.rs"], True),
        ("apply_patch", "*** Begin Patch\n*** End Patch\n", [], True),
        ("shell", {"command": ["bash", "-lc", "cat README.md | head -5"]}, ["README.md"], False),
        ("shell", {"command": ["cat", "a.txt"]}, ["a.txt"], False),
        ("exec_command", {"cmd": "sed -n '1,80p' src/lib.rs"}, ["src/lib.rs"], False),
        ("Bash", {"command": "sed -i 's/a/b/' x.py y.py"}, ["x.py", "y.py"], True),
        ("Bash", {"command": "rm -f build.log && rm -rf target"}, ["build.log"], True),
        ("Bash", {"command": "head -n 20 a.log; tail -5 b.log"}, ["a.log", "b.log"], False),
        ("Bash", {"command": "echo done > out.txt 2>/dev/null"}, ["out.txt"], True),
        (
            "Bash",
            {"command": "cat > gen.py <<'EOF'\nprint(open('x').read())\nEOF"},
            ["gen.py"],
            True,
        ),
        ("Bash", {"command": "git status && cargo test 2>&1"}, [], False),
        ("Bash", {"command": "cat 'unterminated"}, [], False),
        ("Bash", {"command": "curl https://example.com > page.html"}, ["page.html"], True),
        ("Bash", {"command": "FOO=1 cat a.txt"}, ["a.txt"], False),
        ("local_shell", {"type": "exec", "command": ["wc", "-l", "x.c"]}, ["x.c"], False),
        ("python", {"command": "cat a.txt"}, [], False),
        (
            "shell",
            {"command": ["apply_patch", "*** Begin Patch\n*** Update File: m.py\n*** End Patch"]},
            ["m.py"],
            True,
        ),
        (
            "exec_command",
            {"cmd": "apply_patch <<'EOF'\n*** Begin Patch\n*** Add File: n.py\n+x\nEOF"},
            ["n.py"],
            True,
        ),
    ],
)
def test_file_paths(name: str, arguments: Any, paths: list[str], mutation: bool) -> None:
    assert file_paths(name, arguments) == (paths, mutation)


def test_shell_paths_ignores_non_commands() -> None:
    assert shell_paths(None) == ([], False)
    assert shell_paths(["bash", 3]) == ([], False)
    assert shell_paths("mv a.txt b.txt") == (["a.txt", "b.txt"], True)
    assert shell_paths("cat < in.txt") == (["in.txt"], False)
