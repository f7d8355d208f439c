"""The judged scorer, `llm_judge`: a model grades a run's answer against a rubric.

The judge is an OpenAI-compatible chat-completions endpoint the operator configures
(`[evaluation]`: `judge_url`, `judge_model`, the key in `judge_key_file`). For each run the scorer
POSTs to `{judge_url}/chat/completions`, with `temperature: 0` and `response_format:
{"type": "json_object"}`, a system message carrying the instructions and `config.rubric`, and a
user message carrying the run's input (its root span's input) and answer (its root span's
output). The key goes in an `Authorization: Bearer` header and nowhere else: not in a repr, a log
record or a reason.

The reply's message content must be a JSON object with a number `score` from 0 to 1 and a
non-empty string `reason`; other keys are ignored. The verdict is that score (`min` 0, `max` 1),
`pass` from 0.5 up and `fail` below, with the judge's reason. Anything else declines, saying what
went wrong, and never raises out of a pass: no judge configured, no rubric, no answer in the run,
an HTTP error status, no answer within `judge_timeout_s`, a reply that is not that shape, a score
outside 0..1. A score is never guessed from a reply that does not say it.

The call's token usage (`usage.prompt_tokens`, `usage.completion_tokens`, and the cached and
reasoning tokens among them) is priced for `judge_model` with the project's price book (the
shipped book under the project's own overrides, as ingest prices spans); the cost goes on the
score, estimated and naming the book, and is absent when the book cannot price the model or the
reply reports no usage. The judge's model is recorded in the score's metadata.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import stat
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn

import httpx

from mcpd.model.v1 import evaluation_pb2, query_pb2, telemetry_pb2
from mcpd.pricing import PriceBook, load_price_book, price
from mcpd.runtime.config import EvaluationSettings
from mcpd.runtime.errors import FailedPrecondition
from mcpd.runtime.logging import redact_url
from mcpd.signals.messages import python_of
from mcpd.storage.interfaces import PriceOverrides
from services.evaluation.scorers import (
    CannotScoreError,
    Declined,
    Verdict,
    as_text,
    decline,
    quoted_text,
    root_span,
    run_answer,
)

__all__ = ["JUDGE_ID", "JudgeEndpoint", "LlmJudge", "judge_endpoint"]

log = logging.getLogger("mcpd.evaluation")

JUDGE_ID = "llm_judge"
VERSION = "1"
PASS_FROM = 0.5
NO_JUDGE = "no judge is configured: set evaluation.judge_url and evaluation.judge_model"
INSTRUCTIONS = (
    "You grade the answer an AI agent gave to its input, against the rubric below. Reply with "
    'only a JSON object: {"score": <a number from 0 to 1, 1 when the answer fully meets the '
    'rubric and 0 when it does not meet it at all>, "reason": "<why, in a sentence or two>"}.'
)


def _with_rubric(
    config: evaluation_pb2.ScorerConfig,
    detail: query_pb2.TraceDetail,
    rubrics: Mapping[str, str] | None,
) -> evaluation_pb2.ScorerConfig:
    """`config`, with the run's own rubric when it gives none and the run has one."""
    rubric = (rubrics or {}).get(detail.trace.trace_id)
    if config.HasField("rubric") or rubric is None:
        return config
    given = evaluation_pb2.ScorerConfig()
    given.CopyFrom(config)
    given.rubric = rubric
    return given


@dataclass(frozen=True, slots=True)
class JudgeEndpoint:
    """Where the judge is and how it is called; the key never shows in a repr."""

    url: str
    model: str
    timeout_s: float
    concurrency: int
    key: str | None = field(default=None, repr=False)

    @property
    def completions_url(self) -> str:
        """Where a judgement is asked for."""
        return self.url.rstrip("/") + "/chat/completions"


def judge_endpoint(settings: EvaluationSettings) -> JudgeEndpoint | None:
    """The judge `settings` configure, its key read from `judge_key_file` now (at start), or
    None when none is. Raises FailedPrecondition naming the key when the file cannot be used."""
    if settings.judge_url is None or settings.judge_model is None:
        return None
    key = None if settings.judge_key_file is None else _read_key(settings.judge_key_file)
    return JudgeEndpoint(
        url=settings.judge_url,
        model=settings.judge_model,
        timeout_s=settings.judge_timeout_s,
        concurrency=settings.judge_concurrency,
        key=key,
    )


