"""Sampling policies: parsing, head decisions (OpenTelemetry-compatible), tail verdicts."""

from __future__ import annotations

import random
from typing import Any

import pytest
from opentelemetry.sdk.trace.sampling import Decision, TraceIdRatioBased

from mcpd.runtime.errors import InvalidArgument
from mcpd.signals.batch import HeldTrace
from services.ingest.sampling import (
    DecisionMemory,
    SamplingKind,
    SamplingPolicy,
    keep_by_trace_id,
)

S = 1_000_000_000  # nanoseconds per second
MS = 1_000_000


# Parsing.


@pytest.mark.parametrize("document", [None, {}, {"kind": "always"}])
def test_always_is_the_default(document: Any) -> None:
    policy = SamplingPolicy.parse(document)
    assert policy.kind is SamplingKind.ALWAYS
    assert policy.to_json() == {"kind": "always"}


def test_every_kind_parses_and_round_trips() -> None:
    documents = [
        {"kind": "never"},
        {"kind": "ratio", "rate": 0.25},
        {"kind": "deterministic", "rate": 1},
        {"kind": "tail", "rate": 0.1},
        {"kind": "tail", "rate": 0, "slow_ms": 500, "max_wait_s": 30, "settle_s": 0},
    ]
    for document in documents:
        policy = SamplingPolicy.parse(document)
        assert SamplingPolicy.parse(policy.to_json()) == policy
    tail = SamplingPolicy.parse({"kind": "tail", "rate": 0.1})
    assert (tail.slow_ms, tail.max_wait_s, tail.settle_s) == (10_000, 60.0, 2.0)
    assert tail.is_tail
    assert not SamplingPolicy.parse({"kind": "ratio", "rate": 0.5}).is_tail


@pytest.mark.parametrize(
    ("document", "field", "words"),
    [
        ("always", "sampling", "object"),
        ({"kind": "sometimes"}, "sampling.kind", "one of always"),
        ({"kind": 3}, "sampling.kind", "one of"),
        ({"kind": "ratio"}, "sampling.rate", "required"),
        ({"kind": "deterministic", "rate": 1.5}, "sampling.rate", "from 0 to 1"),
        ({"kind": "ratio", "rate": -0.1}, "sampling.rate", "from 0 to 1"),
        ({"kind": "ratio", "rate": True}, "sampling.rate", "number"),
        ({"kind": "ratio", "rate": "0.5"}, "sampling.rate", "number"),
        ({"kind": "ratio", "rate": float("nan")}, "sampling.rate", "number"),
        ({"kind": "always", "rate": 0.5}, "sampling.rate", "does not apply to kind always"),
        ({"kind": "ratio", "rate": 0.5, "slow_ms": 5}, "sampling.slow_ms", "does not apply"),
        ({"kind": "tail", "rate": 0.5, "slowms": 5}, "sampling.slowms", "not a field"),
        ({"kind": "tail", "rate": 0.5, "slow_ms": -1}, "sampling.slow_ms", "milliseconds"),
        ({"kind": "tail", "rate": 0.5, "slow_ms": 1.5}, "sampling.slow_ms", "milliseconds"),
        ({"kind": "tail", "rate": 0.5, "max_wait_s": 0}, "sampling.max_wait_s", "more than 0"),
        ({"kind": "tail", "rate": 0.5, "max_wait_s": 7200}, "sampling.max_wait_s", "3600"),
        ({"kind": "tail", "rate": 0.5, "settle_s": -1}, "sampling.settle_s", "from 0"),
        (
            {"kind": "tail", "rate": 0.5, "max_wait_s": 5, "settle_s": 10},
            "sampling.settle_s",
            "to 5",
        ),
    ],
)
def test_mistakes_name_the_field(document: Any, field: str, words: str) -> None:
    with pytest.raises(InvalidArgument) as caught:
        SamplingPolicy.parse(document)
    assert caught.value.field == field
    assert words in caught.value.message


def test_the_field_prefix_is_the_callers() -> None:
    with pytest.raises(InvalidArgument) as caught:
        SamplingPolicy.parse({"kind": "ratio"}, field="project.sampling")
    assert caught.value.field == "project.sampling.rate"


# Head decisions.


