"""A real `mcpd serve` tails the transcripts under its home directory: a line appended to a
watched Codex rollout becomes searchable within 2 s (issue 4's acceptance), with the default
rescan interval (30 s): file-system events, not the rescan, make it that fast."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from mcpd.testing.daemon import DaemonProcess
from mcpd.testing.eventually import eventually_async

pytestmark = pytest.mark.e2e

ACCEPTANCE_S = 2.0  # issue 4: an appended line is searchable within 2 s
FIXTURES = Path(__file__).parents[1] / "fixtures" / "transcripts"
ROLLOUT = "rollout-2026-02-15T03-50-40-019c5f6a-49bd-7920-ac67-1dd8e33b0e95.jsonl"
APPENDED = {
    "timestamp": "2026-02-15T03:51:00.000Z",
    "type": "response_item",
    "payload": {
        "type": "message",
        "id": "msg_appended",
        "role": "assistant",
        "content": [{"type": "output_text", "text": "The zebracorn migration is finished."}],
    },
}


async def _search(http: httpx.AsyncClient, query: str) -> list[dict[str, Any]]:
    response = await http.post("/v1/api/sessions/search", json={"query": query})
    assert response.status_code == 200, response.text
    envelope = response.json()["envelope"]
    assert "error" not in envelope or envelope["error"] is None, envelope
    hits: list[dict[str, Any]] = envelope["data"]["results"]
    return hits


async def _eventually_found(http: httpx.AsyncClient, query: str, timeout_s: float) -> float:
    """Seconds until `query` has a hit; fails after `timeout_s`."""
    began = time.monotonic()

    async def found() -> None:
        assert await _search(http, query), f"{query!r} not searchable"

    await eventually_async(found, timeout=timeout_s)
    return time.monotonic() - began


async def test_an_appended_line_becomes_searchable(tmp_path: Path) -> None:
    home = tmp_path / "home"
    day = home / ".codex" / "sessions" / "2026" / "02" / "15"
    day.mkdir(parents=True)
    rollout = day / ROLLOUT
    shutil.copy(FIXTURES / "codex" / "session.jsonl", rollout)
    # With HOME set, DaemonProcess leaves `[sessions] sources` at auto; the rescan interval
    # stays at its default.
    env = {"HOME": str(home)}
    async with (
        DaemonProcess(extra_env=env) as daemon,
        httpx.AsyncClient(base_url=daemon.http_url, timeout=10) as http,
    ):
        assert "tailing codex (file events" in daemon.stderr_text()
        await _eventually_found(http, "inspect", timeout_s=30)
        assert await _search(http, "zebracorn") == []
        with rollout.open("a", encoding="utf-8") as handle:
            handle.write(json.dumps(APPENDED) + "\n")
        elapsed = await _eventually_found(http, "zebracorn", timeout_s=30)
        print(f"append to searchable: {elapsed * 1000:.0f} ms")
        assert elapsed < ACCEPTANCE_S
        (hit,) = await _search(http, "zebracorn")
        assert (hit["session"]["source"], hit["session"]["harness"]) == ("codex", "codex")
        assert "zebracorn" in hit["snippet"]["text"]
