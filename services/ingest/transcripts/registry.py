"""Which parser reads which harness.

One shared instance per parser: parsers keep no state between files (each `parse` call builds
its own), so the tailer's worker thread and `mcpd import` can reuse them.
"""

from __future__ import annotations

from mcpd.runtime.errors import InvalidArgument
from services.ingest.transcripts.parsers._common import Parser
from services.ingest.transcripts.parsers.claude_code import ClaudeCodeParser
from services.ingest.transcripts.parsers.codex import CodexParser
from services.ingest.transcripts.parsers.cursor import CursorParser
from services.ingest.transcripts.parsers.kimi_cli import KimiCliParser
from services.ingest.transcripts.parsers.pi import PiParser
from services.ingest.transcripts.parsers.prime_agent import PrimeAgentParser
from services.ingest.transcripts.parsers.qwen_code import QwenCodeParser

__all__ = ["harnesses", "parser_for"]

_PARSERS: dict[str, Parser] = {
    parser.harness: parser
    for parser in (
        CodexParser(),
        ClaudeCodeParser(),
        QwenCodeParser(),
        CursorParser(),
        KimiCliParser(),
        PiParser(),
        PrimeAgentParser(),
    )
}


def harnesses() -> tuple[str, ...]:
    """The harnesses with a parser, sorted."""
    return tuple(sorted(_PARSERS))


def parser_for(harness: str) -> Parser:
    """The parser of `harness`. Raises InvalidArgument naming the valid harnesses."""
    try:
        return _PARSERS[harness]
    except KeyError:
        raise InvalidArgument(
            f"no transcript parser for harness {harness!r}; choose from {', '.join(harnesses())}",
            field="harness",
        ) from None
