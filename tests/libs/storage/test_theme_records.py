"""Notes filed under entities and the snapshots of clustering passes in the trace store
(`ThemeRecords`), the same behaviour on every backend; and the erasure of a subject taking its
notes out of the themes."""

from __future__ import annotations

from typing import Any

from mcpd.signals.queries import ErasureSubject
from mcpd.storage.theme_records import (
    EndingRow,
    Entity,
    MemberRow,
    SnapshotRow,
    SnapshotWrite,
    ThemeRow,
    TraceEnding,
)
from mcpd.themes import encode, sketch_of
from tests.libs.signals.samples import aspect_note, span
from tests.libs.storage.helpers import OpenedStore
from tests.libs.storage.query_data import OTHER, P, at, batch, settle

AGENT = Entity("agent", "support-bot")
KEY = b"k" * 32


def note(note_id: str, trace_id: str, created_ms: int, **fields: Any) -> Any:
    text = fields.pop("text", f"the user wanted help with {trace_id}")
    return aspect_note(
        note_id,
        trace_id=trace_id,
        created_at=at(created_ms),
        text=text,
        sketch=encode(sketch_of(text, KEY)),
        **fields,
    )


def root(trace_id: str, **fields: Any) -> Any:
    values: dict[str, Any] = {
        "trace_id": trace_id,
        "is_root": True,
        "entity_kind": "agent",
        "entity_name": "support-bot",
    }
    values.update(fields)
    return span(f"root-{trace_id}", **values)


def test_a_note_is_filed_under_its_trace_root_entity_and_inherits_its_correlation(
    migrated_trace_store: OpenedStore,
) -> None:
    store = migrated_trace_store.store
    store.write_batches([batch(spans=[root("t1", user_id="u-1", service_name="api")])])
    store.write_batches(
        [
            batch(
                spans=[root("t2", entity_name="triage-bot")],
                aspect_notes=[note("n1", "t1", 1), note("n2", "t2", 2), note("n3", "t3", 3)],
            )
        ]
    )
    store.write_batches([batch(aspect_notes=[note("n4", "t4", 4, service_name="billing")])])

    tallies = store.entity_tallies(P, None)
    assert sorted((t.entity, t.note_count, t.trace_count) for t in tallies) == [
        (Entity("agent", "support-bot"), 1, 1),
        (Entity("agent", "triage-bot"), 1, 1),
        (Entity("service", "billing"), 1, 1),
        (Entity("service", "unknown"), 1, 1),
    ]
    [inherited] = [row for row in store.trace_notes(P, "t1")]
    assert inherited["user_id"] == "u-1"
    assert inherited["service_name"] == "api"
    assert store.entity_tallies(P, "service")[0].entity.kind == "service"


def test_a_pass_reads_one_entity_aspect_window_newest_first_in_pages(
    migrated_trace_store: OpenedStore,
) -> None:
    store = migrated_trace_store.store
    traces = [f"t{i}" for i in range(6)]
    store.write_batches([batch(spans=[root(t) for t in traces])])
    notes = [note(f"n{i}", t, 10 * i) for i, t in enumerate(traces)]
    notes.append(note("s0", "t0", 5, aspect="sentiment"))
    store.write_batches([batch(aspect_notes=notes)])
    window = (at(10), at(60))

    first = store.pass_notes(P, AGENT, "goal", window, before=None, limit=3)
    assert [n.note_id for n in first] == ["n5", "n4", "n3"]
    last = first[-1]
    rest = store.pass_notes(
        P, AGENT, "goal", window, before=(last.created_at, last.note_id), limit=3
    )
    assert [n.note_id for n in rest] == ["n2", "n1"]
    assert rest[0].sketch == encode(sketch_of("the user wanted help with t2", KEY))
    assert store.noted_entities(at(0), at(6)) == [(P, AGENT)]
    assert store.noted_entities(at(100), at(200)) == []
    assert store.note_texts(P, ["n1", "zz"]) == {"n1": "the user wanted help with t1"}

    tallies = {t.aspect: t for t in store.aspect_tallies(P, AGENT)}
    assert (tallies["goal"].note_count, tallies["goal"].trace_count) == (6, 6)
    assert tallies["goal"].last_note_at == at(50)
    assert tallies["sentiment"].note_count == 1


