"""Scoring passes: scorers run over runs already stored, never inline with a user's request.

A pass (`ScoreRunRequest`) names its runs by `trace_ids`, which win, or takes the project's
newest runs started at or after `from` (all of them without it), up to `limit` (100 unless
set, at most `MAX_TRACES`). Each run is read whole from the query service; each scorer asked
for (by default every scorer that needs no configuration) answers a `Verdict` or declines
with its reason, which the result lists as a SkippedScorer; a run that is not stored is
declined by every scorer, saying so.

The judged scorer, `llm_judge` (`services.evaluation.judge`), is awaited: one call per run, at
most `judge_concurrency` at once. A pass that includes it with a judge configured takes only as
many runs as fit in the request's deadline: with `time_left` seconds left, each call taking up to
`judge_timeout_s`, that is floor(time_left * judge_concurrency / judge_timeout_s) runs. Unset,
`limit` is that many (at most `MAX_TRACES`); a `limit` or `trace_ids` naming more is refused,
naming the field and the cap. Without a deadline the usual limits apply. When the pass's config
gives the judge no rubric, a run of an experiment is judged against the `rubric` of that
experiment's metadata, if it has one (`rubrics`).

Every verdict becomes a Score with the pass's `source` (`offline` when unset: scored later,
from storage), the scorer's id and version, `min` and `max`, the verdict's cost and metadata
(the judge's), and the correlation of the run it scores. Its id is derived from the run, the
scorer and its version, the configuration, the source and the verdict's metadata (the judge's
model), and the batch's ingest key from the ids, so a pass run again over the same runs stores
nothing twice. Scores are written through the ingest service, with its validation, redaction
and the traces' score summaries; `dry_run` writes nothing and answers the same scores.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import math
from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Protocol

from google.protobuf import json_format
from google.protobuf.timestamp_pb2 import Timestamp

from mcpd.model.v1 import enums_pb2, evaluation_pb2, query_pb2, telemetry_pb2
from mcpd.runtime.clock import Clock, to_timestamp
from mcpd.runtime.errors import InvalidArgument, quoted
from services.evaluation.judge import LlmJudge
from services.evaluation.scorers import SCORERS, Declined, Scorer, Verdict, without_config

__all__ = ["DEFAULT_LIMIT", "MAX_TRACES", "ScoreWrites", "Scoring", "TraceReads"]

DEFAULT_LIMIT = 100
MAX_TRACES = 1000
# Runs read at once from the query service.
READ_AHEAD = 8

AnyScorer = Scorer | LlmJudge


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


class ExperimentRubrics(Protocol):
    """The rubric an experiment's metadata gives the judge (`rubric`), if any."""

    async def rubric(self, project: str, experiment_id: str) -> str | None: ...


class Scoring:
    """Scoring passes over one project's stored runs (see the module docstring); `judge` is the
    judged scorer (one without a judge configured when not given), `rubrics` the experiments'
    rubrics it falls back on."""

    def __init__(
        self,
        traces: TraceReads,
        writes: ScoreWrites,
        clock: Clock,
        judge: LlmJudge | None = None,
        rubrics: ExperimentRubrics | None = None,
    ) -> None:
        self._traces = traces
        self._writes = writes
        self._clock = clock
        self._rubrics = rubrics
        self._judge = judge if judge is not None else LlmJudge(None)
        every: dict[str, AnyScorer] = {**SCORERS, self._judge.id: self._judge}
        self.scorers: Mapping[str, AnyScorer] = MappingProxyType(dict(sorted(every.items())))

    async def run(
        self, request: evaluation_pb2.ScoreRunRequest, *, time_left: float | None = None
    ) -> evaluation_pb2.ScoreRunResult:
        """The pass `request` asks for; `time_left` is what remains of the request's deadline,
        in seconds (None: no deadline), which caps a judged pass."""
        scorers = self._scorers(request.scorers)
        judging = self._judge in scorers
        trace_ids = await self._targets(request, self._cap(time_left) if judging else None)
        details = await _read_all(self._traces, request.project, trace_ids)
        judged = iter(await self._judged(request, details) if judging else [])
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
                if isinstance(scorer, LlmJudge):
                    verdict = next(judged)
                else:
                    verdict = scorer.score(detail, request.config)
                if isinstance(verdict, Declined):
                    result.skipped.append(
                        evaluation_pb2.SkippedScorer(
                            scorer_id=scorer.id, trace_id=trace_id, reason=verdict.reason
                        )
                    )
                    continue
                result.scores.append(
                    _score(request, trace_id, detail, scorer, verdict, source, now)
                )
        if result.scores and not request.dry_run:
            ids = sorted(score.score_id for score in result.scores)
            key = hashlib.sha256("\n".join(ids).encode()).hexdigest()
            result.scores_written = await self._writes.write(result.scores, ingest_key=key)
        return result

    def _scorers(self, ids: Sequence[str]) -> list[AnyScorer]:
        """The scorers named, each once, in the order named; every scorer needing no
        configuration when none is."""
        if not ids:
            return list(without_config())
        unknown = [scorer_id for scorer_id in ids if scorer_id not in self.scorers]
        if unknown:
            raise InvalidArgument(
                f"no scorer {quoted(unknown[0])}; the scorers are {', '.join(self.scorers)}",
                field="scorers",
            )
        return [self.scorers[scorer_id] for scorer_id in dict.fromkeys(ids)]

    def _cap(self, time_left: float | None) -> _Cap | None:
        """How many runs the judge can judge in `time_left` seconds; None when nothing caps a
        pass (no deadline, or no judge configured, so no call to wait for)."""
        endpoint = self._judge.endpoint
        if time_left is None or endpoint is None:
            return None
        runs = math.floor(time_left * endpoint.concurrency / endpoint.timeout_s)
        return _Cap(max(runs, 0), time_left, endpoint.timeout_s, endpoint.concurrency)

    async def _judged(
        self,
        request: evaluation_pb2.ScoreRunRequest,
        details: Sequence[query_pb2.TraceDetail | None],
    ) -> list[Verdict | Declined]:
        """The judge's answer on every stored run, in order."""
        stored = [detail for detail in details if detail is not None]
        rubrics: dict[str, str] = {}
        if self._rubrics is not None and not request.config.HasField("rubric"):
            experiments = {d.trace.correlation.experiment_id for d in stored} - {""}
            found = {e: await self._rubrics.rubric(request.project, e) for e in experiments}
            for detail in stored:
                rubric = found.get(detail.trace.correlation.experiment_id)
                if rubric is not None:
                    rubrics[detail.trace.trace_id] = rubric
        return await self._judge.judge_runs(
            request.project, stored, request.config, rubrics=rubrics
        )

    async def _targets(
        self, request: evaluation_pb2.ScoreRunRequest, cap: _Cap | None
    ) -> list[str]:
        """The runs the pass scores, in order, each once, no more than `cap` allows."""
        if request.trace_ids:
            named = list(dict.fromkeys(request.trace_ids))
            if len(named) > MAX_TRACES:
                raise InvalidArgument(
                    f"trace_ids names {len(named)} runs; a pass scores at most {MAX_TRACES}",
                    field="trace_ids",
                )
            if cap is not None:
                cap.check(len(named), "trace_ids")
            return named
        since = getattr(request, "from") if request.HasField("from") else None
        return await self._traces.newest(request.project, since=since, limit=_limit(request, cap))


