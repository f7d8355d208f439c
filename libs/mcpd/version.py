"""Versions this build reports (HealthStatus.version, HealthStatus.spec_version, `mcpd version`)."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

# The data-model spec is versioned with the proto packages (mcpd.*.v1).
SPEC_VERSION = "v1"


def mcpd_version() -> str:
    """The installed mcpd distribution's version."""
    try:
        return version("mcpd")
    except PackageNotFoundError:  # running from a tree that was never installed
        return "0+unknown"
