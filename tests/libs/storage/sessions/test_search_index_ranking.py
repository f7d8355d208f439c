"""The embedded index answers a project-and-types search the same whichever way it takes: the
unfiltered query checked by fast fields, or the filtered query. Ties at the limit, another
project's better hits and filters too narrow for the first try all give the filtered answer."""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path

import pytest

from mcpd.sessions.search import index as index_module
from mcpd.sessions.search.analysis import query_units
from mcpd.sessions.search.documents import IndexDoc, IndexFilter, IndexHit
from mcpd.sessions.search.index import SearchIndex

WORDS = ("alpha", "beta", "gamma", "delta", "kappa", "sigma", "omega", "zeta")
TYPES = ("user_input", "assistant_response", "tool_call", "tool_response", "reasoning")


def doc(project: str, number: int, event_type: str, text: str, stamp: int) -> IndexDoc:
    return IndexDoc(
        project=project,
        event_id=f"evt_{project}_{number:05d}",
        session_id=f"ses_{project}_{number % 7}",
        turn_id=f"trn_{project}_{number % 13}",
        type=event_type,
        harness="codex",
        source="codex",
        timestamp_ns=stamp,
        text=text,
    )


def corpus() -> list[IndexDoc]:
    """Two projects of uneven size and mixed types; texts of one to twelve words, so BM25
    spreads the scores, and runs of identical texts, so scores tie."""
    rng = random.Random(7)
    docs: list[IndexDoc] = []
    for project, size in (("main", 900), ("other", 300)):
        for number in range(size):
            length = rng.randint(1, 12)
            text = " ".join(rng.choice(WORDS) for _ in range(length))
            docs.append(doc(project, number, rng.choice(TYPES), text, rng.randrange(10**6)))
        for number in range(size, size + 40):
            docs.append(doc(project, number, TYPES[number % 2], "xenon yttrium", number))
    return docs


@pytest.fixture(scope="module")
def index(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SearchIndex]:
    built = SearchIndex(Path(tmp_path_factory.mktemp("index")) / "events")
    built.update(docs=corpus())
    yield built
    built.close()


@pytest.fixture
def filtered_paths(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts the searches that ran the filtered query."""
    calls: list[int] = []
    original = SearchIndex._filtered

    def counted(self: SearchIndex, *args: object, **kwargs: object) -> object:
        calls.append(1)
        return original(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(SearchIndex, "_filtered", counted)
    return calls


def search(
    index: SearchIndex, text: str, where: IndexFilter, limit: int
) -> tuple[list[IndexHit], bool]:
    return index.search(query_units(text), where, limit)


def filtered_only(
    index: SearchIndex, text: str, where: IndexFilter, limit: int, monkeypatch: pytest.MonkeyPatch
) -> tuple[list[IndexHit], bool]:
    with monkeypatch.context() as patch:
        patch.setattr(index_module, "PREFETCH_MAX", 0)
        return search(index, text, where, limit)


QUERIES = ("alpha", "kappa sigma", "xenon yttrium", "beta omega zeta", "delta", "gamma kappa")
FILTERS = (
    ("user_input", "assistant_response"),
    TYPES,
    ("tool_response",),
    ("reasoning", "tool_call", "tool_response"),
)


@pytest.mark.parametrize("limit", [1, 5, 10, 50])
@pytest.mark.parametrize("types", FILTERS)
def test_both_paths_rank_alike(
    index: SearchIndex,
    types: tuple[str, ...],
    limit: int,
    monkeypatch: pytest.MonkeyPatch,
    filtered_paths: list[int],
) -> None:
    where = IndexFilter(project="main", event_types=types)
    for text in QUERIES:
        expected = filtered_only(index, text, where, limit, monkeypatch)
        filtered_paths.clear()
        assert search(index, text, where, limit) == expected, text
        assert all(hit.event_id.startswith("evt_main_") for hit in expected[0])


def test_the_first_try_answers_a_broad_filter_alone(
    index: SearchIndex, filtered_paths: list[int]
) -> None:
    hits, truncated = search(index, "alpha", IndexFilter(project="main", event_types=TYPES), 10)
    assert filtered_paths == []
    assert len(hits) == 10
    assert truncated


def test_a_tie_across_the_limit_is_ordered_newest_first(
    index: SearchIndex, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The forty "xenon yttrium" documents score alike, and every other one is of the asked type.
    where = IndexFilter(project="main", event_types=("user_input",))
    hits, truncated = search(index, "xenon yttrium", where, 5)
    assert truncated
    top_score = hits[0].score
    assert all(hit.score == top_score for hit in hits)
    stamps = [hit.timestamp_ns for hit in hits]
    assert stamps == sorted(stamps, reverse=True)
    assert (hits, truncated) == filtered_only(index, "xenon yttrium", where, 5, monkeypatch)


def test_another_projects_better_hits_never_show(index: SearchIndex) -> None:
    where = IndexFilter(project="other", event_types=TYPES)
    hits, _ = search(index, "kappa sigma", where, 50)
    assert hits
    assert all(hit.event_id.startswith("evt_other_") for hit in hits)


def test_a_filter_too_narrow_for_the_first_try_runs_filtered(
    index: SearchIndex, filtered_paths: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(index_module, "PREFETCH_MAX", 150)
    where = IndexFilter(project="other", event_types=("reasoning",))
    hits, _ = search(index, "alpha", where, 10)
    assert filtered_paths == [1]
    assert hits
    assert all(hit.event_id.startswith("evt_other_") for hit in hits)


def assert_first_try_declines(
    index: SearchIndex,
    text: str,
    where: IndexFilter,
    depth: int,
    filtered_paths: list[int],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A first read of `depth` hits cannot prove its answer: the filtered query decides."""
    expected = filtered_only(index, text, where, 5, monkeypatch)
    monkeypatch.setattr(index_module, "PREFETCH_MARGIN", 0)
    monkeypatch.setattr(index_module, "PREFETCH_MIN", depth)
    filtered_paths.clear()
    assert search(index, text, where, 5) == expected
    assert filtered_paths == [1]


def test_a_first_try_short_of_matches_falls_back(
    index: SearchIndex, filtered_paths: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    where = IndexFilter(project="main", event_types=("tool_response",))
    assert_first_try_declines(index, "alpha", where, 3, filtered_paths, monkeypatch)


def test_a_narrowed_search_runs_filtered(index: SearchIndex, filtered_paths: list[int]) -> None:
    where = IndexFilter(project="main", event_types=TYPES, session_id="ses_main_3")
    hits, _ = search(index, "alpha", where, 10)
    assert filtered_paths == [1]
    assert hits
    assert all(int(hit.event_id.rsplit("_", 1)[1]) % 7 == 3 for hit in hits)


@pytest.mark.parametrize("depth", [6, 10, 12, 30])
def test_a_tie_straddling_the_first_read_falls_back(
    index: SearchIndex, depth: int, filtered_paths: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    # The first read stops inside the forty tied documents: tied ones it did not read may be
    # newer, so only the filtered query can order the tie.
    where = IndexFilter(project="main", event_types=("user_input",))
    assert_first_try_declines(index, "xenon yttrium", where, depth, filtered_paths, monkeypatch)