def trace_ids(count: int, seed: int = 7) -> list[str]:
    rng = random.Random(seed)
    return [f"{rng.getrandbits(128):032x}" for _ in range(count)]


@pytest.mark.parametrize("rate", [0.0, 0.0001, 0.1, 0.25, 0.5, 0.75, 0.999, 1.0])
def test_deterministic_agrees_with_opentelemetry(rate: float) -> None:
    sdk = TraceIdRatioBased(rate)
    policy = SamplingPolicy.parse({"kind": "deterministic", "rate": rate})
    for trace_id in trace_ids(1000, seed=int(rate * 1000)):
        expected = sdk.should_sample(None, int(trace_id, 16), "span").decision
        assert policy.decide(trace_id) is (expected is Decision.RECORD_AND_SAMPLE), trace_id


def test_deterministic_at_the_bound() -> None:
    # rate 0.5: the bound is 2**63; the lower 64 bits decide, the upper ones never do.
    assert keep_by_trace_id("f" * 16 + "7fffffffffffffff", 0.5)
    assert not keep_by_trace_id("0" * 16 + "8000000000000000", 0.5)
    assert keep_by_trace_id("0" * 32, 0.0001)
    assert not keep_by_trace_id("0" * 32, 0.0)
    assert keep_by_trace_id("f" * 32, 1.0)


def test_a_trace_id_that_is_not_hex_is_hashed() -> None:
    assert keep_by_trace_id("not-a-trace-id", 0.5) == keep_by_trace_id("not-a-trace-id", 0.5)
    kept = sum(keep_by_trace_id(f"id-{i}", 0.5) for i in range(2000))
    assert 800 < kept < 1200


def test_always_and_never() -> None:
    assert SamplingPolicy.parse({"kind": "always"}).decide("0" * 32)
    assert not SamplingPolicy.parse({"kind": "never"}).decide("0" * 32)


def test_ratio_keeps_the_rate_within_statistical_bounds() -> None:
    rng = random.Random(1)
    policy = SamplingPolicy.parse(
        {"kind": "ratio", "rate": 0.3}, memory=DecisionMemory(), draw=rng.random
    )
    ids = trace_ids(20_000, seed=3)
    kept = sum(policy.decide(trace_id) for trace_id in ids)
    # Binomial(20000, 0.3): the standard deviation is about 65; allow five of them.
    assert abs(kept - 6000) < 5 * 65


def test_ratio_decides_once_per_trace() -> None:
    policy = SamplingPolicy.parse({"kind": "ratio", "rate": 0.5}, memory=DecisionMemory())
    ids = trace_ids(500)
    first = [policy.decide(trace_id) for trace_id in ids]
    assert [policy.decide(trace_id) for trace_id in ids] == first
    assert 150 < sum(first) < 350


def test_ratio_decisions_survive_a_reloaded_policy() -> None:
    # Policies are rebuilt when a project's configuration is re-read; the shared memory keeps
    # the decisions of traces already under way.
    document = {"kind": "ratio", "rate": 0.5}
    first = SamplingPolicy.parse(document)
    ids = trace_ids(200, seed=11)
    decisions = [first.decide(trace_id) for trace_id in ids]
    again = SamplingPolicy.parse(document, draw=lambda: 0.99)
    assert [again.decide(trace_id) for trace_id in ids] == decisions


def test_ratio_forgets_the_least_recent_trace_first() -> None:
    draws = iter([0.1, 0.9, 0.9, 0.9])
    policy = SamplingPolicy.parse(
        {"kind": "ratio", "rate": 0.5}, memory=DecisionMemory(2), draw=lambda: next(draws)
    )
    assert policy.decide("a")  # drew 0.1: keep
    assert not policy.decide("b")
    assert not policy.decide("c")  # "a" is forgotten
    assert policy.decided("a") is None
    assert not policy.decide("a")  # decided again, drew 0.9


def test_a_tail_policy_does_not_decide_at_the_head() -> None:
    with pytest.raises(ValueError, match="tail_verdict"):
        SamplingPolicy.parse({"kind": "tail", "rate": 1}).decide("0" * 32)


# Tail verdicts.

KEEP_ID = "0" * 32  # lower 64 bits 0: kept at any rate above 0
DROP_ID = "f" * 32  # lower 64 bits 2**64 - 1: dropped at any rate below 1


