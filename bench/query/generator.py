"""A deterministic corpus of agent traces for the query benchmark, as trace-store rows.

``Dataset(DatasetConfig(traces=100_000, spans_per_trace=10))`` plans ``traces`` traces over
``days`` days ending at ``anchor_ns`` and yields them as :class:`SignalBatch` es of whole traces
(:meth:`Dataset.batches`), rows shaped exactly as ingest hands them to a store
(:mod:`mcpd.signals.rows`: every key present, times in ns, ``user_id`` already the keyed hash).

What the traces look like:

- **Shape.** A root (``agent_run``, 15 % ``workflow_run``) over a conversation: model calls
  (``model_inference`` with model, provider, sampling parameters, usage incl. cache reads and
  reasoning tokens, and a priced cost), between them one or two actions: tool calls (60 %),
  retrieval, MCP tool calls, embeddings (a model and a cost too), guardrails, and HTTP requests
  nested under the tool call before them. The last span is a model call. Spans run one after
  the other inside the root; durations are log-normal per kind (model calls 0.3-10 s).
- **Sizes.** Spans per trace are ``spans_per_trace`` +-60 % (pairs of traces sum to twice the
  mean, so the corpus holds exactly ``(traces - 1) * spans_per_trace`` spans plus the big
  trace); inputs and outputs are JSON documents of 200-800 bytes (chat messages, tool
  arguments and results, retrieved documents).
- **One big trace** of ``big_trace_spans`` spans (2,000 by default; a long research agent),
  started two days before the anchor: the trace detail is measured on it.
- **Variety.** Five services with their own agents, models and traffic share, three
  environments (70 % production), sessions of several traces (85 % of traces) of users
  (90 %; ``hmac-sha256:<hex>`` as ingest stores them), 0-3 tags on the root, release and
  service version, about 3 % of traces failing (a tool or model call in error, the root too).
- **Time.** Start times follow a daily cycle (busiest mid-afternoon UTC) over the window;
  traces come out in start order, each ``received_at`` about a second after it ended.

Every trace is drawn from its own ``random.Random`` seeded with ``(seed, index)`` after a plan
drawn from ``seed``: the same config yields the same rows, byte for byte.
"""

from __future__ import annotations

import dataclasses
import hashlib
import hmac
import json
import math
import random
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime
from typing import Any, Final, cast

from mcpd.signals.batch import SignalBatch
from mcpd.signals.rows import SpanRow

NS: Final = 1_000_000_000
MS: Final = 1_000_000
DAY_NS: Final = 86_400 * NS
PROJECT: Final = "default"
"""The project of the anonymous caller of a local-mode daemon (``security.local_project``)."""
PRICE_BOOK: Final = "mcpd-2026-11"
ERROR_RATE: Final = 0.03
BIG_TRACE_NAME: Final = "long-research-agent"
USER_KEY: Final = b"bench-query-redaction-key"

# model -> (provider, USD per million input tokens, per million output tokens)
MODELS: Final[dict[str, tuple[str, float, float]]] = {
    "claude-sonnet-4-5": ("anthropic", 3.0, 15.0),
    "claude-haiku-4-5": ("anthropic", 1.0, 5.0),
    "gpt-5": ("openai", 1.25, 10.0),
    "gpt-5-mini": ("openai", 0.25, 2.0),
    "gemini-2.5-flash": ("google", 0.3, 2.5),
    "llama-3.3-70b": ("groq", 0.59, 0.79),
}
EMBEDDING_MODEL: Final = ("text-embedding-3-small", "openai", 0.02)


@dataclasses.dataclass(frozen=True, slots=True)
class Service:
    name: str
    version: str
    weight: float
    agents: tuple[str, ...]
    models: tuple[tuple[str, float], ...]
    tools: tuple[str, ...]


