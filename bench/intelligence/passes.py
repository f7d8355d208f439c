"""The clustering pass over stored notes, stage by stage, at the ceiling and with many entities.

``python -m bench intelligence_passes [--events N]`` (N: scenario A's notes) or ``python -m
bench.intelligence.passes [--notes N] [--entities E] [--per-entity M] [--ceiling C]
[--backends sqlite clickhouse] [--b-backends ...] [--default-ceiling]``

Notes are written as ingest writes them (each on a trace of its own whose root span names the
entity, with its sketch under a fixed key) into a migrated trace store opened as ``mcpd serve``
opens it (`open_stores`): embedded SQLite, and ClickHouse in process (chdb). Their texts are
the sentences of the labelled paraphrase fixture (``tests/fixtures/themes/paraphrases.jsonl``,
3,383 sentences in 68 groups), shuffled and taken in turn, every number in them drawn afresh
for each copy (order numbers, counts, days): a copy of a sentence with a number is a near
copy, one without an exact copy, as a model's notes about one agent repeat its wording. They
are spread evenly over the six days before the first cutoff, the entities' notes interleaved,
and written oldest first with ids that grow, 1,000 a transaction, as ingest receives them
(`Corpus`). The window is the default seven days, the page the default 500 notes, the floor
the default 50.

- **Scenario A** (`--notes`, 20,000 by default: the default ceiling `max_notes_per_pass`, which
  is set to the notes): one entity, one aspect. `ThemePass.pass_at` at a cutoff (no earlier
  snapshot: every theme is born), then at the next cutoff over the same notes (matched against
  the first snapshot), both timed stage by stage, then at the cutoff after untimed inside (its
  total shows what the timing costs). A stage is charged the wall time spent in it, less any
  other stage it calls:

  - **entities**: `noted_entities`, the entities with a note in the window;
  - **read notes**: `pass_notes`, the notes page by page, newest first;
  - **decode**: the stored sketches into integers (`mcpd.themes.decode`, once per distinct
    stored sketch);
  - **cluster**: `mcpd.themes.cluster`;
  - **previous themes**: whether the snapshot is stored, the earlier snapshots' themes and
    their wordings (`theme_wordings`, decoded), the stored snapshots (the ordinal);
  - **evolve**: each theme's representatives and `mcpd.themes.evolve`;
  - **label texts**: `note_texts` of the label notes;
  - **build rows**: the rest of the pass: member rows (each note's similarity to its label),
    theme rows (trace counts, the stored wording), the snapshot row;
  - **write**: `write_snapshot`, one transaction.

- **Scenario B** (`--entities`, 100): that many entities, each with `--per-entity` notes, more
  than the pass's ceiling `--ceiling`; one pass over all of them: its total, its stages summed
  over the entities, and per entity (mean, p50, p95, max). Every snapshot must be `capped` and
  hold exactly the ceiling's notes. By default the ceiling is 2,000 with 2,500 notes each
  (250,000 notes, which load in minutes on both backends), each entity's texts its own.
  `--default-ceiling` adds a run on SQLite at the default ceiling, 20,000, with 20,500 notes
  each (2,050,000 notes), loaded in bulk (`bulk_load`): every entity has the same texts (the
  clustering of each is still its own work), no root span is written (a note is then filed
  under the `service` entity its service name names, ingest's rule for a note that arrives
  before its root) and SQLite's write skips its replacement of earlier notes about the same
  trace (none here), which scans the notes table per 500 notes. None of that changes what the
  pass does.

Output: tables and ``bench/results/intelligence_passes.json`` with the machine's facts.
Wall-clock seconds (`time.perf_counter`): the pass runs in one thread.
"""

from __future__ import annotations

