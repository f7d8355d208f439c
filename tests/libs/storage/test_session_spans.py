"""`TraceStore.session_spans` on every backend: one session's spans across its traces, in
(start time, span id) order, the newest `limit` of them, latest version of each span.

Reuses the behaviour suite's `signal_store` fixture (sqlite, postgres, clickhouse)."""

from __future__ import annotations

from typing import Any, cast

from mcpd.signals.rows import SESSION_SPAN_COLUMNS, SpanRow
from tests.libs.signals.samples import MS, T0, span
from tests.libs.storage import test_signal_store as behaviour
from tests.libs.storage.test_signal_store import SignalStores, batch

# The behaviour suite's fixture (registered under its own name, `signal_store`).
signal_store = behaviour.signal_store


def _span(span_id: str, trace_id: str, at_ms: int, session: str | None, **extra: Any) -> SpanRow:
    fields: dict[str, Any] = {
        "trace_id": trace_id,
        "session_id": session,
        "start_time": T0 + at_ms * MS,
        "end_time": T0 + (at_ms + 5) * MS,
        "duration_ns": 5 * MS,
    }
    return span(span_id, **{**fields, **extra})


def _ids(rows: list[SpanRow]) -> list[tuple[str, str]]:
    return [(row["trace_id"], row["span_id"]) for row in rows]


def test_spans_of_the_session_across_traces_in_start_order(signal_store: SignalStores) -> None:
    store = signal_store.store
    wanted = [
        _span("a-root", "t1", 0, "s-1", is_root=True, input={"q": "hi"}, service_name="bot"),
        _span("a-tool", "t1", 2, "s-1", parent_span_id="a-root", kind="tool_call"),
        # Two spans starting at the same instant: span id breaks the tie.
        _span("b-2", "t2", 10, "s-1", is_root=True),
        _span("b-1", "t2", 10, "s-1", parent_span_id="b-2", output=["x", {"y": 1}]),
    ]
    others = [
        _span("c-root", "t3", 1, "s-2", is_root=True),  # another session
        _span("d-root", "t4", 3, None, is_root=True),  # no session
        _span("e-root", "t5", 4, "s-1", is_root=True, project="q"),  # another project
    ]
    assert store.write_batches([batch(spans=[*others[:2], *wanted[::-1]])]) == [True]
    assert store.write_batches([batch(project="q", spans=[others[2]])]) == [True]

    found = store.session_spans("p", "s-1", limit=100)

    assert _ids(found) == [("t1", "a-root"), ("t1", "a-tool"), ("t2", "b-1"), ("t2", "b-2")]
    # The session's columns, each as written (the rest is left out: a rebuild needs none).
    by_id = {row["span_id"]: row for row in wanted}
    for row in found:
        written = cast(dict[str, Any], by_id[row["span_id"]])
        assert row == {name: written[name] for name in SESSION_SPAN_COLUMNS}
    assert _ids(store.session_spans("q", "s-1", limit=100)) == [("t5", "e-root")]
    assert _ids(store.session_spans("p", "s-2", limit=100)) == [("t3", "c-root")]
    assert store.session_spans("p", "nope", limit=100) == []


def test_past_the_limit_the_newest_spans_are_kept_in_ascending_order(
    signal_store: SignalStores,
) -> None:
    store = signal_store.store
    rows = [_span(f"s{n}", f"t{n // 2}", n, "s-1", is_root=n % 2 == 0) for n in range(7)]
    store.write_batches([batch(spans=rows)])

    assert _ids(store.session_spans("p", "s-1", limit=3)) == [
        ("t2", "s4"),
        ("t2", "s5"),
        ("t3", "s6"),
    ]
    assert len(store.session_spans("p", "s-1", limit=7)) == 7
    assert store.session_spans("p", "s-1", limit=0) == []
    # An empty session id never matches the spans that carry none.
    store.write_batches([batch(spans=[_span("x", "t9", 0, None)])])
    assert store.session_spans("p", "", limit=10) == []


def test_a_re_sent_span_reads_as_its_latest_version_once(signal_store: SignalStores) -> None:
    store = signal_store.store
    started = _span("r", "t1", 0, "s-1", is_root=True, end_time=None, duration_ns=None)
    moved = _span("m", "t1", 1, "s-1", parent_span_id="r")
    store.write_batches([batch(spans=[started, moved], received_at=T0 + 50 * MS)])

    ended = _span("r", "t1", 0, "s-1", is_root=True, output="done", received_at=T0 + 90 * MS)
    # The same span id re-sent under another session: it leaves s-1.
    elsewhere = _span("m", "t1", 1, "s-2", parent_span_id="r", received_at=T0 + 90 * MS)
    store.write_batches([batch(spans=[ended, elsewhere], received_at=T0 + 90 * MS)])

    (root,) = store.session_spans("p", "s-1", limit=10)
    assert root["span_id"] == "r"
    assert root["end_time"] == T0 + 5 * MS
    assert root["output"] == "done"
    assert _ids(store.session_spans("p", "s-2", limit=10)) == [("t1", "m")]


def test_a_span_re_sent_with_another_start_time_is_one_span(signal_store: SignalStores) -> None:
    # On ClickHouse the start time is in the sort key: two rows, folded by latest arrival.
    store = signal_store.store
    store.write_batches([batch(spans=[_span("r", "t1", 0, "s-1", is_root=True)])])
    later = _span("r", "t1", 7, "s-1", is_root=True, received_at=T0 + 90 * MS)
    store.write_batches([batch(spans=[later], received_at=T0 + 90 * MS)])

    (root,) = store.session_spans("p", "s-1", limit=10)
    assert root["start_time"] == T0 + 7 * MS


def test_held_spans_are_not_session_spans(signal_store: SignalStores) -> None:
    store = signal_store.store
    held = _span("h", "t1", 0, "s-1", is_root=True)
    store.write_batches([batch(held_spans=[held])])

    assert store.session_spans("p", "s-1", limit=10) == []
    assert store.release_held("p", ["t1"], []) == 1
    assert _ids(store.session_spans("p", "s-1", limit=10)) == [("t1", "h")]
