"""Resident memory of a daemon and every process of its group, sampled from Linux ``/proc``.

``mcpd serve`` leads a process group (the harness starts it in a session of its own): the
supervisor and its server processes. Each sample reads ``VmRSS`` of every live member; the peak
of the group is the largest sum at one sample, and each process keeps its own peak. The group's
leader is named ``supervisor``, the others ``server-1``, ``server-2``, … in pid order.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from pathlib import Path

PROC = Path("/proc")
SAMPLE_INTERVAL_S = 0.2


def _read(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None


def group_members(pgid: int) -> list[int]:
    """The live processes of group ``pgid``, in pid order."""
    members: list[int] = []
    for entry in PROC.iterdir():
        if not entry.name.isdigit():
            continue
        stat = _read(entry / "stat")
        if not stat:
            continue
        fields = stat[stat.rfind(")") + 2 :].split()
        if len(fields) < 3 or fields[1] == "Z" or int(fields[2]) != pgid:
            continue
        members.append(int(entry.name))
    return sorted(members)


def rss_bytes(pid: int) -> int | None:
    """``VmRSS`` of ``pid`` in bytes (None once it is gone)."""
    status = _read(PROC / str(pid) / "status")
    if status is None:
        return None
    for line in status.splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return None


@dataclasses.dataclass(slots=True)
class MemoryPeaks:
    """What the samples found: the group's peak and each process's, in bytes."""

    samples: int = 0
    peak_total_bytes: int = 0
    peak_total_at_s: float = 0.0
    peak_by_process: dict[str, int] = dataclasses.field(default_factory=dict)
    timeline: list[tuple[float, int]] = dataclasses.field(default_factory=list)
    """``(seconds since sampling began, total bytes)``, one point a second."""

    def add(self, at_s: float, by_process: dict[str, int]) -> None:
        total = sum(by_process.values())
        self.samples += 1
        if total > self.peak_total_bytes:
            self.peak_total_bytes, self.peak_total_at_s = total, at_s
        for name, value in by_process.items():
            self.peak_by_process[name] = max(self.peak_by_process.get(name, 0), value)
        if not self.timeline or at_s - self.timeline[-1][0] >= 1.0:
            self.timeline.append((round(at_s, 1), total))


def _names(pgid: int, members: list[int]) -> dict[int, str]:
    """The leader is the supervisor; the rest are its servers, numbered in pid order."""
    servers = [pid for pid in members if pid != pgid]
    return {pgid: "supervisor", **{pid: f"server-{n}" for n, pid in enumerate(servers, 1)}}


async def sample_until(pgid: int, done: asyncio.Event) -> MemoryPeaks:
    """Sample the group every :data:`SAMPLE_INTERVAL_S` until ``done`` is set."""
    peaks = MemoryPeaks()
    began = time.perf_counter()
    names = _names(pgid, await asyncio.to_thread(group_members, pgid))
    while not done.is_set():
        sizes = {name: rss_bytes(pid) for pid, name in names.items()}
        peaks.add(
            time.perf_counter() - began,
            {name: size for name, size in sizes.items() if size is not None},
        )
        try:
            await asyncio.wait_for(done.wait(), SAMPLE_INTERVAL_S)
        except TimeoutError:
            continue
    return peaks
