"""The clustering pass over stored notes: planted themes are born, continue, split, merge, die
and come back across windows on every backend; a snapshot is written once, above the floor,
capped at the ceiling; and the same notes give byte-identical snapshots whatever their order,
the backend or the hash seed."""

from __future__ import annotations

import os
import random
from pathlib import Path

import pytest

from mcpd.runtime.clock import ManualClock
from mcpd.storage.interfaces import TraceStore
from mcpd.storage.theme_records import HistoryRow, ThemeRow
from mcpd.testing.pytest_plugin import POSTGRES_ENV
from services.intelligence.passes import NOISE, PassLimits, ThemePass, cutoff_before
from services.intelligence.tests.conftest import opened_trace_store
from services.intelligence.tests.notes import (
    AGENT,
    DAY_NS,
    HOUR_NS,
    PROJECT,
    note_rows,
    snapshot_digest,
    write_notes,
)
from tests.libs.themes.seeds import printed_under_seeds
from tests.libs.themes.test_evolution import GROUPS, WHENS, WINDOWS

BASE = 20_000 * DAY_NS
LIMITS = PassLimits(min_notes=50, max_notes=20_000, page_size=500)


def themes_pass(store: TraceStore, clock: ManualClock, limits: PassLimits = LIMITS) -> ThemePass:
    return ThemePass(
        store, lambda project: ["goal"], limits, clock, interval_s=3_600, window_days=1
    )


def cutoff(window: int) -> int:
    return BASE + (window + 1) * DAY_NS


def planted(window: int) -> list[tuple[str, str, int]]:
    """The window's planted notes (`tests.libs.themes.test_evolution`), an hour before its
    cutoff."""
    start = cutoff(window) - HOUR_NS
    return [
        (
            f"{group}-w{window}-{i:02d}",
            GROUPS[group].format(n=100 + 50 * window + i) + " " + WHENS[i % len(WHENS)],
            start + 1_000 * (index + 1),
        )
        for index, (group, i) in enumerate(
            (group, i) for group, count in WINDOWS[window].items() for i in range(count)
        )
    ]


def by_groups(themes: list[ThemeRow], store: TraceStore, snapshot_id: str) -> dict[str, ThemeRow]:
    members = store.snapshot_members(PROJECT, snapshot_id, ["goal"])
    groups: dict[str, set[str]] = {}
    for member in members:
        # Note ids are `goal-<group>-w<window>-<i>`.
        groups.setdefault(member.theme_id, set()).add(member.note_id.split("-")[1])
    return {"+".join(sorted(groups[row.theme_id])): row for row in themes}


def state_of(point: HistoryRow) -> str:
    if point.theme is not None:
        return point.theme.state
    assert point.ending is not None
    return point.ending.state


def test_planted_evolution_is_recovered_state_by_state(
    trace_store: TraceStore, clock: ManualClock
) -> None:
    passes = themes_pass(trace_store, clock)
    seen: list[dict[str, ThemeRow]] = []
    snapshots: list[str] = []
    for window in range(len(WINDOWS)):
        write_notes(trace_store, [note_rows(planted(window))])
        [snapshot_id] = passes.pass_at(cutoff(window))
        snapshots.append(snapshot_id)
        themes = trace_store.snapshot_themes(PROJECT, snapshot_id, None)
        seen.append(by_groups(themes, trace_store, snapshot_id))

    born, held, changed, back = seen
    assert sorted(born) == ["cache+index+search", "deploy", "login", "mail", "refund", "sms"]
    assert {row.state for row in born.values()} == {"birth"}
    for group, row in born.items():
        assert (held[group].state, held[group].theme_id) == ("continue", row.theme_id)

    assert sorted(changed) == ["cache", "deploy", "mail+outage+sms", "refund", "search"]
    index = born["cache+index+search"].theme_id
    assert (changed["search"].state, changed["search"].theme_id) == ("split", index)
    assert changed["search"].split_into == (changed["cache"].theme_id,)
    assert (changed["cache"].state, changed["cache"].split_from) == ("split", (index,))
    merged = changed["mail+outage+sms"]
    assert (merged.state, merged.theme_id) == ("merge", born["mail"].theme_id)
    assert merged.merged_from == (born["sms"].theme_id,)

    login = trace_store.theme_history(PROJECT, born["login"].theme_id, "goal")
    assert [(point.snapshot.snapshot_id, state_of(point)) for point in login] == [
        (snapshots[0], "birth"),
        (snapshots[1], "continue"),
        (snapshots[2], "death"),
        (snapshots[3], "resurrection"),
    ]
    sms = trace_store.theme_history(PROJECT, born["sms"].theme_id, "goal")
    assert sms[-1].ending is not None
    assert (sms[-1].ending.state, sms[-1].ending.merged_into) == ("merge", (merged.theme_id,))

    assert (back["login"].state, back["login"].theme_id) == ("resurrection", born["login"].theme_id)
    assert back["quota"].state == "birth"
    deploy = trace_store.theme_history(PROJECT, born["deploy"].theme_id, None)
    assert state_of(deploy[-1]) == "death"
    ordinals = [
        s.ordinal for s in trace_store.snapshots(PROJECT, AGENT, cutoff_from=None, cutoff_to=None)
    ]
    assert ordinals == [1, 2, 3, 4]