def _limit(request: evaluation_pb2.ScoreRunRequest, cap: _Cap | None) -> int:
    """How many of the newest runs the pass takes."""
    if request.HasField("limit"):
        if not 1 <= request.limit <= MAX_TRACES:
            raise InvalidArgument(f"limit must be 1 to {MAX_TRACES}", field="limit")
        if cap is not None:
            cap.check(request.limit, "limit")
        return request.limit
    if cap is None:
        return DEFAULT_LIMIT
    if cap.runs == 0:
        raise InvalidArgument(
            cap.explained("fits no run") + ": give the request a longer deadline", field="limit"
        )
    return min(cap.runs, MAX_TRACES)


class _Cap:
    """The most runs a judged pass fits in what is left of its request's deadline."""

    __slots__ = ("concurrency", "runs", "time_left", "timeout_s")

    def __init__(self, runs: int, time_left: float, timeout_s: float, concurrency: int) -> None:
        self.runs = runs
        self.time_left = time_left
        self.timeout_s = timeout_s
        self.concurrency = concurrency

    def check(self, asked: int, field: str) -> None:
        """Refuse a pass whose `field` names more runs than fit."""
        if asked > self.runs:
            fit = f"fits {self.runs} {'run' if self.runs == 1 else 'runs'}"
            raise InvalidArgument(
                f"{self.explained(fit)}; {field} names {asked}: name at most {self.runs}, or "
                "give the request a longer deadline",
                field=field,
            )

    def explained(self, fit: str) -> str:
        """Why a pass `fit`s so many runs: the time left, the judge's timeout and concurrency."""
        return (
            f"a pass with llm_judge {fit} in the {self.time_left:.1f} s left of the request's "
            f"deadline (each judge call may take {self.timeout_s:g} s, "
            f"{self.concurrency} at once)"
        )


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
    scorers: Sequence[AnyScorer], trace_id: str, reason: str
) -> list[evaluation_pb2.SkippedScorer]:
    return [
        evaluation_pb2.SkippedScorer(scorer_id=scorer.id, trace_id=trace_id, reason=reason)
        for scorer in scorers
    ]


def _score(
    request: evaluation_pb2.ScoreRunRequest,
    trace_id: str,
    detail: query_pb2.TraceDetail,
    scorer: AnyScorer,
    verdict: Verdict,
    source: enums_pb2.ScoreSource.ValueType,
    now: Timestamp,
) -> telemetry_pb2.Score:
    """The Score a verdict on run `trace_id` (its `detail`) is stored as."""
    score = telemetry_pb2.Score(
        score_id=_score_id(request, trace_id, scorer, source, verdict.metadata),
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
    if verdict.cost is not None:
        score.cost.CopyFrom(verdict.cost)
    if verdict.metadata is not None:
        score.metadata.struct_value.update(verdict.metadata)
    score.correlation.CopyFrom(detail.trace.correlation)
    score.correlation.project = request.project
    return score


def _score_id(
    request: evaluation_pb2.ScoreRunRequest,
    trace_id: str,
    scorer: AnyScorer,
    source: enums_pb2.ScoreSource.ValueType,
    metadata: Mapping[str, str] | None,
) -> str:
    """The same for the same run, scorer version, configuration, source and metadata (the
    judge's model: another judge is another measurement)."""
    config = json_format.MessageToJson(request.config, sort_keys=True, indent=None)
    parts = [request.project, trace_id, scorer.id, scorer.version, str(source), config]
    if metadata is not None:
        parts.append(json.dumps(metadata, sort_keys=True, separators=(",", ":")))
    return hashlib.sha256("\x1f".join(parts).encode()).hexdigest()[:32]
