"""Aspects: the axes traces are described along, and the catalogue of them each project has.

The four built-ins (goal, sentiment, behaviour, outcome) are ordinary rows of the control
store's `aspects` table, seeded for a project when it is first read; `intelligence.aspects_file`
adds custom aspects and changes the built-ins. Editing a definition stores a new version and
never changes a stored one. The intelligence service answers the catalogue from here, and
ingest checks a note's aspect and version against it: both read the same rows, so they cannot
disagree about what exists.
"""

from mcpd.aspects.catalogues import AspectCatalogues, open_catalogues, sync_aspects
from mcpd.aspects.config import SETTING, AspectConfig, load_aspects_file
from mcpd.aspects.definitions import (
    BUILT_IN_NAMES,
    BUILT_INS,
    CUSTOM_SORT_ORDER,
    MAX_INSTRUCTION_BYTES,
    AspectDefinition,
)

__all__ = [
    "BUILT_INS",
    "BUILT_IN_NAMES",
    "CUSTOM_SORT_ORDER",
    "MAX_INSTRUCTION_BYTES",
    "SETTING",
    "AspectCatalogues",
    "AspectConfig",
    "AspectDefinition",
    "load_aspects_file",
    "open_catalogues",
    "sync_aspects",
]