SERVICES: Final[tuple[Service, ...]] = (
    Service(
        "support-api",
        "3.8.1",
        0.35,
        ("support-agent", "refund-agent", "triage-agent"),
        (("claude-sonnet-4-5", 0.5), ("claude-haiku-4-5", 0.35), ("gpt-5-mini", 0.15)),
        ("lookup_customer", "search_orders", "create_ticket", "issue_refund", "send_email"),
    ),
    Service(
        "research-worker",
        "1.12.0",
        0.2,
        ("research-agent", "summarize-sources"),
        (("gpt-5", 0.55), ("claude-sonnet-4-5", 0.3), ("gemini-2.5-flash", 0.15)),
        ("web_search", "fetch_url", "read_pdf", "extract_table"),
    ),
    Service(
        "checkout-service",
        "2.4.7",
        0.2,
        ("checkout-assistant", "fraud-review"),
        (("gpt-5-mini", 0.6), ("gemini-2.5-flash", 0.4)),
        ("get_cart", "check_inventory", "quote_shipping", "charge_card"),
    ),
    Service(
        "docs-assistant",
        "0.9.3",
        0.15,
        ("docs-qa", "code-explainer"),
        (("claude-haiku-4-5", 0.5), ("llama-3.3-70b", 0.3), ("gpt-5-mini", 0.2)),
        ("search_docs", "read_file", "run_snippet"),
    ),
    Service(
        "ops-bot",
        "5.0.2",
        0.1,
        ("incident-responder", "deploy-helper"),
        (("gpt-5", 0.4), ("claude-sonnet-4-5", 0.6)),
        ("run_sql", "query_metrics", "page_oncall", "restart_pod"),
    ),
)
ENVIRONMENTS: Final = (("production", 0.7), ("staging", 0.2), ("development", 0.1))
RELEASES: Final = ("2025.11.2", "2025.12.0", "2025.12.1", "2026.01.0")
TAGS: Final = ("beta", "vip", "eval", "canary", "mobile", "web", "api", "batch", "enterprise")
ACTIONS: Final = (
    ("tool_call", 0.6),
    ("retrieval", 0.15),
    ("mcp_tool_call", 0.1),
    ("rag_embedding", 0.05),
    ("guardrail", 0.05),
    ("http_request", 0.05),
)
ERRORS: Final = (
    ("TimeoutError", "the tool did not answer within 30 s"),
    ("RateLimitError", "429 Too Many Requests: retry after 20 s"),
    ("ValidationError", "argument 'order_id' must match ^ORD-[0-9]{8}$"),
    ("ConnectionError", "connection reset by peer"),
    ("ContextLengthExceeded", "prompt is 212,004 tokens, the model accepts 200,000"),
)

FILTER_MODEL: Final = "claude-haiku-4-5"
FILTER_SERVICE: Final = "support-api"
"""A (model, service_name) pair the filtered list asks for: about 10 % of traces."""

_VOCABULARY: Final = (
    "order shipment refund invoice customer ticket warehouse tracking carrier delay address "
    "payment card charge dispute policy return label package parcel delivery status update "
    "query index table column schema migration latency timeout retry backoff error stack "
    "function argument result response request token cache context window model prompt "
    "reasoning tool agent step plan answer summary because therefore however meanwhile "
    "deploy rollback incident alert metric dashboard budget forecast contract clause quota "
    "the a of to in for with on by from and or not is was be has have will would should"
)
_WORDS: Final = tuple(_VOCABULARY.split())


def _sentences(count: int, seed: int) -> tuple[str, ...]:
    rng = random.Random(seed)
    out = []
    for _ in range(count):
        words = rng.choices(_WORDS, k=rng.randint(6, 18))
        words[0] = words[0].capitalize()
        out.append(" ".join(words) + rng.choice((".", ".", ".", "?", "!")))
    return tuple(out)


