"""What an aspect says, apart from which version of it is stored: the four built-ins and the
rules every definition keeps."""

from __future__ import annotations

import re
from dataclasses import dataclass

from mcpd.storage.aspect_records import AspectRecord

__all__ = [
    "BUILT_INS",
    "BUILT_IN_NAMES",
    "CUSTOM_SORT_ORDER",
    "MAX_INSTRUCTION_BYTES",
    "MAX_SORT_ORDER",
    "NAME",
    "AspectDefinition",
]

# What a note is filed under and every query parameter names.
NAME = re.compile(r"[a-z][a-z0-9_]{0,63}")
MAX_INSTRUCTION_BYTES = 2000
MAX_SORT_ORDER = 2**32 - 1
# Where a custom aspect sits unless it says: after the built-ins, which leave gaps between them
# so one can also be placed among them.
CUSTOM_SORT_ORDER = 100


@dataclass(frozen=True, slots=True)
class AspectDefinition:
    """One aspect as configured. Two definitions that are equal are one stored version."""

    name: str
    label: str
    description: str
    instruction: str | None
    derived: bool = False
    enabled: bool = True
    sort_order: int = CUSTOM_SORT_ORDER

    @classmethod
    def of(cls, record: AspectRecord) -> AspectDefinition:
        """The definition a stored version holds."""
        return cls(
            name=record.name,
            label=record.label,
            description=record.description,
            instruction=record.instruction,
            derived=record.derived,
            enabled=record.enabled,
            sort_order=record.sort_order,
        )

    def stored_as(self, project: str, version: int, created_at: int) -> AspectRecord:
        """This definition stored as `version` of the project's aspect."""
        return AspectRecord(
            project=project,
            name=self.name,
            label=self.label,
            description=self.description,
            instruction=self.instruction,
            derived=self.derived,
            built_in=self.name in BUILT_IN_NAMES,
            enabled=self.enabled,
            sort_order=self.sort_order,
            version=version,
            created_at=created_at,
        )


# Every project has these, seeded as ordinary rows. The instructions ask for one plain sentence
# without names or figures: clustering compares wording, so notes that say the same thing in
# the same everyday words land in one theme, and a sentence with no detail in it leaks none.
BUILT_INS = (
    AspectDefinition(
        name="goal",
        label="Goal",
        description="What the user wanted",
        instruction=(
            "Write one short, plain sentence saying what the user wanted from this interaction,"
            " in everyday words and without names, numbers or quotes. Describe the need itself,"
            " not how it was phrased, and do not judge whether it was met."
        ),
        sort_order=10,
    ),
    AspectDefinition(
        name="sentiment",
        label="Sentiment",
        description="The tone they expressed",
        instruction=(
            "Write one short, plain sentence saying what tone the user expressed (for example"
            " frustrated, satisfied, confused or neutral) and what it was about, without names,"
            " numbers or quotes. Go only by what the user's own words show."
        ),
        sort_order=20,
    ),
    AspectDefinition(
        name="behaviour",
        label="Behaviour",
        description="What the agent did about it",
        instruction=(
            "Write one short, plain sentence saying what the agent did about the user's request:"
            " the action it took or the answer it gave, in everyday words and without names,"
            " numbers or quotes. Describe what it did, not whether it was right."
        ),
        sort_order=30,
    ),
    # Written by the daemon from the run itself, so no model is handed an instruction.
    AspectDefinition(
        name="outcome",
        label="Outcome",
        description="How the interaction ended",
        instruction=None,
        derived=True,
        sort_order=40,
    ),
)
BUILT_IN_NAMES = frozenset(definition.name for definition in BUILT_INS)
