"""Rows of the control store's `aspects` table: the spec's Aspect, one row per stored version.

A stored version never changes: an edit is a new row with the next version, so a note keeps
naming the definition it was written against. Times are nanoseconds since the epoch. What is
stored is decided by `mcpd.aspects`; the intelligence service turns these rows into the spec's
Aspect.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["AspectRecord"]


@dataclass(frozen=True, slots=True)
class AspectRecord:
    """One version of one aspect of one project. `instruction` is None for a derived aspect;
    `version` counts from 1 without gaps."""

    project: str
    name: str
    label: str
    description: str
    instruction: str | None
    derived: bool
    built_in: bool
    enabled: bool
    sort_order: int
    version: int
    created_at: int