def held(
    trace_id: str = DROP_ID,
    *,
    first: int = 100 * S,
    errors: int = 0,
    start: int | None = 100 * S,
    end: int | None = 101 * S,
) -> HeldTrace:
    return HeldTrace(
        project="p",
        trace_id=trace_id,
        first_received_at=first,
        span_count=3,
        error_count=errors,
        root_start_time=start,
        root_end_time=end,
        open_count=0,
    )


TAIL = SamplingPolicy.parse(
    {"kind": "tail", "rate": 0.5, "slow_ms": 5000, "max_wait_s": 60, "settle_s": 2},
    memory=DecisionMemory(),
)


def test_waits_while_the_root_runs() -> None:
    assert TAIL.tail_verdict(held(end=None), now_ns=130 * S) is None
    assert TAIL.tail_verdict(held(start=None, end=None), now_ns=130 * S) is None


def test_waits_for_stragglers_after_the_root_ends() -> None:
    trace = held(errors=1, end=101 * S)
    assert TAIL.tail_verdict(trace, now_ns=102 * S) is None
    assert TAIL.tail_verdict(trace, now_ns=103 * S - 1) is None
    assert TAIL.tail_verdict(trace, now_ns=103 * S) is True


def test_keeps_errors_and_slow_traces_whatever_the_rate() -> None:
    never = SamplingPolicy.parse({"kind": "tail", "rate": 0, "slow_ms": 5000})
    now = 200 * S
    assert never.tail_verdict(held(errors=2), now) is True
    assert never.tail_verdict(held(start=100 * S, end=105 * S), now) is True  # exactly slow_ms
    assert never.tail_verdict(held(start=100 * S, end=105 * S - MS), now) is False
    assert never.tail_verdict(held(KEEP_ID), now) is False  # rate 0 keeps nothing else


def test_the_rest_by_the_deterministic_rate() -> None:
    now = 200 * S
    assert TAIL.tail_verdict(held(KEEP_ID), now) is True
    assert TAIL.tail_verdict(held(DROP_ID), now) is False
    for trace_id in trace_ids(300, seed=5):
        assert TAIL.tail_verdict(held(trace_id), now) is keep_by_trace_id(trace_id, 0.5)


def test_max_wait_ends_the_wait() -> None:
    # The root never ended: after max_wait it counts as running until now, which is slow.
    assert TAIL.tail_verdict(held(first=100 * S, start=100 * S, end=None), 160 * S) is True
    assert TAIL.tail_verdict(held(first=100 * S, start=100 * S, end=None), 160 * S - 1) is None
    # The root never arrived: errors and the rate decide.
    assert TAIL.tail_verdict(held(DROP_ID, start=None, end=None), 160 * S) is False
    assert TAIL.tail_verdict(held(KEEP_ID, start=None, end=None), 160 * S) is True
    assert TAIL.tail_verdict(held(DROP_ID, errors=1, start=None, end=None), 160 * S) is True
    # A root that ended in the producer's future (clock skew) waits at most max_wait.
    future = held(DROP_ID, first=100 * S, start=100 * S, end=500 * S)
    assert TAIL.tail_verdict(future, 159 * S) is None
    assert TAIL.tail_verdict(future, 160 * S) is True  # 400 s by the producer's clock: slow


def test_decisions_are_remembered_for_stragglers() -> None:
    policy = SamplingPolicy.parse({"kind": "tail", "rate": 0.5}, memory=DecisionMemory(10))
    assert policy.decided("t1") is None
    policy.remember("t1", True)
    policy.remember("t2", False)
    assert policy.decided("t1") is True
    assert policy.decided("t2") is False


def test_a_decision_memory_is_bounded() -> None:
    memory = DecisionMemory(3)
    for index in range(10):
        memory.put(f"t{index}", index % 2 == 0)
    assert len(memory) == 3
    assert [memory.get(f"t{i}") for i in (6, 7, 8, 9)] == [None, False, True, False]
    memory.put("t7", True)  # refreshed: now the most recent
    memory.put("t10", True)
    assert memory.get("t7") is True
    assert memory.get("t8") is None
    with pytest.raises(ValueError, match="at least one"):
        DecisionMemory(0)