import argparse
import os
import random
import re
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from bench.config import BenchConfig, Benchmark
from bench.harness import RESULTS_DIR, percentile, print_table, repo_relative, write_result
from bench.intelligence.paraphrases import FIXTURE, load
from mcpd.runtime.clock import ManualClock
from mcpd.runtime.config import IntelligenceSettings
from mcpd.signals.batch import SignalBatch
from mcpd.signals.notes import FALLBACK_KIND
from mcpd.signals.rows import AspectNoteRow, SpanRow
from mcpd.storage.factory import open_stores
from mcpd.storage.interfaces import ThemeRecords, TraceStore
from mcpd.storage.sql.signals import writes as sql_writes
from mcpd.storage.theme_records import Entity, SnapshotWrite
from mcpd.themes import encode, sketch_of
from services.intelligence import passes
from services.intelligence.passes import NOISE, PassLimits, ThemePass

NAME = "intelligence_passes"
DESCRIPTION = (
    "the clustering pass stage by stage over 20,000 notes, and over the ceiling with 100 "
    "entities, SQLite and ClickHouse (chdb)"
)
KEY = b"bench-intelligence-passes"
PROJECT = "default"
ASPECT = "goal"
SEED = 20261208
BACKENDS = ("sqlite", "clickhouse")
TARGET_S = 5.0
DEFAULT_NOTES = 20_000
STAGES = (
    "entities",
    "read notes",
    "decode",
    "cluster",
    "previous themes",
    "evolve",
    "label texts",
    "build rows",
    "write",
)
WRITE_BATCH = 1_000

_NS = 1_000_000_000
_HOUR_NS = 3_600 * _NS
_DAY_NS = 24 * _HOUR_NS
# A cutoff: a multiple of the pass interval (an hour), 2026-12-01T00:00:00Z.
FIRST_CUTOFF = 1_796_083_200 * _NS
SPREAD_NS = 6 * _DAY_NS
_NUMBER = re.compile(r"\d+")
_SETTINGS = IntelligenceSettings()


# --- notes -----------------------------------------------------------------------------------


def note_texts(count: int, seed: int) -> list[str]:
    """`count` note texts: the fixture's sentences in turn, each number drawn afresh (as many
    digits as it had) for every copy."""
    sentences = [p.text for p in load(FIXTURE)]
    rng = random.Random(seed)
    rng.shuffle(sentences)

    def number(match: re.Match[str]) -> str:
        digits = len(match.group())
        return str(rng.randint(10 ** (digits - 1) if digits > 1 else 1, 10**digits - 1))

    return [_NUMBER.sub(number, sentences[i % len(sentences)]) for i in range(count)]


def _span_template() -> dict[str, Any]:
    return dict.fromkeys(SpanRow.__optional_keys__ | SpanRow.__required_keys__)


def _note_template() -> dict[str, Any]:
    return dict.fromkeys(AspectNoteRow.__optional_keys__ | AspectNoteRow.__required_keys__)


@dataclass(frozen=True, slots=True)
class Corpus:
    """The notes of `entities` entities, `per_entity` each, spread evenly and interleaved over
    the `SPREAD_NS` before the first cutoff. Note k of the corpus is about entity k mod
    `entities`, created k steps after the start, with ids that grow with k: written in that
    order they arrive as ingest receives notes, each the newest so far."""

    entities: Sequence[Entity]
    texts: Sequence[Sequence[str]]  # per entity, its notes' texts
    roots: bool

    @property
    def per_entity(self) -> int:
        return len(self.texts[0])

    @property
    def size(self) -> int:
        return len(self.entities) * self.per_entity

    def distinct_texts(self) -> int:
        return len({text for texts in self.texts for text in texts})


def corpus(entities: Sequence[Entity], texts: Sequence[Sequence[str]], *, roots: bool) -> Corpus:
    if len(entities) != len(texts) or len({len(t) for t in texts}) != 1:
        raise ValueError("one list of texts per entity, all as long")
    return Corpus(entities, texts, roots)


