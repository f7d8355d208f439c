"""Scoring passes: scorers run over runs already stored, never inline with a user's request.

A pass (`ScoreRunRequest`) names its runs by `trace_ids`, which win, or takes the project's
newest runs started at or after `from` (all of them without it), up to `limit` (100 unless
set, at most `MAX_TRACES`). Each run is read whole from the query service; each scorer asked
for (by default every scorer that needs no configuration) answers a `Verdict` or declines
with its reason, which the result lists as a SkippedScorer; a run that is not stored is
declined by every scorer, saying so.

Every verdict becomes a Score with the pass's `source` (`offline` when unset: scored later,
from storage), the scorer's id and version, `min` and `max`, and the correlation of the run it
scores. Its id is derived from the run, the scorer and its version, the configuration and the
source, and the batch's ingest key from the ids, so a pass run again over the same runs stores
nothing twice. Scores are written through the ingest service, with its validation, redaction
and the traces' score summaries; `dry_run` writes nothing and answers the same scores.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Sequence
from typing import Protocol

from google.protobuf import json_format
from google.protobuf.timestamp_pb2 import Timestamp

from mcpd.model.v1 import enums_pb2, evaluation_pb2, query_pb2, telemetry_pb2
from mcpd.runtime.clock import Clock, to_timestamp
from mcpd.runtime.errors import InvalidArgument, quoted
from services.evaluation.scorers import SCORERS, Declined, Scorer, without_config

__all__ = ["DEFAULT_LIMIT", "MAX_TRACES", "ScoreWrites", "Scoring", "TraceReads"]

DEFAULT_LIMIT = 100
MAX_TRACES = 1000
# Runs read at once from the query service.
READ_AHEAD = 8


class TraceReads(Protocol):
    """The stored runs a pass scores (the query service)."""

    async def newest(self, project: str, *, since: Timestamp | None, limit: int) -> list[str]:
        """Up to `limit` trace ids of the project, newest first, started at or after `since`."""
        ...

    async def detail(self, project: str, trace_id: str) -> query_pb2.TraceDetail | None:
        """The run with its spans, or None when it is not stored."""
        ...


class ScoreWrites(Protocol):
    """Where scores are stored (the ingest service)."""

    async def write(self, scores: Sequence[telemetry_pb2.Score], *, ingest_key: str) -> int:
        """Store `scores` as one idempotent batch; how many are stored (a repeat counts)."""
        ...


class Scoring:
    """Scoring passes over one project's stored runs (see the module docstring)."""

    def __init__(self, traces: TraceReads, writes: ScoreWrites, clock: Clock) -> None:
        self._traces = traces
        self._writes = writes
        self._clock = clock

    async def run(self, request: evaluation_pb2.ScoreRunRequest) -> evaluation_pb2.ScoreRunResult:
        scorers = _scorers(request.scorers)
        trace_ids = await self._targets(request)
        details = await _read_all(self._traces, request.project, trace_ids)
        result = evaluation_pb2.ScoreRunResult()
        source = request.source or enums_pb2.SCORE_SOURCE_OFFLINE
        now = to_timestamp(self._clock.now())
        for trace_id, detail in zip(trace_ids, details, strict=True):
            if detail is None:
                reason = f"no trace {quoted(trace_id)} is stored in this project"
                result.skipped.extend(_skips(scorers, trace_id, reason))
                continue
            result.traces_scored += 1
            for scorer in scorers:
                verdict = scorer.score(detail, request.config)
                if isinstance(verdict, Declined):
                    result.skipped.append(
                        evaluation_pb2.SkippedScorer(
                            scorer_id=scorer.id, trace_id=trace_id, reason=verdict.reason
                        )
                    )
                    continue
                score = telemetry_pb2.Score(
                    score_id=_score_id(request, trace_id, scorer, source),
                    trace_id=trace_id,
                    scorer_id=scorer.id,
                    scorer_version=scorer.version,
                    source=source,
                    value=verdict.value,
                    min=verdict.min,
                    max=verdict.max,
                    label=verdict.label,
                    reason=verdict.reason,
                    timestamp=now,
                )
                score.correlation.CopyFrom(detail.trace.correlation)
                score.correlation.project = request.project
                result.scores.append(score)
        if result.scores and not request.dry_run:
            ids = sorted(score.score_id for score in result.scores)
            key = hashlib.sha256("\n".join(ids).encode()).hexdigest()
            result.scores_written = await self._writes.write(result.scores, ingest_key=key)
        return result

    async def _targets(self, request: evaluation_pb2.ScoreRunRequest) -> list[str]:
        """The runs the pass scores, in order, each once."""
        if request.trace_ids:
            named = list(dict.fromkeys(request.trace_ids))
            if len(named) > MAX_TRACES:
                raise InvalidArgument(
                    f"trace_ids names {len(named)} runs; a pass scores at most {MAX_TRACES}",
                    field="trace_ids",
                )
            return named
        limit = request.limit if request.HasField("limit") else DEFAULT_LIMIT
        if not 1 <= limit <= MAX_TRACES:
            raise InvalidArgument(f"limit must be 1 to {MAX_TRACES}", field="limit")
        since = getattr(request, "from") if request.HasField("from") else None
        return await self._traces.newest(request.project, since=since, limit=limit)


def _scorers(ids: Sequence[str]) -> list[Scorer]:
    """The scorers named, each once, in the order named; every scorer needing no
    configuration when none is."""
    if not ids:
        return without_config()
    unknown = [scorer_id for scorer_id in ids if scorer_id not in SCORERS]
    if unknown:
        raise InvalidArgument(
            f"no scorer {quoted(unknown[0])}; the scorers are {', '.join(SCORERS)}",
            field="scorers",
        )
    return [SCORERS[scorer_id] for scorer_id in dict.fromkeys(ids)]


async def _read_all(
    traces: TraceReads, project: str, trace_ids: Sequence[str]
) -> list[query_pb2.TraceDetail | None]:
    """Every run's detail, READ_AHEAD at a time, in the order asked."""
    gate = asyncio.Semaphore(READ_AHEAD)

    async def read(trace_id: str) -> query_pb2.TraceDetail | None:
        async with gate:
            return await traces.detail(project, trace_id)

    return list(await asyncio.gather(*(read(trace_id) for trace_id in trace_ids)))


def _skips(
    scorers: Sequence[Scorer], trace_id: str, reason: str
) -> list[evaluation_pb2.SkippedScorer]:
    return [
        evaluation_pb2.SkippedScorer(scorer_id=scorer.id, trace_id=trace_id, reason=reason)
        for scorer in scorers
    ]


def _score_id(
    request: evaluation_pb2.ScoreRunRequest,
    trace_id: str,
    scorer: Scorer,
    source: enums_pb2.ScoreSource.ValueType,
) -> str:
    """The same for the same run, scorer version, configuration and source."""
    config = json_format.MessageToJson(request.config, sort_keys=True, indent=None)
    parts = (request.project, trace_id, scorer.id, scorer.version, str(source), config)
    return hashlib.sha256("\x1f".join(parts).encode()).hexdigest()[:32]
