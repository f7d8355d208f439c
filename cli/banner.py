"""The lines `mcpd serve` prints once it serves: where everything is, and how to reach it."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

from mcpd.runtime.config import Settings
from mcpd.version import mcpd_version

__all__ = ["banner", "mcpd_command"]


def mcpd_command() -> str:
    """The absolute `mcpd` command of this installation, as agent configurations need it (the
    console script beside the interpreter; `python -m cli.main` when there is none)."""
    script = Path(sys.executable).parent / "mcpd"
    if script.is_file():
        return str(script)
    return f"{sys.executable} -m cli.main"


def banner(
    settings: Settings,
    *,
    roles: Sequence[str],
    http: str | None,
    grpc: str | None,
    extra: Sequence[str] = (),
) -> list[str]:
    """The banner of a daemon serving `roles` at `http` and `grpc` (None: not served here)."""
    lines = [f"mcpd {mcpd_version()} serving {', '.join(roles)}"]
    if grpc is not None:
        lines.append(f"  storage    {settings.storage.backend} ({settings.data_dir})")
    if http is not None:
        lines += [
            f"  REST       http://{http}/v1/api",
            f"  OTLP/HTTP  http://{http} (/v1/traces, /v1/logs, /v1/metrics)",
            f"  MCP        http://{http}/mcp",
            f"  MCP stdio  {mcpd_command()} mcp",
            f"  OpenAPI    http://{http}/v1/api/openapi.json",
            f"  health     http://{http}/healthz",
        ]
    if grpc is not None:
        lines.append(f"  gRPC       {grpc} (reflection on)")
    lines += extra
    return lines
