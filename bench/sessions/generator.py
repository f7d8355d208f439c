"""A deterministic generator of realistic synthetic agent transcripts.

``generate(root, events, seed=...)`` writes Codex rollout files and Claude Code transcripts
(the formats of docs/sessions.md, as the real harnesses write them) under
``root/codex/YYYY/MM/DD/rollout-*.jsonl`` and ``root/claude/projects/<cwd>/<uuid>.jsonl``, until
the files hold exactly ``events`` read-model events (what the importer stores), and returns a
:class:`Corpus` describing them (also written to ``root/manifest.json``).

What the transcripts look like:

- Half the sessions are Codex, half Claude Code; each holds 50 to 2,000 events (log-uniform),
  in multi-turn conversations: a user prompt, then reasoning, interim messages and tool calls
  with their outputs (shell commands, file reads, edits, searches), then a final answer.
  Codex turns carry ``task_started``/``token_count``/``task_complete`` runtime records and the
  ``event_msg`` twins of messages and reasoning (one event each, as in real rollouts);
  Claude Code turns split one API response over several ``assistant`` records, end with
  ``stop_reason: end_turn`` and a ``turn_duration`` record, and sessions may carry a summary
  title and file-history snapshots (no events).
- Tool outputs are code, logs, test runs, grep hits and diffs; most are short, 30 % are 1-4 KB
  and 10 % are 4-16 KB. Some fail (non-zero exit, ``is_error``).
- Prose (prompts, answers, reasoning) is written in the session's language (70 % English,
  the rest French, German, Spanish, Russian, Greek, Chinese or Japanese), mixed with the
  Zipf-ranked technical vocabulary of :mod:`bench.sessions.vocabulary` and the session's own
  topic words, with emoji here and there.

Each session is drawn from its own ``random.Random`` seeded with ``(seed, index)``: the same
``(events, seed)`` writes byte-identical files.
"""

from __future__ import annotations

import dataclasses
import json
import math
import random
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from bench.sessions.vocabulary import LANGUAGES, Language, Vocabulary

__all__ = [
    "SOURCES",
    "Corpus",
    "GeneratedFile",
    "GeneratorConfig",
    "generate",
    "load_manifest",
]

# Source name -> (harness, glob relative to the corpus root).
SOURCES: dict[str, tuple[str, str]] = {
    "codex": ("codex", "codex/**/*.jsonl"),
    "claude": ("claude-code", "claude/**/*.jsonl"),
}
MANIFEST = "manifest.json"
_EPOCH = datetime(2025, 7, 1, tzinfo=UTC)
_STEP_KINDS = ("reasoning", "text", "shell", "read", "edit", "grep")
_STEP_WEIGHTS = (18, 9, 30, 20, 11, 12)
# Events a turn costs besides its steps: Codex task_started, prompt, final answer, token_count,
# task_complete (plus the injected environment context in the first turn); Claude Code prompt,
# final answer, turn_duration.
_OVERHEAD = {"codex": 5, "claude": 3}
_FIRST_TURN_EXTRA = {"codex": 1, "claude": 0}


@dataclass(frozen=True, slots=True)
class GeneratorConfig:
    """What the corpus is made of (the defaults are the benchmark's)."""

    min_session_events: int = 50
    max_session_events: int = 2000
    codex_share: float = 0.5
    vocabulary_size: int = 30_000
    zipf_s: float = 1.07
    projects: int = 40
    line_pool: int = 60_000

    def __post_init__(self) -> None:
        if not 10 <= self.min_session_events <= self.max_session_events:
            raise ValueError("need 10 <= min_session_events <= max_session_events")
        if not 0.0 <= self.codex_share <= 1.0:
            raise ValueError("codex_share must be within [0, 1]")


@dataclass(frozen=True, slots=True)
class GeneratedFile:
    """One transcript: path relative to the corpus root, and what it holds."""

    path: str
    source: str
    harness: str
    session_key: str
    events: int
    bytes: int
    language: str