def snapshot_of(snapshot_id: str, cutoff_ms: int, ordinal: int = 1) -> SnapshotRow:
    return SnapshotRow(
        snapshot_id=snapshot_id,
        entity=AGENT,
        aspects=("goal",),
        ordinal=ordinal,
        cutoff_at=at(cutoff_ms),
        window_from=at(cutoff_ms - 100),
        window_to=at(cutoff_ms),
        trace_count=3,
        note_count=3,
        capped=False,
    )


def theme_of(snapshot_id: str, theme_id: str, label_note: str, **fields: Any) -> ThemeRow:
    values: dict[str, Any] = {
        "state": "birth",
        "note_count": 2,
        "trace_count": 2,
        "coverage": 2 / 3,
        "wording": encode(sketch_of(theme_id, KEY)),
    }
    values.update(fields)
    return ThemeRow(
        snapshot_id=snapshot_id,
        aspect="goal",
        theme_id=theme_id,
        entity=AGENT,
        label=f"label of {label_note}",
        label_note_id=label_note,
        label_trace_id=f"trace of {label_note}",
        **values,
    )


def write_two_snapshots(store: Any) -> None:
    first = SnapshotWrite(
        snapshot_of("s-1", 1_000),
        (theme_of("s-1", "th-a", "n1"), theme_of("s-1", "th-b", "n3", note_count=1)),
        (
            MemberRow("goal", "th-a", "n1", "t1", 64),
            MemberRow("goal", "th-a", "n2", "t2", 40),
            MemberRow("goal", "noise", "n3", "t3", 0),
        ),
        (),
    )
    second = SnapshotWrite(
        snapshot_of("s-2", 2_000, ordinal=2),
        (theme_of("s-2", "th-a", "n2", state="merge", merged_from=("th-b",)),),
        (MemberRow("goal", "th-a", "n2", "t2", 64),),
        (EndingRow("goal", "th-b", "merge", ("th-a",)),),
    )
    assert store.write_snapshot(P, first)
    assert store.write_snapshot(P, second)
    assert not store.write_snapshot(P, second)


def test_snapshots_are_written_once_and_read_back_with_ordinals_from_one(
    migrated_trace_store: OpenedStore,
) -> None:
    store = migrated_trace_store.store
    write_two_snapshots(store)

    listed = store.snapshots(P, AGENT, cutoff_from=None, cutoff_to=None)
    assert [(s.snapshot_id, s.ordinal) for s in listed] == [("s-1", 1), ("s-2", 2)]
    assert listed[0] == snapshot_of("s-1", 1_000)
    assert [
        s.snapshot_id for s in store.snapshots(P, AGENT, cutoff_from=at(1_500), cutoff_to=None)
    ] == ["s-2"]
    assert store.snapshot(P, "s-2") == snapshot_of("s-2", 2_000, ordinal=2)
    assert store.snapshot("other", "s-2") is None
    assert store.latest_snapshots(P) == {AGENT: snapshot_of("s-2", 2_000, ordinal=2)}

    themes = store.snapshot_themes(P, "s-1", None)
    assert [t.theme_id for t in themes] == ["th-a", "th-b"]
    assert themes[0] == theme_of("s-1", "th-a", "n1")
    assert store.snapshot_themes(P, "s-1", ["sentiment"]) == []
    assert store.theme_entity(P, "th-a") == AGENT
    assert store.theme_entity(P, "nope") is None


def test_theme_history_wordings_and_members(migrated_trace_store: OpenedStore) -> None:
    store = migrated_trace_store.store
    write_two_snapshots(store)

    history = store.theme_history(P, "th-b", None)
    assert [(h.snapshot.snapshot_id, h.theme is not None) for h in history] == [
        ("s-1", True),
        ("s-2", False),
    ]
    assert history[1].ending == EndingRow("goal", "th-b", "merge", ("th-a",))
    assert [h.snapshot.snapshot_id for h in store.theme_history(P, "th-a", "goal")] == [
        "s-1",
        "s-2",
    ]
    assert store.theme_history(P, "th-a", "sentiment") == []

    previous, earlier = store.theme_wordings(P, AGENT, "goal", at(3_000))
    assert [t.theme_id for t in previous] == ["th-a"]
    assert previous[0].snapshot_id == "s-2"
    assert [t.theme_id for t in earlier] == ["th-b"]
    assert store.theme_wordings(P, AGENT, "goal", at(1_000)) == ([], [])

    page = store.theme_members(P, "s-1", "goal", "th-a", after=None, limit=1)
    assert page == [MemberRow("goal", "th-a", "n1", "t1", 64)]
    rest = store.theme_members(P, "s-1", "goal", "th-a", after=(64, "n1"), limit=5)
    assert [m.note_id for m in rest] == ["n2"]
    assert store.member_count(P, "s-1", "goal", "noise") == 1
    assert sorted(m.note_id for m in store.snapshot_members(P, "s-1", ["goal"])) == [
        "n1",
        "n2",
        "n3",
    ]