def _read_key(path: Path) -> str:
    def refuse(problem: str) -> NoReturn:
        raise FailedPrecondition(
            f"evaluation.judge_key_file {path}: {problem}", field="evaluation.judge_key_file"
        )

    try:
        text = path.read_text(encoding="utf-8")
        mode = path.stat().st_mode
    except OSError as exc:
        refuse(f"cannot read the judge's key: {exc.strerror}")
    except UnicodeDecodeError:
        refuse("the judge's key is not UTF-8 text")
    key = text.strip()
    if not key or any(char.isspace() for char in key):
        refuse("expected the judge's API key alone on one line")
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        log.warning(
            "the judge's key file is readable by other users; chmod 600 it",
            extra={"path": str(path)},
        )
    return key


class JudgePrices:
    """The price book a project's judge calls are priced with: the shipped book under the
    project's own overrides (read from the control store once per pass)."""

    def __init__(self, overrides: PriceOverrides | None, book: PriceBook | None = None) -> None:
        self._overrides = overrides
        self._book = book if book is not None else load_price_book()

    async def book(self, project: str) -> PriceBook:
        """The project's book; reading its overrides blocks, so it runs in a thread."""
        if self._overrides is None:
            return self._book
        found = await asyncio.to_thread(self._overrides.price_overrides, project)
        return self._book.with_overrides(found, name=project) if found else self._book


class LlmJudge:
    """The judged scorer (see the module docstring); `endpoint` None is no judge configured."""

    __slots__ = ("_endpoint", "_prices", "description", "id", "needs_config", "version")

    def __init__(self, endpoint: JudgeEndpoint | None, prices: JudgePrices | None = None) -> None:
        self.id = JUDGE_ID
        self.version = VERSION
        self.description = (
            "How well the run's answer meets a rubric, graded 0 to 1 by an LLM judge."
        )
        self.needs_config = True
        self._endpoint = endpoint
        self._prices = prices if prices is not None else JudgePrices(None)

    @property
    def endpoint(self) -> JudgeEndpoint | None:
        """The configured judge, or None."""
        return self._endpoint

    async def judge_runs(
        self,
        project: str,
        details: Sequence[query_pb2.TraceDetail],
        config: evaluation_pb2.ScorerConfig,
        *,
        rubrics: Mapping[str, str] | None = None,
    ) -> list[Verdict | Declined]:
        """A verdict or a decline per run, in order; at most `judge_concurrency` calls at once,
        over one HTTP client for the pass. `rubrics` (by trace id) grade a run when `config`
        gives no rubric (its experiment's)."""
        endpoint = self._endpoint
        if endpoint is None:
            return [Declined(NO_JUDGE) for _ in details]
        if not details:
            return []
        book = await self._prices.book(project)
        gate = asyncio.Semaphore(endpoint.concurrency)
        limits = httpx.Limits(max_connections=endpoint.concurrency)
        async with httpx.AsyncClient(timeout=endpoint.timeout_s, limits=limits) as client:
            call = _Call(endpoint, client, book)

            async def one(detail: query_pb2.TraceDetail) -> Verdict | Declined:
                async with gate:
                    return await call.judge(detail, _with_rubric(config, detail, rubrics))

            return list(await asyncio.gather(*(one(detail) for detail in details)))

    def __repr__(self) -> str:
        model = self._endpoint.model if self._endpoint is not None else "no judge"
        return f"<scorer {self.id} v{self.version} ({model})>"


@dataclass(frozen=True, slots=True)
class _Call:
    """Judge calls of one pass."""

    endpoint: JudgeEndpoint
    client: httpx.AsyncClient
    book: PriceBook

    async def judge(
        self, detail: query_pb2.TraceDetail, config: evaluation_pb2.ScorerConfig
    ) -> Verdict | Declined:
        try:
            request = _request(self.endpoint.model, detail, config)
            reply = await self._post(request)
            score, reason = _judgement(reply)
        except CannotScoreError as declined:
            return Declined(str(declined))
        return Verdict(
            score,
            0.0,
            1.0,
            "pass" if score >= PASS_FROM else "fail",
            reason,
            cost=_cost(reply.get("usage"), self.endpoint.model, self.book),
            metadata={"judge_model": self.endpoint.model},
        )

    async def _post(self, request: Mapping[str, Any]) -> Mapping[str, Any]:
        endpoint = self.endpoint
        headers = {} if endpoint.key is None else {"authorization": f"Bearer {endpoint.key}"}
        try:
            async with asyncio.timeout(endpoint.timeout_s):
                answer = await self.client.post(
                    endpoint.completions_url, json=request, headers=headers
                )
        except (TimeoutError, httpx.TimeoutException):
            self._warn("did not answer in time")
            decline(
                f"the judge did not answer within {endpoint.timeout_s:g} s "
                "(evaluation.judge_timeout_s)"
            )
        except httpx.HTTPError as error:
            self._warn(f"could not be reached ({type(error).__name__})")
            decline(f"the judge could not be reached ({type(error).__name__})")
        if answer.status_code != httpx.codes.OK:
            self._warn(f"answered HTTP {answer.status_code}")
            decline(f"the judge answered HTTP {answer.status_code}")
        try:
            body = answer.json()
        except ValueError:
            decline("the judge's reply is not JSON")
        if not isinstance(body, Mapping):
            decline("the judge's reply is not a JSON object")
        return body

    def _warn(self, what: str) -> None:
        log.warning(
            "the judge %s",
            what,
            extra={"judge_url": redact_url(self.endpoint.url), "judge_model": self.endpoint.model},
        )


