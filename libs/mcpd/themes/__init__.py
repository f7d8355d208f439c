"""What theme discovery computes from aspect notes, as pure functions of their text: the
wording sketch stored with each note (`sketch`) and the themes of a set of notes
(`clustering`). Integer arithmetic only, so every replica computes the same answer from the same
notes."""

from mcpd.themes.clustering import Clustering, Note, Theme, cluster
from mcpd.themes.sketch import (
    BANDS,
    POSITIONS,
    SKETCH_VERSION,
    Sketch,
    band_keys,
    shingles,
    similarity,
    sketch_of,
)

__all__ = [
    "BANDS",
    "POSITIONS",
    "SKETCH_VERSION",
    "Clustering",
    "Note",
    "Sketch",
    "Theme",
    "band_keys",
    "cluster",
    "shingles",
    "similarity",
    "sketch_of",
]