def note_batches(notes: Corpus) -> Iterator[SignalBatch]:
    """The corpus in batches of `WRITE_BATCH` notes, oldest first. With `roots`, each note's
    trace has a root span naming its entity; without, no span is written and a note is filed
    under the `service` entity its own service name names (ingest's rule for a note that comes
    before its root), which loads in half the time."""
    span_base, note_base = _span_template(), _note_template()
    step = SPREAD_NS // notes.size
    start = FIRST_CUTOFF - SPREAD_NS
    count = len(notes.entities)
    sketches: dict[str, bytes] = {}
    for first in range(0, notes.size, WRITE_BATCH):
        spans: list[SpanRow] = []
        rows: list[AspectNoteRow] = []
        for k in range(first, min(first + WRITE_BATCH, notes.size)):
            entity = notes.entities[k % count]
            text = notes.texts[k % count][k // count]
            trace_id, created = f"t{k:08d}", start + k * step
            sketch = sketches.get(text)
            if sketch is None:
                sketch = sketches[text] = encode(sketch_of(text, KEY))
            if notes.roots:
                spans.append(_root(entity, trace_id, f"s{k:08d}", created, span_base))
            rows.append(
                cast(
                    AspectNoteRow,
                    note_base
                    | {
                        "project": PROJECT,
                        "note_id": f"n{k:08d}",
                        "trace_id": trace_id,
                        "aspect": ASPECT,
                        "text": text,
                        "definition_version": 1,
                        "model": "bench-notes",
                        "created_at": created,
                        "received_at": created,
                        "sketch": sketch,
                        "service_name": None if notes.roots else entity.name,
                    },
                )
            )
        yield SignalBatch(
            key_project=PROJECT, ingest_key=None, received_at=0, spans=spans, aspect_notes=rows
        )


def _root(
    entity: Entity, trace_id: str, span_id: str, created: int, base: dict[str, Any]
) -> SpanRow:
    return cast(
        SpanRow,
        base
        | {
            "project": PROJECT,
            "trace_id": trace_id,
            "span_id": span_id,
            "name": "answer_ticket",
            "kind": "agent_run",
            "status": "ok",
            "start_time": created - 2 * _NS,
            "end_time": created - _NS,
            "duration_ns": _NS,
            "is_root": True,
            "is_event": False,
            "entity_kind": entity.kind,
            "entity_name": entity.name,
            "received_at": created - _NS,
        },
    )


# What SQLite's write of notes calls to replace an earlier note about the same trace and aspect.
_REPLACE_NOTES = "keep_newest_notes"


@contextmanager
def bulk_load() -> Iterator[None]:
    """SQLite's write of notes without its replacement of an earlier note about the same trace
    and aspect (`keep_newest_notes`), while inside. No note of a corpus shares its trace, so
    the statement deletes nothing, but it scans the whole notes table once per 500 notes
    written: at two million notes, most of the load."""
    saved = getattr(sql_writes, _REPLACE_NOTES, None)
    if saved is None:
        yield
        return
    setattr(sql_writes, _REPLACE_NOTES, lambda conn, notes: None)
    try:
        yield
    finally:
        setattr(sql_writes, _REPLACE_NOTES, saved)


def write_notes(store: TraceStore, notes: Corpus) -> float:
    """Write the corpus (`note_batches`), a batch a transaction; the seconds it took."""
    began = time.perf_counter()
    for batch in note_batches(notes):
        store.write_batches([batch])
    return time.perf_counter() - began


@contextmanager
def opened(backend: str, directory: Path) -> Iterator[TraceStore]:
    """A migrated trace store on `backend` under `directory`, as `mcpd serve` opens it."""
    chdb = f"chdb://{directory / 'clickhouse'}" if backend == "clickhouse" else None
    stores = open_stores(
        backend,
        data_dir=directory / "data",
        postgres_url=None,
        clickhouse_url=chdb,
        stores={"trace"},
    )
    try:
        yield stores.trace
    finally:
        stores.close()


def theme_pass(store: ThemeRecords, ceiling: int) -> ThemePass:
    limits = PassLimits(
        min_notes=_SETTINGS.min_notes_to_cluster, max_notes=ceiling, page_size=_SETTINGS.page_size
    )
    return ThemePass(
        store,
        lambda project: [ASPECT],
        limits,
        ManualClock(),
        interval_s=_SETTINGS.pass_interval_s,
        window_days=_SETTINGS.window_days,
    )


# --- timing stages ---------------------------------------------------------------------------


class Stopwatch:
    """Wall time charged to the innermost stage running; "build rows" when none is."""

    def __init__(self) -> None:
        self.spent = dict.fromkeys(STAGES, 0.0)
        self._stack = ["build rows"]
        self._since = time.perf_counter()

    def _charge(self) -> None:
        now = time.perf_counter()
        self.spent[self._stack[-1]] += now - self._since
        self._since = now

    def timed(self, stage: str, work: Callable[..., Any]) -> Callable[..., Any]:
        def run(*args: Any, **kwargs: Any) -> Any:
            self._charge()
            self._stack.append(stage)
            try:
                return work(*args, **kwargs)
            finally:
                self._charge()
                self._stack.pop()

        return run

    def start(self) -> None:
        self.spent = dict.fromkeys(STAGES, 0.0)
        self._since = time.perf_counter()

    def stop(self) -> None:
        self._charge()


_STORE_STAGES = {
    "noted_entities": "entities",
    "pass_notes": "read notes",
    "snapshot": "previous themes",
    "snapshots": "previous themes",
    "theme_wordings": "previous themes",
    "note_texts": "label texts",
    "write_snapshot": "write",
}
_MODULE_STAGES = {
    "_decoded": "decode",
    "_wordings": "previous themes",
    "cluster": "cluster",
    "representatives": "evolve",
    "evolve": "evolve",
}


class _TimedStore:
    """The store, its pass's calls charged to their stages (with no stopwatch: none is), and
    every snapshot the pass wrote kept."""

    def __init__(self, store: ThemeRecords, watch: Stopwatch | None) -> None:
        self._store = store
        self._watch = watch
        self.writes: list[SnapshotWrite] = []

    def write_snapshot(self, project: str, write: SnapshotWrite) -> bool:
        self.writes.append(write)
        if self._watch is None:
            return self._store.write_snapshot(project, write)
        written: bool = self._watch.timed("write", self._store.write_snapshot)(project, write)
        return written

    def __getattr__(self, name: str) -> Any:
        found = getattr(self._store, name)
        stage = _STORE_STAGES.get(name)
        return found if stage is None or self._watch is None else self._watch.timed(stage, found)


@contextmanager
def timed_module(watch: Stopwatch) -> Iterator[None]:
    """The pass module's functions charged to their stages while inside."""
    saved = {name: getattr(passes, name) for name in _MODULE_STAGES}
    try:
        for name, stage in _MODULE_STAGES.items():
            setattr(passes, name, watch.timed(stage, saved[name]))
        yield
    finally:
        for name, work in saved.items():
            setattr(passes, name, work)


@dataclass(slots=True)
class PassFigures:
    """One pass: its wall time, by stage when timed, and what it wrote."""

    label: str
    seconds: float
    stages: dict[str, float]
    writes: list[SnapshotWrite]
    entity_s: list[float] = field(default_factory=list)

    @property
    def states(self) -> dict[str, int]:
        """Theme rows by state, and the previous themes that ended, by how."""
        counted = Counter(theme.state for write in self.writes for theme in write.themes)
        counted.update(f"ended: {end.state}" for write in self.writes for end in write.endings)
        return dict(sorted(counted.items()))

    @property
    def noise(self) -> int:
        return sum(1 for w in self.writes for member in w.members if member.theme_id == NOISE)

    def to_dict(self) -> dict[str, Any]:
        snapshots = [write.snapshot for write in self.writes]
        found: dict[str, Any] = {
            "pass": self.label,
            "seconds": self.seconds,
            "snapshots": len(snapshots),
            "capped": sum(1 for snap in snapshots if snap.capped),
            "notes_read": sum(snap.note_count for snap in snapshots),
            "themes": sum(len(write.themes) for write in self.writes),
            "states": self.states,
            "noise_notes": self.noise,
        }
        if self.stages:
            found["stages_s"] = self.stages
        if self.entity_s:
            found["entity_s"] = {
                "mean": sum(self.entity_s) / len(self.entity_s),
                "p50": percentile(self.entity_s, 50),
                "p95": percentile(self.entity_s, 95),
                "max": max(self.entity_s),
            }
        return found


def measured_pass(
    store: TraceStore, ceiling: int, cutoff: int, label: str, *, stages: bool
) -> PassFigures:
    """`pass_at(cutoff)` timed whole and per entity, and stage by stage when `stages`."""
    watch = Stopwatch() if stages else None
    recorder = _TimedStore(store, watch)
    theme_pass_ = theme_pass(cast(ThemeRecords, recorder), ceiling)
    per_entity: list[float] = []
    snapshot_entity = theme_pass_.snapshot_entity

    def timed_entity(project: str, entity: Entity, cutoff: int) -> str | None:
        began = time.perf_counter()
        try:
            return snapshot_entity(project, entity, cutoff)
        finally:
            per_entity.append(time.perf_counter() - began)

    theme_pass_.snapshot_entity = timed_entity  # type: ignore[method-assign]
    with timed_module(watch) if watch is not None else nullcontext():
        began = time.perf_counter()
        if watch is not None:
            watch.start()
        written = theme_pass_.pass_at(cutoff)
        if watch is not None:
            watch.stop()
        seconds = time.perf_counter() - began
    if len(written) != len(recorder.writes):
        raise AssertionError(f"{len(recorder.writes)} snapshots built, {len(written)} written")
    spent = watch.spent if watch is not None else {}
    return PassFigures(label, seconds, spent, recorder.writes, per_entity)


# --- scenarios -------------------------------------------------------------------------------


def scenario_a(backend: str, notes: int, scratch: Path) -> dict[str, Any]:
    """One entity, one aspect, `notes` notes, the ceiling at `notes`: three passes."""
    notes_ = corpus([Entity("agent", "bench-agent")], [note_texts(notes, SEED)], roots=True)
    with opened(backend, scratch) as store:
        load_s = write_notes(store, notes_)
        load_average = os.getloadavg()[0]
        print(f"{backend}: wrote {notes:,} notes in {load_s:.1f} s", flush=True)
        figures = [
            measured_pass(store, notes, FIRST_CUTOFF, "first", stages=True),
            measured_pass(store, notes, FIRST_CUTOFF + _HOUR_NS, "second", stages=True),
            measured_pass(store, notes, FIRST_CUTOFF + 2 * _HOUR_NS, "third", stages=False),
        ]
    for figure in figures:
        if len(figure.writes) != 1 or figure.writes[0].snapshot.note_count != notes:
            raise AssertionError(f"the {figure.label} pass did not read all {notes} notes once")
    rows: list[dict[str, object]] = [
        {"stage": stage, **{f.label: f.stages[stage] for f in figures[:2]}} for stage in STAGES
    ]
    rows.append({"stage": "total", **{f.label: f.seconds for f in figures}})
    print_table(
        f"scenario A, {backend}: a pass over {notes:,} notes of one entity, seconds "
        "(first: no earlier snapshot; second and third, untimed inside: the same notes again)",
        rows,
        float_digits=3,
    )
    print_table(
        f"scenario A, {backend}: what the passes wrote",
        [
            {
                "pass": f.label,
                "themes": sum(len(w.themes) for w in f.writes),
                "states": ", ".join(f"{k} {v}" for k, v in f.states.items()),
                "noise notes": f.noise,
            }
            for f in figures
        ],
    )
    return {
        "backend": backend,
        "load_average_1m": load_average,
        "notes": notes,
        "distinct_texts": notes_.distinct_texts(),
        "ceiling": notes,
        "roots": True,
        "load_s": load_s,
        "passes": [f.to_dict() for f in figures],
        "within_target": max(f.seconds for f in figures) <= TARGET_S,
    }


def scenario_b(
    backend: str,
    entities: int,
    per_entity: int,
    ceiling: int,
    scratch: Path,
    *,
    bulk: bool = False,
) -> dict[str, Any]:
    """`entities` entities of `per_entity` notes each, one pass with the ceiling at `ceiling`.
    Each entity's texts are its own (the fixture's numbers drawn from a seed of its own); with
    `bulk`, every entity has the same texts and the load takes `bulk_load`'s shortcuts."""
    if per_entity <= ceiling:
        raise ValueError("scenario B needs more notes per entity than the ceiling")
    kind = FALLBACK_KIND if bulk else "agent"
    names = [Entity(kind, f"bench-agent-{number:03d}") for number in range(entities)]
    if bulk:
        shared = note_texts(per_entity, SEED)
        notes = corpus(names, [shared] * entities, roots=False)
    else:
        notes = corpus(
            names, [note_texts(per_entity, SEED + n) for n in range(entities)], roots=True
        )
    with opened(backend, scratch) as store:
        with bulk_load() if bulk else nullcontext():
            load_s = write_notes(store, notes)
        load_average = os.getloadavg()[0]
        print(f"{backend}: wrote {entities} x {per_entity:,} notes in {load_s:.1f} s", flush=True)
        figure = measured_pass(store, ceiling, FIRST_CUTOFF, "first", stages=True)
    snapshots = [write.snapshot for write in figure.writes]
    capped = sum(1 for snap in snapshots if snap.capped)
    if len(snapshots) != entities or capped != entities:
        raise AssertionError(f"{len(snapshots)} snapshots written, {capped} capped, of {entities}")
    if any(snap.note_count != ceiling for snap in snapshots):
        raise AssertionError(f"a capped snapshot did not read {ceiling} notes")
    result = figure.to_dict()
    print_table(
        f"scenario B, {backend}: a pass over {entities} entities of {per_entity:,} notes, "
        f"ceiling {ceiling:,} (seconds)",
        [
            {
                "notes read": result["notes_read"],
                "pass": figure.seconds,
                "entity mean": result["entity_s"]["mean"],
                "entity p95": result["entity_s"]["p95"],
                "entity max": result["entity_s"]["max"],
                "capped": f"{capped}/{entities}",
                "themes": result["themes"],
            }
        ],
        float_digits=3,
    )
    print_table(
        f"scenario B, {backend}: the pass by stage, all entities (seconds)",
        [{"stage": stage, "seconds": spent} for stage, spent in figure.stages.items()]
        + [{"stage": "total", "seconds": figure.seconds}],
        float_digits=3,
    )
    return {
        "backend": backend,
        "entities": entities,
        "notes_per_entity": per_entity,
        "ceiling": ceiling,
        "default_ceiling": ceiling == _SETTINGS.max_notes_per_pass,
        "roots": notes.roots,
        "bulk_load": bulk,
        "load_average_1m": load_average,
        "notes_stored": notes.size,
        "distinct_texts": notes.distinct_texts(),
        "load_s": load_s,
        **result,
    }


@dataclass(slots=True)
class Plan:
    """What one run measures."""

    notes: int = DEFAULT_NOTES
    entities: int = 100
    per_entity: int = 2_500
    ceiling: int = 2_000
    backends: Sequence[str] = BACKENDS
    b_backends: Sequence[str] = BACKENDS
    default_ceiling: bool = False
    results_dir: Path = RESULTS_DIR


def run(plan: Plan) -> dict[str, Any]:
    """Measure both scenarios on every backend, print the tables and write the result."""
    a_results, b_results = [], []
    for backend in plan.backends:
        with tempfile.TemporaryDirectory(prefix=f"bench-passes-{backend}-") as scratch:
            a_results.append(scenario_a(backend, plan.notes, Path(scratch)))
    for backend in plan.b_backends:
        with tempfile.TemporaryDirectory(prefix=f"bench-passes-{backend}-") as scratch:
            b_results.append(
                scenario_b(backend, plan.entities, plan.per_entity, plan.ceiling, Path(scratch))
            )
    if plan.default_ceiling:
        ceiling = _SETTINGS.max_notes_per_pass
        with tempfile.TemporaryDirectory(prefix="bench-passes-sqlite-") as scratch:
            b_results.append(
                scenario_b(
                    "sqlite", plan.entities, ceiling + 500, ceiling, Path(scratch), bulk=True
                )
            )
    document = {
        "description": DESCRIPTION,
        "config": {
            "fixture": repo_relative(FIXTURE),
            "key": KEY.decode(),
            "seed": SEED,
            "aspect": ASPECT,
            "window_days": _SETTINGS.window_days,
            "page_size": _SETTINGS.page_size,
            "min_notes_to_cluster": _SETTINGS.min_notes_to_cluster,
            "default_max_notes_per_pass": _SETTINGS.max_notes_per_pass,
            "spread_days": SPREAD_NS // _DAY_NS,
            "target_s": TARGET_S,
            "stages": list(STAGES),
            "clock": "wall (time.perf_counter), seconds",
            "load_average_1m": "the machine's when the notes were written, just before the pass",
        },
        "scenario_a": a_results,
        "scenario_b": b_results,
    }
    path = write_result(NAME, document, plan.results_dir)
    print(f"wrote {path}", flush=True)
    return document


def _run_from_bench(config: BenchConfig) -> Mapping[str, Any]:
    return run(Plan(notes=config.events or DEFAULT_NOTES, results_dir=config.results_dir))


BENCHMARK = Benchmark(name=NAME, description=DESCRIPTION, run=_run_from_bench)


def _at_least(floor: int) -> Callable[[str], int]:
    def parse(text: str) -> int:
        value = int(text)
        if value < floor:
            raise argparse.ArgumentTypeError(f"must be at least {floor}: {text}")
        return value

    return parse


def build_parser() -> argparse.ArgumentParser:
    defaults = Plan()
    parser = argparse.ArgumentParser(
        prog="python -m bench.intelligence.passes", description=DESCRIPTION
    )
    floor = _SETTINGS.min_notes_to_cluster
    parser.add_argument("--notes", type=_at_least(floor), default=defaults.notes)
    parser.add_argument("--entities", type=_at_least(1), default=defaults.entities)
    parser.add_argument("--per-entity", type=_at_least(floor + 1), default=defaults.per_entity)
    parser.add_argument("--ceiling", type=_at_least(floor), default=defaults.ceiling)
    parser.add_argument("--backends", nargs="+", choices=BACKENDS, default=list(BACKENDS))
    parser.add_argument(
        "--b-backends",
        nargs="*",
        choices=BACKENDS,
        default=list(BACKENDS),
        help="backends of scenario B (none: skip it)",
    )
    parser.add_argument(
        "--default-ceiling",
        action="store_true",
        help="also scenario B at the default ceiling (20,000; 20,500 notes each), SQLite",
    )
    parser.add_argument("--results-dir", type=Path, default=RESULTS_DIR)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    run(
        Plan(
            notes=args.notes,
            entities=args.entities,
            per_entity=args.per_entity,
            ceiling=args.ceiling,
            backends=args.backends,
            b_backends=args.b_backends,
            default_ceiling=args.default_ceiling,
            results_dir=args.results_dir,
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