def _request(
    model: str, detail: query_pb2.TraceDetail, config: evaluation_pb2.ScorerConfig
) -> dict[str, Any]:
    """The chat-completions request that asks the judge about this run."""
    rubric = config.rubric.strip() if config.HasField("rubric") else ""
    if not rubric:
        decline("no rubric was given: llm_judge needs config.rubric, what the judge grades against")
    answer = as_text(run_answer(detail))
    return {
        "model": model,
        "temperature": 0,
        "response_format": {"type": "json_object"},
        "messages": [
            {"role": "system", "content": f"{INSTRUCTIONS}\n\nRubric:\n{rubric}"},
            {
                "role": "user",
                "content": f"The run's input:\n{_input(detail)}\n\nThe run's answer:\n{answer}",
            },
        ],
    }


def _input(detail: query_pb2.TraceDetail) -> str:
    root = root_span(detail)
    if root is None or not root.HasField("input") or root.input.WhichOneof("kind") is None:
        return "(none was recorded)"
    return as_text(python_of(root.input))


def _refuse_constant(name: str) -> NoReturn:
    raise ValueError(f"{name} is not JSON")


def _judgement(reply: Mapping[str, Any]) -> tuple[float, str]:
    """The score and reason the reply's message content holds; declines on anything else."""
    content = _content(reply)
    try:
        said = json.loads(content, parse_constant=_refuse_constant)
    except ValueError:
        decline(f"the judge's answer is not JSON: {quoted_text(content)}")
    if not isinstance(said, dict):
        decline(f"the judge's answer is not a JSON object: {quoted_text(content)}")
    score, reason = said.get("score"), said.get("reason")
    if isinstance(score, bool) or not isinstance(score, int | float):
        decline(f"the judge's answer has no numeric score: {quoted_text(content)}")
    if not (math.isfinite(score) and 0 <= score <= 1):
        decline(f"the judge's score {score!r} is outside 0..1")
    if not isinstance(reason, str) or not reason.strip():
        decline(f"the judge's answer has no reason: {quoted_text(content)}")
    return float(score), reason.strip()


def _content(reply: Mapping[str, Any]) -> str:
    choices = reply.get("choices")
    first = choices[0] if isinstance(choices, list) and choices else None
    message = first.get("message") if isinstance(first, Mapping) else None
    content = message.get("content") if isinstance(message, Mapping) else None
    if not isinstance(content, str):
        decline("the judge's reply has no message content (choices[0].message.content)")
    return content


def _tokens(usage: Mapping[str, Any], *path: str) -> int | None:
    value: Any = usage
    for key in path:
        value = value.get(key) if isinstance(value, Mapping) else None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        return None
    return value


def _cost(usage: Any, model: str, book: PriceBook) -> telemetry_pb2.Cost | None:
    """What the call cost at `model`'s price, or None when the book or the reply cannot say."""
    if not isinstance(usage, Mapping):
        return None
    prompt, completion = _tokens(usage, "prompt_tokens"), _tokens(usage, "completion_tokens")
    model_price = book.lookup(None, model)
    if model_price is None or (prompt is None and completion is None):
        return None
    details = {
        "input": {"cache_read": _tokens(usage, "prompt_tokens_details", "cached_tokens") or 0},
        "output": {
            "reasoning": _tokens(usage, "completion_tokens_details", "reasoning_tokens") or 0
        },
    }
    columns = price(prompt, completion, details, model_price, price_book=book.id)
    return telemetry_pb2.Cost(
        currency=model_price.currency,
        input_cost=columns["input_cost"],
        output_cost=columns["output_cost"],
        total_cost=columns["total_cost"],
        price_book=columns["cost_price_book"],
        is_estimated=True,
    )