def test_trace_starts_are_read_from_the_projection(migrated_trace_store: OpenedStore) -> None:
    store = migrated_trace_store.store
    store.write_batches([batch(spans=[root("t1", start_time=at(7))])])
    assert store.trace_starts(P, ["t1", "t9"]) == {"t1": at(7)}


def test_erasing_a_subject_blanks_labels_and_removes_examples_of_its_notes(
    migrated_trace_store: OpenedStore,
) -> None:
    store = migrated_trace_store.store
    store.write_batches(
        [
            batch(
                spans=[root("t1", user_id="u-1"), root("t2")],
                aspect_notes=[note("n1", "t1", 1), note("n2", "t2", 2)],
            )
        ]
    )
    write_two_snapshots(store)

    counts = store.erase_subject(P, ErasureSubject(user_ids=("u-1",)))
    settle(migrated_trace_store)
    assert counts.aspect_notes == 1
    assert counts.theme_labels == 1
    assert counts.theme_examples == 1
    labels = {t.theme_id: t.label for t in store.snapshot_themes(P, "s-1", None)}
    assert labels == {"th-a": "", "th-b": "label of n3"}
    members = store.snapshot_members(P, "s-1", ["goal"])
    assert sorted(m.note_id for m in members) == ["n2", "n3"]


def test_a_later_note_about_a_trace_along_an_aspect_replaces_the_earlier_one(
    migrated_trace_store: OpenedStore,
) -> None:
    store = migrated_trace_store.store
    store.write_batches([batch(spans=[root("t1")], aspect_notes=[note("n-old", "t1", 5)])])
    store.write_batches(
        [
            batch(
                aspect_notes=[
                    note("n-new", "t1", 9, text="the user wanted a new password"),
                    note("n-older", "t1", 1),
                    note("s1", "t1", 2, aspect="sentiment"),
                ]
            )
        ]
    )
    settle(migrated_trace_store)

    assert sorted((n["aspect"], n["note_id"]) for n in store.trace_notes(P, "t1")) == [
        ("goal", "n-new"),
        ("sentiment", "s1"),
    ]
    notes = store.pass_notes(P, AGENT, "goal", (at(0), at(100)), before=None, limit=10)
    assert [n.note_id for n in notes] == ["n-new"]
    tallies = {t.aspect: t.note_count for t in store.aspect_tallies(P, AGENT)}
    assert tallies == {"goal": 1, "sentiment": 1}


# --- how traces ended (what a derived outcome note reads) ---------------------------------------

WINDOW = (at(1_000), at(2_000))


def child(span_id: str, trace_id: str, start_ms: int, end_ms: int | None, **fields: Any) -> Any:
    return span(
        span_id,
        trace_id=trace_id,
        parent_span_id=f"root-{trace_id}",
        start_time=at(start_ms),
        end_time=None if end_ms is None else at(end_ms),
        duration_ns=None if end_ms is None else (end_ms - start_ms) * 1_000_000,
        **fields,
    )


def timed_root(trace_id: str, start_ms: int, end_ms: int | None, **fields: Any) -> Any:
    return root(
        trace_id,
        start_time=at(start_ms),
        end_time=None if end_ms is None else at(end_ms),
        duration_ns=None if end_ms is None else (end_ms - start_ms) * 1_000_000,
        **fields,
    )


def ids(endings: list[TraceEnding]) -> list[str]:
    return [ending.trace_id for ending in endings]


