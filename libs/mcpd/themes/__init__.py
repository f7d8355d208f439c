"""What theme discovery computes from aspect notes, as pure functions of their text: the
wording sketch stored with each note (`sketch`), the themes of a set of notes (`clustering`),
and how themes keep their ids from one snapshot to the next (`evolution`). Integer arithmetic
only, so every replica computes the same answer from the same notes."""

from mcpd.themes.clustering import Clustering, Note, Theme, cluster
from mcpd.themes.evolution import (
    LINK_COVERAGE,
    REPRESENTATIVES,
    Ending,
    EndState,
    Evolution,
    Evolved,
    Found,
    RowState,
    Wording,
    affinity,
    evolve,
    representatives,
)
from mcpd.themes.sketch import (
    BANDS,
    POSITIONS,
    SKETCH_VERSION,
    Sketch,
    band_keys,
    decode,
    deployment_key,
    encode,
    shingles,
    similarity,
    sketch_of,
)

__all__ = [
    "BANDS",
    "LINK_COVERAGE",
    "POSITIONS",
    "REPRESENTATIVES",
    "SKETCH_VERSION",
    "Clustering",
    "EndState",
    "Ending",
    "Evolution",
    "Evolved",
    "Found",
    "Note",
    "RowState",
    "Sketch",
    "Theme",
    "Wording",
    "affinity",
    "band_keys",
    "cluster",
    "decode",
    "deployment_key",
    "encode",
    "evolve",
    "representatives",
    "shingles",
    "similarity",
    "sketch_of",
]