def test_a_snapshot_holds_every_note_read_once_with_labels_and_coverage(
    trace_store: TraceStore, clock: ManualClock
) -> None:
    notes = planted(0)
    write_notes(trace_store, [note_rows(notes)])
    passes = themes_pass(trace_store, clock)
    [snapshot_id] = passes.pass_at(cutoff(0))

    snapshot = trace_store.snapshot(PROJECT, snapshot_id)
    assert snapshot is not None
    assert (snapshot.aspects, snapshot.note_count, snapshot.trace_count) == (
        ("goal",),
        len(notes),
        len(notes),
    )
    assert (snapshot.window_from, snapshot.window_to, snapshot.capped) == (
        cutoff(0) - DAY_NS,
        cutoff(0),
        False,
    )
    members = trace_store.snapshot_members(PROJECT, snapshot_id, ["goal"])
    assert sorted(m.note_id for m in members) == sorted(f"goal-{n[0]}" for n in notes)
    texts = {f"goal-{note_id}": text for note_id, text, _ in notes}
    for theme in trace_store.snapshot_themes(PROJECT, snapshot_id, None):
        held = [m for m in members if m.theme_id == theme.theme_id]
        assert theme.note_count == len(held)
        assert theme.coverage == len(held) / len(notes)
        assert theme.label == texts[theme.label_note_id]
        assert theme.label_trace_id == f"t-{theme.label_note_id.removeprefix('goal-')}"
        label = [m for m in held if m.note_id == theme.label_note_id]
        assert label[0].similarity == 64
    assert all(m.similarity == 0 for m in members if m.theme_id == NOISE)
    # The same cutoff again: stored already, nothing written.
    assert passes.pass_at(cutoff(0)) == []


def test_no_snapshot_below_the_floor_and_a_capped_one_past_the_ceiling(
    trace_store: TraceStore, clock: ManualClock
) -> None:
    notes = planted(0)
    write_notes(trace_store, [note_rows(notes[:49])])
    assert themes_pass(trace_store, clock).pass_at(cutoff(0)) == []

    write_notes(trace_store, [note_rows(notes[49:])])
    capped = themes_pass(trace_store, clock, PassLimits(min_notes=50, max_notes=60, page_size=7))
    [snapshot_id] = capped.pass_at(cutoff(0))
    snapshot = trace_store.snapshot(PROJECT, snapshot_id)
    assert snapshot is not None
    assert (snapshot.note_count, snapshot.capped) == (60, True)
    newest = sorted(notes, key=lambda note: note[2])[-60:]
    members = trace_store.snapshot_members(PROJECT, snapshot_id, ["goal"])
    assert sorted(m.note_id for m in members) == sorted(f"goal-{n[0]}" for n in newest)


def test_cutoffs_are_multiples_of_the_interval() -> None:
    assert cutoff_before(7_250, 1_000) == 7_000
    assert cutoff_before(7_000, 1_000) == 7_000


def digest_after_pass(store: TraceStore, clock: ManualClock, seed: int) -> str:
    """Write the planted windows in an order `seed` shuffles and return the digest of the last
    snapshot."""
    shuffle = random.Random(seed)
    passes = themes_pass(store, clock)
    snapshot_id = ""
    for window in range(len(WINDOWS)):
        notes = planted(window)
        shuffle.shuffle(notes)
        write_notes(store, [note_rows(notes[i : i + 37]) for i in range(0, len(notes), 37)])
        [snapshot_id] = passes.pass_at(cutoff(window))
    return snapshot_digest(store, snapshot_id)


@pytest.mark.e2e
def test_same_notes_give_byte_identical_snapshots_on_every_backend_and_hash_seed(
    request: pytest.FixtureRequest, tmp_path: Path, clock: ManualClock
) -> None:
    backends = ["sqlite", "clickhouse"]
    if _postgres_available():
        backends.append("postgres")
    digests = set()
    for index, backend in enumerate(backends):
        directory = tmp_path / backend
        directory.mkdir()
        with opened_trace_store(request, backend, directory) as store:
            digests.add(digest_after_pass(store, clock, seed=index))
    program = (
        "import tempfile, pathlib\n"
        "from mcpd.runtime.clock import ManualClock\n"
        "from mcpd.storage.sql.engine import Synchronous, create_sqlite_engine\n"
        "from mcpd.storage.sql.stores import SqlTraceStore\n"
        "from services.intelligence.tests.test_passes import digest_after_pass\n"
        "path = pathlib.Path(tempfile.mkdtemp()) / 'trace.db'\n"
        "store = SqlTraceStore(create_sqlite_engine(path, synchronous=Synchronous.NORMAL))\n"
        "store.migrate()\n"
        "print(digest_after_pass(store, ManualClock(), seed=7))\n"
    )
    digests |= printed_under_seeds(program)
    assert len(digests) == 1, digests


def _postgres_available() -> bool:
    return bool(os.environ.get(POSTGRES_ENV))
