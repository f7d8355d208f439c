"""Agent transcripts (Codex, Claude Code, ...) read into the session read model.

The names below are what the composition root (`mcpd serve`, `mcpd import`) builds tailing and
importing from; the parsers and the assembly of sessions are this package's own.
"""

from services.ingest.transcripts.checkpoints import CheckpointFile
from services.ingest.transcripts.importer import (
    Importer,
    ImportOutcome,
    IngestError,
    read_complete_lines,
)
from services.ingest.transcripts.imports import TranscriptImports
from services.ingest.transcripts.registry import harnesses
from services.ingest.transcripts.sources import Source, default_source_name, resolve_sources
from services.ingest.transcripts.tailer import Tailer
from services.ingest.transcripts.watcher import WatchMode

__all__ = [
    "CheckpointFile",
    "ImportOutcome",
    "Importer",
    "IngestError",
    "Source",
    "Tailer",
    "TranscriptImports",
    "WatchMode",
    "default_source_name",
    "harnesses",
    "read_complete_lines",
    "resolve_sources",
]