def write_ended_traces(store: Any) -> None:
    store.write_batches(
        [
            batch(
                spans=[
                    # A plain trace, two failed spans written out of start order.
                    timed_root("t-plain", 900, 1_100),
                    child(
                        "late",
                        "t-plain",
                        1_050,
                        1_060,
                        status="error",
                        error={"kind": "ValueError", "message": "bad value"},
                    ),
                    child(
                        "early",
                        "t-plain",
                        950,
                        1_000,
                        status="error",
                        error={"kind": "TimeoutError", "message": "timed out"},
                    ),
                    # A run: its root carries the run status, its failed step the error class
                    # (which wins over the error's kind).
                    timed_root(
                        "t-run",
                        1_000,
                        1_500,
                        kind="workflow_run",
                        status="error",
                        attributes={"mcpd.run.status": "failed", "mcpd.run.steps_used": 2},
                        error={"message": "run failed"},
                        run_id="run-1",
                    ),
                    child(
                        "step-1",
                        "t-run",
                        1_100,
                        1_200,
                        kind="workflow_step",
                        status="error",
                        attributes={"mcpd.step.error_class": "fatal", "mcpd.step.key": "fetch"},
                        error={"kind": "RuntimeError", "message": "step failed"},
                    ),
                    child("step-2", "t-run", 1_050, 1_090, kind="workflow_step"),
                    # Complete, without a failure.
                    timed_root("t-quiet", 1_200, 1_300),
                    # Ended at the window's end, and after it: outside.
                    timed_root("t-edge", 1_500, 2_000),
                    timed_root("t-late", 1_500, 2_500),
                    # Ended in the window but not complete: no root, and a root still open.
                    child("orphan", "t-rootless", 1_100, 1_200, status="error"),
                    timed_root("t-open", 1_100, None),
                    child("done", "t-open", 1_100, 1_200),
                ]
            ),
            batch(project=OTHER, spans=[timed_root("t-other", 1_000, 1_100, project=OTHER)]),
        ]
    )


def test_ended_traces_read_how_complete_traces_ended_in_the_window(
    migrated_trace_store: OpenedStore,
) -> None:
    store = migrated_trace_store.store
    write_ended_traces(store)

    endings = store.ended_traces(P, WINDOW, aspect="outcome", after=None, limit=10)
    assert endings == [
        TraceEnding(
            trace_id="t-plain",
            status="error",
            error_count=2,
            ended_at=at(1_100),
            root_kind="generic",
            run_status=None,
            error_classes=("TimeoutError", "ValueError"),
        ),
        TraceEnding(
            trace_id="t-quiet",
            status="ok",
            error_count=0,
            ended_at=at(1_300),
            root_kind="generic",
            run_status=None,
            error_classes=(),
        ),
        TraceEnding(
            trace_id="t-run",
            status="error",
            error_count=2,
            ended_at=at(1_500),
            root_kind="workflow_run",
            run_status="failed",
            error_classes=("", "fatal"),
            run_id="run-1",
            failed_step="fetch",
        ),
    ]
    assert store.ended_traces(
        P, (at(2_000), at(3_000)), aspect="outcome", after=None, limit=10
    ) == [
        TraceEnding("t-edge", "ok", 0, at(2_000), "generic", None, ()),
        TraceEnding("t-late", "ok", 0, at(2_500), "generic", None, ()),
    ]
    assert store.ended_traces(P, (at(0), at(900)), aspect="outcome", after=None, limit=10) == []
    assert [
        e.trace_id
        for e in store.ended_traces(OTHER, WINDOW, aspect="outcome", after=None, limit=10)
    ] == ["t-other"]
    assert store.ended_traces("nobody", WINDOW, aspect="outcome", after=None, limit=10) == []


def test_ended_traces_are_paged_by_trace_id(migrated_trace_store: OpenedStore) -> None:
    store = migrated_trace_store.store
    write_ended_traces(store)

    first = store.ended_traces(P, WINDOW, aspect="outcome", after=None, limit=2)
    assert [e.trace_id for e in first] == ["t-plain", "t-quiet"]
    rest = store.ended_traces(P, WINDOW, aspect="outcome", after=first[-1].trace_id, limit=2)
    assert [e.trace_id for e in rest] == ["t-run"]
    assert rest[0].error_classes == ("", "fatal")
    assert store.ended_traces(P, WINDOW, aspect="outcome", after="t-run", limit=2) == []
    assert [
        e.trace_id for e in store.ended_traces(P, WINDOW, aspect="outcome", after="t-p", limit=1)
    ] == ["t-plain"]


def test_a_failed_span_resent_as_ok_no_longer_counts(migrated_trace_store: OpenedStore) -> None:
    store = migrated_trace_store.store
    store.write_batches(
        [
            batch(
                spans=[
                    timed_root("t1", 1_000, 1_500),
                    child("s1", "t1", 1_100, 1_200, status="error", error={"kind": "Oops"}),
                    child("s2", "t1", 1_300, 1_400, status="error", error={"kind": "Later"}),
                ]
            )
        ]
    )
    # Re-sent later with another start time (another sort key on ClickHouse) and status ok.
    resent = child("s1", "t1", 1_050, 1_200, received_at=at(900_000))
    store.write_batches([batch(received_at=at(900_000), spans=[resent])])

    [ending] = store.ended_traces(P, WINDOW, aspect="outcome", after=None, limit=10)
    assert (ending.status, ending.error_count, ending.error_classes) == ("error", 1, ("Later",))


