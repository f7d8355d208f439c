"""Transcripts sent to the daemon by `mcpd import`, imported as a local import would.

The daemon that owns a data directory is the one writer of its search index, so `mcpd import`
hands it the files it reads (their complete lines; the daemon never opens a path it is sent)
instead of writing beside it. The result is the same as an offline import of the same files:
the same importer, parser, redaction and session ids.

Blocking (parsing, the store): async callers run it in a thread.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from mcpd.redaction import Redactor
from mcpd.runtime.errors import InvalidArgument
from services.ingest.transcripts.importer import CanWriteSessions, Importer, ImportOutcome
from services.ingest.transcripts.registry import harnesses
from services.ingest.transcripts.sources import Source

__all__ = ["TranscriptImports"]


class TranscriptImports:
    """Imports transcripts into any project's read model, with that project's redaction."""

    def __init__(self, sessions: CanWriteSessions, redactor_of: Callable[[str], Redactor]) -> None:
        self._sessions = sessions
        self._redactor_of = redactor_of

    def import_lines(
        self,
        project: str,
        *,
        harness: str,
        source: str,
        name: str,
        lines: list[str],
        modified_at: datetime,
    ) -> ImportOutcome:
        """Import the complete `lines` of transcript `name`; InvalidArgument naming the field
        for an unknown harness or a blank source."""
        known = harnesses()
        if harness not in known:
            raise InvalidArgument(
                f"unknown harness {harness!r}; valid: {', '.join(known)}", field="harness"
            )
        if not source.strip():
            raise InvalidArgument("a source name is required", field="source")
        importer = Importer(self._sessions, project=project, redactor=self._redactor_of(project))
        return importer.import_lines(name, lines, modified_at, Source(source, harness, ""))