@dataclass(frozen=True, slots=True)
class Corpus:
    """A generated corpus: its files, totals and how long generating took."""

    root: Path
    seed: int
    events: int
    files: tuple[GeneratedFile, ...]
    seconds: float
    config: GeneratorConfig

    @property
    def bytes(self) -> int:
        return sum(file.bytes for file in self.files)

    def to_dict(self) -> dict[str, Any]:
        return {
            "seed": self.seed,
            "events": self.events,
            "seconds": self.seconds,
            "config": dataclasses.asdict(self.config),
            "files": [dataclasses.asdict(file) for file in self.files],
        }


def load_manifest(root: Path) -> Corpus | None:
    """The corpus described by ``root/manifest.json``, or None when there is none (or it is
    unreadable, or a file it names is missing)."""
    try:
        data = json.loads((root / MANIFEST).read_text(encoding="utf-8"))
        files = tuple(GeneratedFile(**item) for item in data["files"])
        corpus = Corpus(
            root=root,
            seed=int(data["seed"]),
            events=int(data["events"]),
            files=files,
            seconds=float(data["seconds"]),
            config=GeneratorConfig(**data["config"]),
        )
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if not all((root / file.path).is_file() for file in files):
        return None
    return corpus


def session_sizes(
    events: int, rng: random.Random, config: GeneratorConfig
) -> list[tuple[str, int]]:
    """(source, events) of every session, summing to ``events``: log-uniform sizes, and the
    last session absorbs a remainder smaller than the minimum."""
    if events < 10:
        raise ValueError("a corpus needs at least 10 events")
    low, high = math.log(config.min_session_events), math.log(config.max_session_events + 1)
    sizes: list[tuple[str, int]] = []
    remaining = events
    while remaining > 0:
        size = min(int(math.exp(rng.uniform(low, high))), config.max_session_events, remaining)
        if remaining - size < config.min_session_events:
            size = remaining
        source = "codex" if rng.random() < config.codex_share else "claude"
        sizes.append((source, size))
        remaining -= size
    return sizes