def test_trace_projects_lists_every_project_with_a_trace(
    migrated_trace_store: OpenedStore,
) -> None:
    store = migrated_trace_store.store
    assert store.trace_projects() == []
    store.write_batches([batch(aspect_notes=[note("n1", "t9", 1)])])
    write_ended_traces(store)
    assert store.trace_projects() == [OTHER, P]


def test_ended_traces_read_the_newest_projection_of_a_trace(
    migrated_trace_store: OpenedStore,
) -> None:
    store = migrated_trace_store.store
    store.write_batches(
        [batch(spans=[timed_root("t-moved", 1_000, 1_100), timed_root("t-open", 1_000, 1_100)])]
    )
    assert [
        e.trace_id for e in store.ended_traces(P, WINDOW, aspect="outcome", after=None, limit=10)
    ] == [
        "t-moved",
        "t-open",
    ]
    # A span arrives that starts earlier (moving the trace's start) and ends after the window,
    # and one that is still open.
    store.write_batches(
        [
            batch(
                received_at=at(900_000),
                spans=[
                    child("early", "t-moved", 500, 2_500, received_at=at(900_000)),
                    child("open", "t-open", 1_050, None, received_at=at(900_000)),
                ],
            )
        ]
    )

    assert store.ended_traces(P, WINDOW, aspect="outcome", after=None, limit=10) == []
    [moved] = store.ended_traces(P, (at(2_000), at(3_000)), aspect="outcome", after=None, limit=10)
    assert (moved.trace_id, moved.ended_at, moved.root_kind) == ("t-moved", at(2_500), "generic")


def test_ended_traces_leave_out_traces_with_a_note_along_the_aspect(
    migrated_trace_store: OpenedStore,
) -> None:
    store = migrated_trace_store.store
    write_ended_traces(store)
    store.write_batches([batch(aspect_notes=[note("o1", "t-quiet", 1, aspect="outcome")])])
    store.write_batches([batch(aspect_notes=[note("g1", "t-plain", 1)])])

    found = store.ended_traces(P, WINDOW, aspect="outcome", after=None, limit=10)
    assert [e.trace_id for e in found] == ["t-plain", "t-run"]
    found = store.ended_traces(P, WINDOW, aspect="goal", after=None, limit=10)
    assert [e.trace_id for e in found] == ["t-quiet", "t-run"]


def test_deleting_a_trace_takes_its_notes_out_of_the_themes(
    migrated_trace_store: OpenedStore,
) -> None:
    store = migrated_trace_store.store
    store.write_batches(
        [
            batch(
                spans=[root("t1"), root("t2")],
                aspect_notes=[note("n1", "t1", 1), note("n2", "t2", 2)],
            )
        ]
    )
    write_two_snapshots(store)

    assert store.delete_trace(P, "t1") > 0
    settle(migrated_trace_store)
    labels = {t.theme_id: t.label for t in store.snapshot_themes(P, "s-1", None)}
    assert labels == {"th-a": "", "th-b": "label of n3"}
    members = store.snapshot_members(P, "s-1", ["goal"])
    assert sorted(m.note_id for m in members) == ["n2", "n3"]


def test_retention_drops_snapshots_whose_window_ended_before_the_spans_cutoff(
    migrated_trace_store: OpenedStore,
) -> None:
    store = migrated_trace_store.store
    write_two_snapshots(store)

    # s-1's window ends at 1,000 ms, s-2's at 2,000 ms.
    store.apply_retention(P, {"spans": at(1_500)})
    settle(migrated_trace_store)

    listed = store.snapshots(P, AGENT, cutoff_from=None, cutoff_to=None)
    assert [(s.snapshot_id, s.ordinal) for s in listed] == [("s-2", 1)]
    assert store.snapshot_themes(P, "s-1", None) == []
    assert store.snapshot_members(P, "s-1", ["goal"]) == []
    assert [h.snapshot.snapshot_id for h in store.theme_history(P, "th-b", None)] == ["s-2"]
