"""Summarize a py-spy ``--format raw`` profile (collapsed stacks) of the daemon.

``python -m bench.ingest.profile FILE [--top N]`` prints, as percentages of all samples:

- **self**: the innermost frame of each sample (``file:function``);
- **inclusive**: every function present in a sample's stack (counted once per sample);
- **repo self**: each sample charged to its innermost frame in mcpd's own code (``cli``,
  ``gateway``, ``services``, ``mcpd``), so library time (json, protobuf, SQLAlchemy, sqlite3)
  lands on the mcpd function that asked for it.

The run benchmark writes these files with ``--profile-dir DIR --py-spy PATH`` (one per mcpd
case, recorded over the measured window).
"""

from __future__ import annotations

import argparse
import dataclasses
import re
import sys
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path

REPO_PACKAGES = ("cli", "gateway", "services", "mcpd")
_FRAME = re.compile(r"^(?P<func>.*?) \((?P<file>[^()]*?)(?::(?P<line>\d+))?\)$")


@dataclasses.dataclass(frozen=True, slots=True)
class Summary:
    samples: int
    self_time: Counter[str]
    inclusive: Counter[str]
    repo_self: Counter[str]

    def top(self, which: str, count: int) -> list[tuple[str, float]]:
        counter: Counter[str] = getattr(self, which)
        total = self.samples or 1
        return [(name, 100.0 * value / total) for name, value in counter.most_common(count)]


def frame_name(frame: str) -> str:
    """``func (path/file.py:123)`` -> ``path/file.py:func``."""
    match = _FRAME.match(frame.strip())
    if match is None:
        return frame.strip()
    return f"{match.group('file')}:{match.group('func')}"


def _is_repo(name: str) -> bool:
    return name.split("/", 1)[0] in REPO_PACKAGES and "/" in name


def summarize(lines: Iterable[str]) -> Summary:
    """Aggregate collapsed-stack lines (``frame;frame;... count``)."""
    samples = 0
    self_time: Counter[str] = Counter()
    inclusive: Counter[str] = Counter()
    repo_self: Counter[str] = Counter()
    for raw in lines:
        line = raw.rstrip("\n")
        stack, _, count_text = line.rpartition(" ")
        if not stack or not count_text.isdigit():
            continue
        count = int(count_text)
        frames = [frame_name(frame) for frame in stack.split(";") if frame]
        if not frames:
            continue
        samples += count
        self_time[frames[-1]] += count
        for name in set(frames):
            inclusive[name] += count
        owner = next((name for name in reversed(frames) if _is_repo(name)), frames[-1])
        repo_self[owner] += count
    return Summary(samples, self_time, inclusive, repo_self)


def render(summary: Summary, top: int = 20) -> str:
    out = [f"{summary.samples} samples"]
    for which, title in (
        ("repo_self", "charged to the innermost mcpd frame"),
        ("self_time", "self (innermost frame)"),
        ("inclusive", "inclusive (in the stack)"),
    ):
        out.append(f"\n{title}:")
        out.extend(f"  {pct:5.1f}%  {name}" for name, pct in summary.top(which, top))
    return "\n".join(out)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.ingest.profile")
    parser.add_argument("files", nargs="+", type=Path)
    parser.add_argument("--top", type=int, default=20)
    args = parser.parse_args(argv)
    for path in args.files:
        print(f"== {path}")
        with path.open(encoding="utf-8", errors="replace") as handle:
            print(render(summarize(handle), args.top))
    return 0


if __name__ == "__main__":
    sys.exit(main())