def generate(
    root: Path,
    events: int,
    *,
    seed: int = 0,
    config: GeneratorConfig | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> Corpus:
    """Write a corpus of exactly ``events`` events under ``root`` (created; existing files of
    the same names are overwritten) and its manifest. ``progress(events_done, events)`` is
    called after each session."""
    config = config or GeneratorConfig()
    began = time.perf_counter()
    root.mkdir(parents=True, exist_ok=True)
    vocabulary = Vocabulary(size=config.vocabulary_size, zipf_s=config.zipf_s, seed=seed)
    world = _World(vocabulary, seed, config)
    master = random.Random(f"sizes:{seed}")
    files: list[GeneratedFile] = []
    done = 0
    for index, (source, size) in enumerate(session_sizes(events, master, config)):
        rng = random.Random(f"session:{seed}:{index}")
        writer: _Session = (
            _CodexSession(world, rng, index, size)
            if source == "codex"
            else _ClaudeSession(world, rng, index, size)
        )
        lines, written = writer.render()
        if written != size:
            raise AssertionError(f"session {index}: planned {size} events, wrote {written}")
        path = root / writer.relative_path
        path.parent.mkdir(parents=True, exist_ok=True)
        data = ("\n".join(lines) + "\n").encode("utf-8")
        path.write_bytes(data)
        files.append(
            GeneratedFile(
                path=writer.relative_path,
                source=source,
                harness=SOURCES[source][0],
                session_key=writer.session_uuid,
                events=size,
                bytes=len(data),
                language=writer.language.name,
            )
        )
        done += size
        if progress is not None:
            progress(done, events)
    corpus = Corpus(root, seed, events, tuple(files), time.perf_counter() - began, config)
    (root / MANIFEST).write_text(json.dumps(corpus.to_dict()), encoding="utf-8")
    return corpus


# ---------------------------------------------------------------------------------------------
# Shared material: vocabulary, projects, and a pool of tool-output lines


def _ident(words: Sequence[str]) -> str:
    return "_".join(words)


def _camel(words: Sequence[str]) -> str:
    return "".join(word[:1].upper() + word[1:] for word in words)


class _World:
    """What every session draws from: the vocabulary, projects and tool-output lines."""

    def __init__(self, vocabulary: Vocabulary, seed: int, config: GeneratorConfig) -> None:
        self.vocabulary = vocabulary
        rng = random.Random(f"world:{seed}")
        self.projects = [
            "-".join(vocabulary.band(rng, 2, 40, 3000)) for _ in range(config.projects)
        ]
        self.lines = [self._line(rng) for _ in range(config.line_pool)]

    def _line(self, rng: random.Random) -> str:
        v = self.vocabulary
        a, b, c, d, e = v.sample(rng, 5)
        n = rng.randint(1, 999)
        kind = rng.randrange(16)
        if kind == 0:
            return f"def {a}_{b}(self, {c}: {_camel([d])}) -> {_camel([e, 'result'])}:"
        if kind == 1:
            return f"        {a}_{b} = self.{c}.{d}({e}, limit={n})"
        if kind == 2:
            return f"    let {a} = {b}.{c}_{d}(&{e})?;"
        if kind == 3:
            return f"pub fn {a}_{b}(&self, {c}: &{_camel([d])}) -> Result<{_camel([e])}> {{"
        if kind == 4:
            stamp = (_EPOCH + timedelta(seconds=rng.randrange(30_000_000))).isoformat()
            level = rng.choice(("INFO", "INFO", "DEBUG", "WARN", "ERROR"))
            return f"{stamp[:19]}Z {level} {a}::{b}: {c} {d} {e} in {n}ms"
        if kind == 5:
            status = rng.choice(("PASSED", "PASSED", "PASSED", "FAILED", "SKIPPED"))
            return f"tests/test_{a}.py::test_{b}_{c}_{d} {status} [{n % 100:3d}%]"
        if kind == 6:
            return f"src/{a}/{b}.py:{n}:        {c}_{d} = {e}({a})"
        if kind == 7:
            return f"+        {a}.{b}({c}_{d}, {e}={n})"
        if kind == 8:
            return f"-        {a}.{b}({c}, {e})"
        if kind == 9:
            return f"    # {a} {b} the {c} before {d} so {e} stays consistent"
        if kind == 10:
            return f'    "{a}_{b}": {{"{c}": {n}, "{d}": "{e}"}},'
        if kind == 11:
            return f"{a}/{b}/{c}_{d}.rs"
        if kind == 12:
            return f'  File "/home/dev/src/{a}/{b}.py", line {n}, in {c}_{d}'
        if kind == 13:
            return f"error[E0{n:03d}]: {a} `{b}` {c} {d} in `{e}`"
        if kind == 14:
            language = rng.choice(LANGUAGES[1:])
            words = rng.choices(language.words, k=rng.randint(2, 6))
            text = language.joiner.join(words) if language.cjk else " ".join(words)
            return f'msgid "{a}_{b}" msgstr "{text}"'
        return f'    assert {a}.{b} == {c}_{d}, "{e} {n}"'

    def output(self, rng: random.Random, size: int) -> str:
        """Tool output of about ``size`` bytes: a run of pool lines or a random pick."""
        count = max(1, size // 48)
        if rng.random() < 0.5:
            start = rng.randrange(len(self.lines))
            picked = self.lines[start : start + count]
            if len(picked) < count:
                picked += self.lines[: count - len(picked)]
        else:
            picked = rng.choices(self.lines, k=count)
        return "\n".join(picked)


# ---------------------------------------------------------------------------------------------
# One session: a plan of turns and steps, rendered in a harness's format


class _Session:
    source = ""

    def __init__(self, world: _World, rng: random.Random, index: int, events: int) -> None:
        self.world = world
        self.rng = rng
        self.index = index
        self.events = events
        v = world.vocabulary
        self.language: Language = v.language(rng)
        self.project = rng.choice(world.projects)
        self.cwd = f"/home/dev/{self.project}"
        self.session_uuid = str(uuid.UUID(int=rng.getrandbits(128), version=4))
        # Topic: words this session keeps coming back to, its files and identifiers.
        words = v.band(rng, 10, 20, 8000)
        self.files = [f"src/{words[i]}/{words[i + 1]}.py" for i in range(0, 8, 2)]
        self.files += [f"src/{words[8]}/mod.rs", f"tests/test_{words[9]}.py"]
        idents = [_ident(v.band(rng, 2, 0, 2000)) for _ in range(3)]
        self.topic = [*words, *idents, *self.project.split("-")]
        self.clock = _EPOCH + timedelta(seconds=rng.randrange(330 * 86400))
        self.started = self.clock
        self.model = ""

    @property
    def relative_path(self) -> str:
        raise NotImplementedError

    # -- planning ---------------------------------------------------------------------------

    def plan(self) -> list[list[str]]:
        """The steps of each turn, so that steps plus turn overheads make ``events``."""
        rng = self.rng
        overhead = _OVERHEAD[self.source]
        remaining = self.events
        turns: list[list[str]] = []
        while remaining > 0:
            fixed = overhead + (_FIRST_TURN_EXTRA[self.source] if not turns else 0)
            budget = max(1, min(150, int(rng.lognormvariate(math.log(12), 0.8))))
            if remaining - fixed - budget < overhead + 1:
                budget = remaining - fixed
            steps: list[str] = []
            left = budget
            while left > 0:
                kind = rng.choices(_STEP_KINDS, weights=_STEP_WEIGHTS)[0]
                if left < 2 and kind not in ("reasoning", "text"):
                    kind = "reasoning"
                steps.append(kind)
                left -= 1 if kind in ("reasoning", "text") else 2
            turns.append(steps)
            remaining -= fixed + budget
        return turns

    # -- content ----------------------------------------------------------------------------

    def tick(self, low: float = 0.5, high: float = 20.0) -> str:
        self.clock += timedelta(seconds=self.rng.uniform(low, high))
        return self.clock.strftime("%Y-%m-%dT%H:%M:%S.") + f"{self.clock.microsecond // 1000:03d}Z"

    def prose(self, low: int, high: int, *, emoji: float = 0.0) -> str:
        n = int(math.exp(self.rng.uniform(math.log(low), math.log(high))))
        return self.world.vocabulary.prose(self.rng, self.language, n, self.topic, emoji=emoji)

    def prompt(self) -> str:
        text = self.prose(8, 80, emoji=0.05)
        if self.rng.random() < 0.1:  # a pasted log or stack trace
            text += "\n\n" + self.world.output(self.rng, self.rng.randint(200, 3000))
        return text

    def output_size(self) -> int:
        roll = self.rng.random()
        if roll < 0.6:
            return self.rng.randint(60, 900)
        if roll < 0.9:
            return self.rng.randint(1000, 4000)
        return self.rng.randint(4000, 16000)

    def tool(self, kind: str) -> tuple[dict[str, Any], str, bool]:
        """A tool call's arguments (Claude Code style), its output and whether it failed."""
        rng, v = self.rng, self.world.vocabulary
        path = rng.choice(self.files)
        failed = rng.random() < 0.08
        if kind == "read":
            return {"file_path": f"{self.cwd}/{path}"}, self.numbered(self.output_size()), False
        if kind == "grep":
            pattern = rng.choice(self.topic) if rng.random() < 0.6 else v.sample(rng, 1)[0]
            hits = "\n".join(
                f"{rng.choice(self.files)}:{rng.randint(1, 900)}:{line}"
                for line in rng.choices(self.world.lines, k=rng.randint(1, 30))
            )
            return {"pattern": pattern, "path": "src", "output_mode": "content"}, hits, False
        if kind == "edit":
            old = self.world.output(rng, rng.randint(60, 600))
            new = self.world.output(rng, rng.randint(60, 900))
            arguments = {"file_path": f"{self.cwd}/{path}", "old_string": old, "new_string": new}
            return arguments, f"The file {self.cwd}/{path} has been updated.", False
        command = rng.choice(
            (
                f"pytest -q tests/test_{rng.choice(self.topic)}.py",
                f"cargo test -p {self.project} {rng.choice(self.topic)}",
                f"rg -n {rng.choice(self.topic)} src",
                f"git diff --stat -- {path}",
                f"make lint typecheck ARGS={rng.choice(self.topic)}",
                f"python -m {_ident(v.sample(rng, 2))} --{rng.choice(self.topic)}",
            )
        )
        output = self.world.output(rng, self.output_size())
        if failed:
            output += f"\nError: {self.prose(5, 20)}"
        return {"command": command, "description": self.prose(3, 10)}, output, failed

    def numbered(self, size: int) -> str:
        text = self.world.output(self.rng, size)
        return "\n".join(f"{i:6d}\t{line}" for i, line in enumerate(text.split("\n"), 1))

    def render(self) -> tuple[list[str], int]:
        raise NotImplementedError


def _dumps(record: dict[str, Any]) -> str:
    return json.dumps(record, ensure_ascii=False, separators=(",", ":"))


class _CodexSession(_Session):
    source = "codex"

    @property
    def relative_path(self) -> str:
        stamp = self.started.strftime("%Y-%m-%dT%H-%M-%S")
        day = self.started.strftime("%Y/%m/%d")
        return f"codex/{day}/rollout-{stamp}-{self.session_uuid}.jsonl"

    def record(self, kind: str, payload: dict[str, Any]) -> str:
        return _dumps({"timestamp": self.tick(), "type": kind, "payload": payload})

    def render(self) -> tuple[list[str], int]:
        rng = self.rng
        self.model = rng.choice(("gpt-5-codex", "gpt-5.1-codex", "gpt-5.3-codex"))
        lines = [
            self.record(
                "session_meta",
                {
                    "id": self.session_uuid,
                    "timestamp": self.tick(),
                    "cwd": self.cwd,
                    "originator": "codex_cli_rs",
                    "cli_version": "0.46.0",
                    "instructions": None,
                    "git": {"branch": "main", "repository_url": f"git@example.com:{self.project}"},
                },
            )
        ]
        events = 0
        for number, steps in enumerate(self.plan()):
            turn_id = str(uuid.UUID(int=rng.getrandbits(128), version=4))
            lines.append(
                self.record(
                    "event_msg",
                    {"type": "task_started", "turn_id": turn_id, "model_context_window": 272000},
                )
            )
            events += 1
            if number == 0:
                context = (
                    f"<environment_context>\n  <cwd>{self.cwd}</cwd>\n  <approval_policy>"
                    "on-request</approval_policy>\n  <sandbox_mode>workspace-write"
                    "</sandbox_mode>\n  <shell>bash</shell>\n</environment_context>"
                )
                lines.append(self.message("user", context, twin=False))
                events += 1
            prompt = self.prompt()
            lines.append(self.message("user", prompt))
            events += 1
            lines.append(
                self.record(
                    "turn_context",
                    {
                        "turn_id": turn_id,
                        "cwd": self.cwd,
                        "model": self.model,
                        "approval_policy": "on-request",
                        "sandbox_policy": {"mode": "workspace-write"},
                        "effort": "medium",
                    },
                )
            )
            for step in steps:
                events += self.step(step, lines)
            final = self.prose(20, 220, emoji=0.1)
            lines.append(self.message("assistant", final))
            lines.append(self.token_count(turn_id))
            lines.append(
                self.record(
                    "event_msg",
                    {"type": "task_complete", "turn_id": turn_id, "last_agent_message": final},
                )
            )
            events += 3
        return lines, events

    def message(self, role: str, text: str, *, twin: bool = True) -> str:
        kind = "input_text" if role == "user" else "output_text"
        item: dict[str, Any] = {
            "type": "message",
            "role": role,
            "content": [{"type": kind, "text": text}],
        }
        if role == "assistant":
            item["id"] = f"msg_{self.rng.getrandbits(64):016x}"
        line = self.record("response_item", item)
        if twin:
            # The event_msg twin Codex writes beside the response item: no second event.
            event = "user_message" if role == "user" else "agent_message"
            payload: dict[str, Any] = {"type": event, "message": text}
            if role == "user":
                payload["images"] = []
            line += "\n" + self.record("event_msg", payload)
        return line

    def token_count(self, turn_id: str) -> str:
        rng = self.rng
        usage = {
            "input_tokens": rng.randint(2000, 200000),
            "cached_input_tokens": rng.randint(0, 150000),
            "output_tokens": rng.randint(50, 8000),
            "reasoning_output_tokens": rng.randint(0, 4000),
            "total_tokens": rng.randint(3000, 220000),
        }
        info = {
            "total_token_usage": usage,
            "last_token_usage": usage,
            "model_context_window": 272000,
        }
        return self.record("event_msg", {"type": "token_count", "turn_id": turn_id, "info": info})

    def step(self, kind: str, lines: list[str]) -> int:
        rng = self.rng
        if kind == "reasoning":
            text = self.prose(15, 140)
            item = {
                "type": "reasoning",
                "id": f"rs_{rng.getrandbits(64):016x}",
                "summary": [{"type": "summary_text", "text": text}],
                "content": None,
                "encrypted_content": "gAAAAB" + f"{rng.getrandbits(256):064x}",
            }
            lines.append(self.record("response_item", item))
            lines.append(self.record("event_msg", {"type": "agent_reasoning", "text": text}))
            return 1
        if kind == "text":
            lines.append(self.message("assistant", self.prose(5, 50, emoji=0.05)))
            return 1
        call_id = f"call_{rng.getrandbits(96):024x}"
        arguments, output, failed = self.tool(kind)
        if kind == "edit":
            patch = (
                f"*** Begin Patch\n*** Update File: {arguments['file_path']}\n@@\n"
                + "\n".join(f"-{line}" for line in arguments["old_string"].split("\n"))
                + "\n"
                + "\n".join(f"+{line}" for line in arguments["new_string"].split("\n"))
                + "\n*** End Patch\n"
            )
            call = {
                "type": "custom_tool_call",
                "status": "completed",
                "call_id": call_id,
                "name": "apply_patch",
                "input": patch,
            }
            result = {
                "type": "custom_tool_call_output",
                "call_id": call_id,
                "output": json.dumps(
                    {
                        "output": "Success. Updated the following files:\n"
                        f"M {arguments['file_path']}\n",
                        "metadata": {"exit_code": 0, "duration_seconds": 0.1},
                    }
                ),
            }
        else:
            if kind == "read":
                script = f"sed -n '1,400p' {arguments['file_path']}"
            elif kind == "grep":
                script = f"rg -n {arguments['pattern']} {arguments['path']}"
            else:
                script = str(arguments["command"])
            call = {
                "type": "function_call",
                "name": "shell",
                "arguments": json.dumps(
                    {"command": ["bash", "-lc", script], "workdir": self.cwd, "timeout_ms": 120000}
                ),
                "call_id": call_id,
            }
            code = 1 if failed else 0
            wall = rng.uniform(0.05, 30.0)
            if rng.random() < 0.5:
                text = f"Exit code: {code}\nWall time: {wall:.1f} seconds\nOutput:\n{output}"
            else:
                text = json.dumps(
                    {"output": output, "metadata": {"exit_code": code, "duration_seconds": wall}},
                    ensure_ascii=False,
                )
            result = {"type": "function_call_output", "call_id": call_id, "output": text}
        lines.append(self.record("response_item", call))
        lines.append(self.record("response_item", result))
        return 2


class _ClaudeSession(_Session):
    source = "claude"

    def __init__(self, world: _World, rng: random.Random, index: int, events: int) -> None:
        super().__init__(world, rng, index, events)
        self.parent: str | None = None

    @property
    def relative_path(self) -> str:
        return f"claude/projects/-home-dev-{self.project}/{self.session_uuid}.jsonl"

    def record(self, kind: str, body: dict[str, Any], *, parent: bool = True) -> str:
        record_uuid = str(uuid.UUID(int=self.rng.getrandbits(128), version=4))
        record: dict[str, Any] = {
            "parentUuid": self.parent if parent else None,
            "isSidechain": False,
            "userType": "external",
            "cwd": self.cwd,
            "sessionId": self.session_uuid,
            "version": "2.0.14",
            "gitBranch": "main",
            "type": kind,
            **body,
            "uuid": record_uuid,
            "timestamp": self.tick(),
        }
        self.parent = record_uuid
        return _dumps(record)

    def assistant(self, block: dict[str, Any], message_id: str, stop: str | None) -> str:
        rng = self.rng
        message = {
            "model": self.model,
            "id": message_id,
            "type": "message",
            "role": "assistant",
            "content": [block],
            "stop_reason": stop,
            "stop_sequence": None,
            "usage": {
                "input_tokens": rng.randint(1, 40),
                "cache_creation_input_tokens": rng.randint(0, 20000),
                "cache_read_input_tokens": rng.randint(0, 150000),
                "output_tokens": rng.randint(1, 4000),
                "service_tier": "standard",
            },
        }
        return self.record(
            "assistant", {"message": message, "requestId": f"req_{rng.getrandbits(80):020x}"}
        )

    def render(self) -> tuple[list[str], int]:
        rng = self.rng
        self.model = rng.choice(
            ("claude-sonnet-4-5-20250929", "claude-opus-4-5-20251101", "claude-haiku-4-5-20251001")
        )
        lines: list[str] = []
        if rng.random() < 0.5:
            lines.append(
                _dumps(
                    {
                        "type": "summary",
                        "summary": self.prose(3, 10),
                        "leafUuid": str(uuid.UUID(int=rng.getrandbits(128), version=4)),
                    }
                )
            )
        events = 0
        for steps in self.plan():
            if rng.random() < 0.3:
                snapshot = {
                    "messageId": self.session_uuid,
                    "trackedFileBackups": {},
                    "timestamp": self.tick(),
                }
                lines.append(
                    _dumps(
                        {
                            "type": "file-history-snapshot",
                            "messageId": self.session_uuid,
                            "snapshot": snapshot,
                            "isSnapshotUpdate": False,
                        }
                    )
                )
            began = self.clock
            lines.append(
                self.record("user", {"message": {"role": "user", "content": self.prompt()}})
            )
            events += 1
            message_id = f"msg_{rng.getrandbits(96):024x}"
            for step in steps:
                if rng.random() < 0.35:  # a new API response
                    message_id = f"msg_{rng.getrandbits(96):024x}"
                events += self.step(step, message_id, lines)
            final = {"type": "text", "text": self.prose(20, 220, emoji=0.1)}
            lines.append(self.assistant(final, f"msg_{rng.getrandbits(96):024x}", "end_turn"))
            duration = int((self.clock - began).total_seconds() * 1000)
            lines.append(
                self.record(
                    "system",
                    {"subtype": "turn_duration", "durationMs": duration, "isMeta": False},
                )
            )
            events += 2
        return lines, events

    def step(self, kind: str, message_id: str, lines: list[str]) -> int:
        rng = self.rng
        if kind == "reasoning":
            block = {
                "type": "thinking",
                "thinking": self.prose(15, 140),
                "signature": f"{rng.getrandbits(256):064x}",
            }
            lines.append(self.assistant(block, message_id, None))
            return 1
        if kind == "text":
            block = {"type": "text", "text": self.prose(5, 50, emoji=0.05)}
            lines.append(self.assistant(block, message_id, None))
            return 1
        name = {"shell": "Bash", "read": "Read", "edit": "Edit", "grep": "Grep"}[kind]
        arguments, output, failed = self.tool(kind)
        call_id = f"toolu_{rng.getrandbits(96):024x}"
        use: dict[str, Any] = {"type": "tool_use", "id": call_id, "name": name, "input": arguments}
        lines.append(self.assistant(use, message_id, "tool_use"))
        result: dict[str, Any] = {"tool_use_id": call_id, "type": "tool_result", "content": output}
        if failed:
            result["is_error"] = True
        lines.append(
            self.record(
                "user",
                {
                    "message": {"role": "user", "content": [result]},
                    "toolUseResult": {"stdout": output[:200], "stderr": "", "interrupted": False}
                    if kind == "shell"
                    else {"type": "text"},
                },
            )
        )
        return 2
