"""The synthetic transcript generator of ``bench/sessions``: deterministic, parsed with zero
errors by the real parsers into exactly the events it promises, and Unicode-rich."""

from __future__ import annotations

import random
import re
from collections import Counter
from pathlib import Path

import pytest

from bench.__main__ import build_parser
from bench.config import BenchConfig
from bench.registry import BENCHMARKS
from bench.sessions.generator import (
    Corpus,
    GeneratorConfig,
    generate,
    load_manifest,
    session_sizes,
)
from bench.sessions.run import Latency, fts5_match, fts5_text
from bench.sessions.vocabulary import Vocabulary, fold_accents
from services.ingest.transcripts.importer import read_complete_lines
from services.ingest.transcripts.registry import parser_for

EVENTS = 2_500
SMALL = GeneratorConfig(line_pool=4_000, vocabulary_size=5_000)

SCRIPTS = {
    "accented Latin": re.compile("[àâäáçéèêëíîïñóôöúùûüßÀ-ÖØ-öø-ÿ]"),
    "Greek": re.compile("[\u0370-\u03ff]"),
    "Cyrillic": re.compile("[\u0400-\u04ff]"),
    "CJK": re.compile("[\u3040-\u30ff\u4e00-\u9fff]"),
    "emoji": re.compile("[\U0001f300-\U0001faff\u2600-\u27bf]"),
}


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Corpus:
    return generate(tmp_path_factory.mktemp("corpus"), EVENTS, seed=7, config=SMALL)


def _contents(root: Path) -> dict[str, bytes]:
    return {
        str(path.relative_to(root)): path.read_bytes() for path in sorted(root.rglob("*.jsonl"))
    }


def test_same_seed_same_bytes_other_seed_other_text(corpus: Corpus, tmp_path: Path) -> None:
    again = generate(tmp_path / "again", EVENTS, seed=7, config=SMALL)
    other = generate(tmp_path / "other", EVENTS, seed=8, config=SMALL)
    assert _contents(again.root) == _contents(corpus.root)
    assert again.files == corpus.files
    assert _contents(other.root) != _contents(corpus.root)


def test_manifest_round_trips(corpus: Corpus) -> None:
    loaded = load_manifest(corpus.root)
    assert loaded is not None
    assert loaded.files == corpus.files
    assert (loaded.events, loaded.seed, loaded.config) == (EVENTS, 7, SMALL)


def test_real_parsers_read_every_file_with_zero_errors(corpus: Corpus) -> None:
    types: Counter[str] = Counter()
    harnesses: Counter[str] = Counter()
    for file in corpus.files:
        path = corpus.root / file.path
        parsed = parser_for(file.harness).parse(read_complete_lines(path).lines, path=str(path))
        assert parsed.errors == [], file.path
        assert len(parsed.events) == file.events, file.path
        assert parsed.session_key == file.session_key
        types.update(event.type.value for event in parsed.events)
        harnesses[file.harness] += 1
    assert sum(file.events for file in corpus.files) == EVENTS
    assert set(harnesses) == {"codex", "claude-code"}
    for kind in ("user_input", "assistant_response", "reasoning", "tool_call", "tool_response"):
        assert types[kind] > 0, kind
    assert types["tool_call"] == types["tool_response"]


def test_long_tool_outputs_and_unicode_in_several_scripts(corpus: Corpus) -> None:
    text = "".join((corpus.root / file.path).read_text(encoding="utf-8") for file in corpus.files)
    for script, pattern in SCRIPTS.items():
        assert pattern.search(text), script
    longest = max(
        len(event.text)
        for file in corpus.files
        for event in parser_for(file.harness)
        .parse(read_complete_lines(corpus.root / file.path).lines, path=file.path)
        .events
        if event.type.value == "tool_response"
    )
    assert longest > 4_000


def test_session_sizes_sum_exactly_within_bounds() -> None:
    config = GeneratorConfig()
    for events in (10, 60, 1_999, 123_457):
        sizes = session_sizes(events, random.Random(events), config)
        assert sum(size for _, size in sizes) == events
        assert all(size <= config.max_session_events for _, size in sizes[:-1])
        if events >= config.min_session_events:
            assert all(size >= config.min_session_events for _, size in sizes)


def test_queries_are_one_to_three_words() -> None:
    vocabulary = Vocabulary(size=2_000, seed=1)
    queries = vocabulary.queries(random.Random(3), 200)
    assert {query.words for query in queries} == {1, 2, 3}
    assert all(len(query.text.split()) == query.words for query in queries if query.kind != "zh")
    assert any(query.kind == "tech" for query in queries)
    assert any(query.kind != "tech" for query in queries)
    assert fold_accents("Größe résumé") == "Grosse resume"


def test_fts5_sees_the_same_units_as_mcpd() -> None:
    assert fts5_match("Tantivy café") == '"tantivy" OR "cafe"'
    assert fts5_match("東京 index") == '"東 京" OR "index"'
    assert fts5_match("  ") is None
    assert fts5_text("在东京 index") == " 在  东  京  index"
    assert fts5_text("plain ascii") == "plain ascii"


def test_latency_summary() -> None:
    result = Latency.of("mix", [0.001 * n for n in range(1, 101)], errors=2)
    assert result.count == 100
    assert result.errors == 2
    assert result.p50_ms == pytest.approx(50.5)
    assert result.p95_ms == pytest.approx(95.05)
    assert Latency.of("none", []).p95_ms is None


def test_registered_with_an_events_option() -> None:
    assert "sessions" in BENCHMARKS
    args = build_parser().parse_args(["sessions", "--events", "5000"])
    assert args.events == 5000
    assert BenchConfig(events=5000).events == 5000
    with pytest.raises(ValueError, match="events"):
        BenchConfig(events=3)