_TEXT: Final = " ".join(_sentences(4096, 7))
_TEXT_STARTS: Final = tuple(
    index + 1 for index, char in enumerate(_TEXT) if char == " " and _TEXT[index - 1] in ".?!"
)
"""Filler text: a slice of ``_TEXT`` starting at a sentence, so a text costs two draws."""


def hashed_user(user: str) -> str:
    """``user`` as ingest stores it: ``hmac-sha256:<64 hex>`` under a fixed bench key."""
    return "hmac-sha256:" + hmac.new(USER_KEY, user.encode(), hashlib.sha256).hexdigest()


def default_anchor_ns() -> int:
    """The end of the window when none is given: now, floored to the hour (UTC)."""
    now = datetime.now(UTC).replace(minute=0, second=0, microsecond=0)
    return int(now.timestamp()) * NS


def rfc3339(ns: int) -> str:
    """``ns`` as an RFC 3339 UTC timestamp with nanoseconds trimmed to what they need."""
    seconds, rest = divmod(ns, NS)
    base = datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%S")
    return f"{base}.{rest:09d}Z" if rest else f"{base}Z"


@dataclasses.dataclass(frozen=True, slots=True)
class DatasetConfig:
    """The corpus: ``traces`` traces (the big one included) over ``days`` days before
    ``anchor_ns`` (None: now, floored to the hour)."""

    traces: int = 100_000
    spans_per_trace: int = 10
    days: int = 30
    seed: int = 0
    big_trace_spans: int = 2000
    anchor_ns: int | None = None
    project: str = PROJECT

    def __post_init__(self) -> None:
        if self.traces < 2:
            raise ValueError("traces must be at least 2")
        if self.spans_per_trace < 2:
            raise ValueError("spans_per_trace must be at least 2")
        if self.days < 1:
            raise ValueError("days must be at least 1")
        if self.big_trace_spans < 2:
            raise ValueError("big_trace_spans must be at least 2")

    def resolved(self) -> DatasetConfig:
        """This config with the anchor fixed (now, floored to the hour, when it was None)."""
        if self.anchor_ns is not None:
            return self
        return dataclasses.replace(self, anchor_ns=default_anchor_ns())

    def describe(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclasses.dataclass(frozen=True, slots=True)
class TracePlan:
    """What the plan fixes for one trace; its spans are drawn from its own generator."""

    index: int
    start_ns: int
    spans: int
    service: int
    environment: str
    session_id: str | None
    user_id: str | None
    release: str
    tags: tuple[str, ...]
    error: bool
    big: bool = False


def _weighted(rng: random.Random, pairs: Sequence[tuple[str, float]]) -> str:
    return rng.choices([name for name, _ in pairs], [weight for _, weight in pairs])[0]


def _daily_cycle(rng: random.Random) -> float:
    """A fraction of a day, busiest at 15:00 UTC and quietest at 03:00 (4:1)."""
    while True:
        fraction = rng.random()
        weight = 0.625 + 0.375 * math.cos(2 * math.pi * (fraction - 0.625))
        if rng.random() < weight:
            return fraction


class Dataset:
    """The planned corpus of one config; iterate :meth:`traces` or :meth:`batches`."""

    def __init__(self, config: DatasetConfig) -> None:
        self.config = config.resolved()
        assert self.config.anchor_ns is not None
        self.end_ns: int = self.config.anchor_ns
        self.start_ns: int = self.end_ns - self.config.days * DAY_NS
        self.plans: list[TracePlan] = self._plan()
        self.big_trace_index: int = next(plan.index for plan in self.plans if plan.big)
        self.big_trace_id: str = self.trace_id(self.big_trace_index)
        self.span_count: int = sum(plan.spans for plan in self.plans)

    # -- the plan ---------------------------------------------------------------------------

    def _span_counts(self, rng: random.Random, count: int) -> list[int]:
        mean = self.config.spans_per_trace
        low = max(2, round(mean * 0.4))
        high = 2 * mean - low
        counts: list[int] = []
        while len(counts) + 1 < count:
            first = rng.randint(low, high)
            counts += [first, 2 * mean - first]
        if len(counts) < count:
            counts.append(mean)
        return counts

    def _plan(self) -> list[TracePlan]:
        config = self.config
        rng = random.Random(config.seed)
        normal = config.traces - 1
        counts = self._span_counts(rng, normal)
        span_ns = config.days * DAY_NS
        starts = sorted(
            self.start_ns + int((rng.randrange(config.days) + _daily_cycle(rng)) * DAY_NS) % span_ns
            for _ in range(normal)
        )
        users = [hashed_user(f"user-{number}") for number in range(max(10, config.traces // 20))]
        service_weights = [service.weight for service in SERVICES]
        sessions: list[tuple[str, int, str, str | None]] = []
        for number in range(max(5, config.traces // 6)):
            service = rng.choices(range(len(SERVICES)), service_weights)[0]
            user = rng.choice(users) if rng.random() < 0.9 else None
            sessions.append((f"sess-{number:07d}", service, _weighted(rng, ENVIRONMENTS), user))
        plans: list[TracePlan] = []
        for index, (start, spans) in enumerate(zip(starts, counts, strict=True), start=1):
            if rng.random() < 0.85:
                # Sessions in a Zipf-ish mix: a few long ones, many short ones.
                session, service, environment, user = sessions[
                    min(int(len(sessions) * rng.random() ** 1.6), len(sessions) - 1)
                ]
                session_id: str | None = session
            else:
                session_id = None
                service = rng.choices(range(len(SERVICES)), service_weights)[0]
                environment = _weighted(rng, ENVIRONMENTS)
                user = rng.choice(users) if rng.random() < 0.9 else None
            tags = tuple(sorted(rng.sample(TAGS, rng.choice((0, 0, 1, 1, 2, 3)))))
            plans.append(
                TracePlan(
                    index=index,
                    start_ns=start,
                    spans=spans,
                    service=service,
                    environment=environment,
                    session_id=session_id,
                    user_id=user,
                    release=rng.choice(RELEASES),
                    tags=tags,
                    error=rng.random() < ERROR_RATE,
                )
            )
        big = TracePlan(
            index=0,
            start_ns=self.end_ns - 2 * DAY_NS + 3_600 * NS,
            spans=config.big_trace_spans,
            service=1,  # research-worker
            environment="production",
            session_id="sess-big-research",
            user_id=users[0],
            release=RELEASES[-1],
            tags=("long-running", "research"),
            error=False,
            big=True,
        )
        plans.append(big)
        plans.sort(key=lambda plan: (plan.start_ns, plan.index))
        return plans

    def trace_id(self, index: int) -> str:
        return _trace_rng(self.config.seed, index).getrandbits(128).to_bytes(16, "big").hex()

    def describe(self) -> dict[str, Any]:
        return {
            **self.config.describe(),
            "window_start": rfc3339(self.start_ns),
            "window_end": rfc3339(self.end_ns),
            "span_count": self.span_count,
            "trace_count": len(self.plans),
            "big_trace_id": self.big_trace_id,
            "error_rate": ERROR_RATE,
            "filter_model": FILTER_MODEL,
            "filter_service": FILTER_SERVICE,
        }

    # -- rows -------------------------------------------------------------------------------

    def traces(self) -> Iterator[list[SpanRow]]:
        """Every trace's spans (root first, then in start order), traces in start order."""
        for plan in self.plans:
            yield _TraceBuilder(self.config, plan).build()

    def batches(self, spans_per_batch: int = 2000) -> Iterator[SignalBatch]:
        """Whole traces in batches of about ``spans_per_batch`` spans (a trace is never split),
        each stamped with the latest ``received_at`` of its rows."""
        pending: list[SpanRow] = []
        for spans in self.traces():
            if pending and len(pending) + len(spans) > spans_per_batch:
                yield _batch(self.config.project, pending)
                pending = []
            pending.extend(spans)
        if pending:
            yield _batch(self.config.project, pending)


def _batch(project: str, spans: list[SpanRow]) -> SignalBatch:
    received = max(span["received_at"] for span in spans)
    return SignalBatch(key_project=project, ingest_key=None, received_at=received, spans=spans)


def _trace_rng(seed: int, index: int) -> random.Random:
    return random.Random((seed << 40) | index)


# Every column of a span row, absent; `_TraceBuilder.base` fills what each span has.
_BLANK: Final[dict[str, Any]] = {
    **dict.fromkeys(SpanRow.__annotations__),
    "is_root": False,
    "is_event": False,
}

# kind -> (median ms, log-normal sigma)
_DURATIONS: Final[dict[str, tuple[float, float]]] = {
    "model_inference": (1800.0, 0.7),
    "tool_call": (120.0, 1.0),
    "retrieval": (80.0, 0.6),
    "mcp_tool_call": (250.0, 0.9),
    "rag_embedding": (40.0, 0.5),
    "guardrail": (25.0, 0.5),
    "http_request": (150.0, 0.8),
}


class _TraceBuilder:
    """The spans of one planned trace, drawn from the trace's own generator."""

    def __init__(self, config: DatasetConfig, plan: TracePlan) -> None:
        self.config = config
        self.plan = plan
        self.rng = _trace_rng(config.seed, plan.index)
        self.trace_id = self.rng.getrandbits(128).to_bytes(16, "big").hex()
        self.service = SERVICES[plan.service]
        self.correlation: dict[str, Any] = {
            "project": config.project,
            "environment": plan.environment,
            "service_name": self.service.name,
            "service_version": self.service.version,
            "session_id": plan.session_id,
            "user_id": plan.user_id,
            "release": plan.release,
        }
        self.model = _weighted(self.rng, self.service.models)
        self.turn_tokens = self.uniform_int(400, 2500)

    def uniform_int(self, low: int, high: int) -> int:
        """``randint`` at a third of its cost (one ``random()`` call)."""
        return low + int(self.rng.random() * (high - low + 1))

    def text(self, low: int, high: int) -> str:
        length = self.uniform_int(low, high)
        start = _TEXT_STARTS[int(self.rng.random() * (len(_TEXT_STARTS) - 64))]
        return _TEXT[start : start + length].rstrip()

    def span_id(self) -> str:
        return self.rng.getrandbits(64).to_bytes(8, "big").hex()

    def duration_ms(self, kind: str) -> float:
        median, sigma = _DURATIONS[kind]
        return min(median * math.exp(self.rng.gauss(0.0, sigma)), median * 12)

    def kinds(self, count: int) -> list[str]:
        """``count`` child kinds: model calls with one or two actions between them, ending
        with a model call."""
        kinds: list[str] = []
        while len(kinds) < count:
            remaining = count - len(kinds)
            if not kinds or kinds[-1] != "model_inference" or remaining == 1:
                kinds.append("model_inference")
                continue
            actions = min(self.rng.choice((1, 1, 2)), remaining - 1)
            kinds.extend(_weighted(self.rng, ACTIONS) for _ in range(actions))
        return kinds

    def build(self) -> list[SpanRow]:
        plan = self.plan
        root_id = self.span_id()
        kinds = self.kinds(plan.spans - 1)
        failing = -1
        if plan.error and kinds:
            actions = [i for i, kind in enumerate(kinds) if kind != "model_inference"]
            failing = self.rng.choice(actions or list(range(len(kinds))))
        children: list[dict[str, Any]] = []
        cursor = plan.start_ns + self.uniform_int(2, 20) * MS
        previous_tool: str | None = None
        for position, kind in enumerate(kinds):
            duration = int(self.duration_ms(kind) * MS)
            parent = root_id
            if kind == "http_request" and previous_tool is not None:
                parent = previous_tool
            span = self.child(kind, position, parent, cursor, duration, position == failing)
            if kind == "tool_call":
                previous_tool = span["span_id"]
            children.append(span)
            cursor += duration + self.uniform_int(500_000, 5 * MS)
        end = cursor + self.uniform_int(1, 10) * MS
        root = self.root(root_id, end, failing >= 0, kinds)
        received = end + self.uniform_int(200, 2000) * MS
        rows = [root, *children]
        for row in rows:
            row["received_at"] = received
        return [cast(SpanRow, row) for row in rows]

    def base(self, span_id: str, name: str, kind: str, start: int, end: int) -> dict[str, Any]:
        row = dict(_BLANK)
        row.update(self.correlation)
        row.update(
            trace_id=self.trace_id,
            span_id=span_id,
            name=name,
            kind=kind,
            status="ok",
            start_time=start,
            end_time=end,
            duration_ns=end - start,
        )
        return row

    def root(self, span_id: str, end: int, failed: bool, kinds: list[str]) -> dict[str, Any]:
        plan = self.plan
        workflow = not plan.big and self.rng.random() < 0.15
        name = BIG_TRACE_NAME if plan.big else self.rng.choice(self.service.agents)
        kind = "workflow_run" if workflow else "agent_run"
        row = self.base(span_id, name, kind, plan.start_ns, end)
        question = self.text(190, 450)
        answer = self.text(190, 600)
        row.update(
            is_root=True,
            status="error" if failed else "ok",
            entity_kind="workflow" if workflow else "agent",
            entity_id=f"{name}@{self.service.version}",
            entity_name=name,
            input={"messages": [{"role": "user", "content": question}]},
            output=None if failed else {"role": "assistant", "content": answer},
            attributes={
                "gen_ai.operation.name": "invoke_agent",
                "gen_ai.agent.name": name,
                "steps": len(kinds),
            },
            metadata={"channel": self.rng.choice(("web", "slack", "api", "email"))},
            tags=list(plan.tags) or None,
        )
        if failed:
            row["error"] = {"type": "AgentError", "message": "a step of the run failed"}
        return row

    def child(
        self, kind: str, position: int, parent: str, start: int, duration: int, failed: bool
    ) -> dict[str, Any]:
        span_id = self.span_id()
        end = start + duration
        if kind == "model_inference":
            row = self.model_call(span_id, position, start, end)
        elif kind == "rag_embedding":
            row = self.embedding(span_id, start, end)
        else:
            row = self.action(span_id, kind, start, end)
        row["parent_span_id"] = parent
        if failed:
            error_type, message = self.rng.choice(ERRORS)
            row["status"] = "error"
            row["error"] = {"type": error_type, "message": message}
            row["output"] = None
        return row

    def model_call(self, span_id: str, position: int, start: int, end: int) -> dict[str, Any]:
        model = self.model
        if self.rng.random() < 0.2:
            model = _weighted(self.rng, self.service.models)
        provider, input_price, output_price = MODELS[model]
        row = self.base(span_id, f"chat {model}", "model_inference", start, end)
        self.turn_tokens += self.uniform_int(150, 1200)
        input_tokens = self.turn_tokens
        output_tokens = self.uniform_int(20, 1200)
        cache_read = int(input_tokens * self.rng.uniform(0.3, 0.9)) if position > 0 else 0
        reasoning = self.uniform_int(0, output_tokens // 2) if model == "gpt-5" else 0
        details: dict[str, dict[str, int]] = {"input": {}, "output": {}}
        if cache_read:
            details["input"]["cache_read"] = cache_read
        if reasoning:
            details["output"]["reasoning"] = reasoning
        input_cost = round(((input_tokens - cache_read) + cache_read * 0.1) * input_price / 1e6, 9)
        output_cost = round(output_tokens * output_price / 1e6, 9)
        row.update(
            model=model,
            provider=provider,
            input_tokens=input_tokens,
            output_tokens=output_tokens,
            total_tokens=input_tokens + output_tokens,
            usage_details=details if details["input"] or details["output"] else None,
            cost_currency="USD",
            input_cost=input_cost,
            output_cost=output_cost,
            total_cost=round(input_cost + output_cost, 9),
            cost_price_book=PRICE_BOOK,
            cost_is_estimated=False,
            model_parameters={"temperature": 0.2, "max_tokens": 2048},
            input={
                "messages": [
                    {"role": "system", "content": self.text(40, 120)},
                    {"role": "user", "content": self.text(100, 450)},
                ]
            },
            output={"role": "assistant", "content": self.text(190, 650)},
            attributes={
                "gen_ai.operation.name": "chat",
                "gen_ai.request.model": model,
                "gen_ai.response.finish_reasons": ["stop"],
            },
        )
        return row

    def embedding(self, span_id: str, start: int, end: int) -> dict[str, Any]:
        model, provider, price = EMBEDDING_MODEL
        row = self.base(span_id, f"embeddings {model}", "rag_embedding", start, end)
        tokens = self.uniform_int(20, 400)
        cost = round(tokens * price / 1e6, 12)
        row.update(
            model=model,
            provider=provider,
            input_tokens=tokens,
            total_tokens=tokens,
            cost_currency="USD",
            input_cost=cost,
            total_cost=cost,
            cost_price_book=PRICE_BOOK,
            cost_is_estimated=False,
            input={"texts": [self.text(190, 650)]},
            output={
                "dimensions": 1536,
                "vectors": 1,
                "preview": [round(self.rng.uniform(-1, 1), 6) for _ in range(24)],
            },
            attributes={"gen_ai.operation.name": "embeddings"},
        )
        return row

    def action(self, span_id: str, kind: str, start: int, end: int) -> dict[str, Any]:
        rng = self.rng
        if kind in ("tool_call", "mcp_tool_call"):
            tool = rng.choice(self.service.tools)
            name = f"tools/call {tool}" if kind == "mcp_tool_call" else tool
            row = self.base(span_id, name, kind, start, end)
            row.update(
                input={"tool": tool, "arguments": {"query": self.text(160, 600), "limit": 20}},
                output={"result": self.text(190, 650), "truncated": False},
                attributes={"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": tool},
            )
            if kind == "mcp_tool_call":
                row["attributes"]["mcp.server"] = f"{self.service.name}-mcp"
            return row
        if kind == "retrieval":
            row = self.base(span_id, "retrieve documents", kind, start, end)
            row.update(
                input={"query": self.text(190, 600), "top_k": 3},
                output={
                    "documents": [
                        {"id": f"doc-{rng.randrange(100_000):05d}", "text": self.text(60, 230)}
                        for _ in range(3)
                    ]
                },
                attributes={"retrieval.index": f"{self.service.name}-kb"},
            )
            return row
        if kind == "guardrail":
            row = self.base(span_id, "pii-guardrail", kind, start, end)
            row.update(
                input={"text": self.text(190, 650)},
                output={
                    "tripped": rng.random() < 0.05,
                    "policy": "pii-v2",
                    "explanation": self.text(190, 600),
                },
            )
            return row
        host = rng.choice(("api.stripe.test", "internal-crm", "search.example.net"))
        row = self.base(span_id, f"GET {host}", kind, start, end)
        row.update(
            input={
                "url": f"https://{host}/v1/records/{rng.randrange(10**8):08d}",
                "headers": {"accept": "application/json", "x-request-purpose": "agent-tool"},
                "query": self.text(100, 550),
            },
            output={"status": 200, "body": self.text(190, 600)},
            attributes={"http.request.method": "GET", "server.address": host},
        )
        return row


def json_size(value: Any) -> int:
    """The bytes of ``value`` as compact JSON (how big an input or output is)."""
    return len(json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode())
