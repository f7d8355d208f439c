"""search: ranking and ties, limits, filters, project isolation, Unicode folding, snippets,
normalized scores and the exclusion of the MCP server's own calls, on every backend."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta

from mcpd.sessions.store import SearchQuery, SearchResult
from tests.libs.storage.sessions.builders import (
    ASSISTANT,
    REASONING,
    T0,
    TOOL_CALL,
    TOOL_RESPONSE,
    USER,
    assemble,
    event_id,
    session_id,
    turn_id,
)
from tests.libs.storage.sessions.conftest import AnySessionStore

DEFAULT_TYPES = ("user_input", "assistant_response")


def search(
    store: AnySessionStore,
    text: str,
    *,
    project: str = "p",
    types: Sequence[str] = DEFAULT_TYPES,
    limit: int = 10,
    **scope: str,
) -> SearchResult:
    return store.search(
        SearchQuery(project=project, text=text, event_types=types, limit=limit, **scope)
    )


def ids(result: SearchResult) -> list[str]:
    return [hit.event.id for hit in result.hits]


def test_more_matching_terms_rank_higher(store: AnySessionStore) -> None:
    store.write_session(
        "p",
        assemble(
            "s1",
            [
                [(USER, "the alpha release notes")],
                [(USER, "alpha and beta releases together")],
                [(USER, "nothing relevant here")],
                [(USER, "beta only")],
            ],
        ),
    )
    result = search(store, "alpha beta")
    assert ids(result)[0] == event_id("s1", 2, 1)
    assert set(ids(result)) == {event_id("s1", t, 1) for t in (1, 2, 4)}
    assert result.truncated is False


def test_scores_are_normalized(store: AnySessionStore) -> None:
    store.write_session(
        "p",
        assemble("s1", [[(USER, "kiwi kiwi kiwi mango")], [(USER, "kiwi")], [(USER, "mango")]]),
    )
    result = search(store, "kiwi mango")
    scores = [hit.score for hit in result.hits]
    assert scores[0] == 1.0
    assert all(0.0 <= score <= 1.0 for score in scores)
    assert scores == sorted(scores, reverse=True)
    single = search(store, "kiwi kiwi", limit=1)
    assert [hit.score for hit in single.hits] == [1.0]


def test_ties_order_by_newest_then_id(store: AnySessionStore) -> None:
    # Identical texts score alike: newest first, then by id.
    store.write_session(
        "p", assemble("a", [[(USER, "needle")], [(USER, "needle")]], step=timedelta(0))
    )
    store.write_session("p", assemble("b", [[(USER, "needle")]], start=T0 + timedelta(hours=1)))
    result = search(store, "needle")
    assert ids(result) == [event_id("b", 1, 1), event_id("a", 1, 1), event_id("a", 2, 1)]
    assert {hit.score for hit in result.hits} == {1.0}


def test_a_tie_across_the_limit_keeps_the_newest(store: AnySessionStore) -> None:
    # Thirty equal hits, written oldest first: the limit must keep the five newest, not
    # whichever the engine met first.
    store.write_session("p", assemble("s1", [[(USER, "same words")] for _ in range(30)]))
    result = search(store, "words", limit=5)
    assert ids(result) == [event_id("s1", t, 1) for t in range(30, 25, -1)]
    assert result.truncated is True


def test_limit_and_truncated(store: AnySessionStore) -> None:
    store.write_session("p", assemble("s1", [[(USER, f"apple {i}")] for i in range(3)]))
    assert len(search(store, "apple", limit=3).hits) == 3
    assert search(store, "apple", limit=3).truncated is False
    two = search(store, "apple", limit=2)
    assert (len(two.hits), two.truncated) == (2, True)
    none = search(store, "banana")
    assert (none.hits, none.truncated) == ([], False)


def test_event_type_filter(store: AnySessionStore) -> None:
    store.write_session(
        "p",
        assemble(
            "s1",
            [
                [
                    (USER, "clippy failure"),
                    (REASONING, "clippy is failing"),
                    (TOOL_CALL, "cargo clippy", {"tool_name": "Bash"}),
                    (TOOL_RESPONSE, "error: clippy found 3 warnings"),
                    (ASSISTANT, "fixed the clippy failure"),
                ]
            ],
        ),
    )
    default = search(store, "clippy")
    assert sorted(ids(default)) == [event_id("s1", 1, 1), event_id("s1", 1, 5)]
    tools = search(store, "clippy", types=["tool_call", "tool_response"])
    assert sorted(ids(tools)) == [event_id("s1", 1, 3), event_id("s1", 1, 4)]
    assert ids(search(store, "clippy", types=["reasoning"])) == [event_id("s1", 1, 2)]
    # A tool's name is searchable text of its events.
    assert ids(search(store, "bash", types=["tool_call"])) == [event_id("s1", 1, 3)]


def test_session_and_turn_scope(store: AnySessionStore) -> None:
    store.write_session("p", assemble("s1", [[(USER, "shared topic")], [(USER, "shared topic")]]))
    store.write_session("p", assemble("s2", [[(USER, "shared topic")]]))
    assert sorted(ids(search(store, "topic", session_id=session_id("s1")))) == [
        event_id("s1", 1, 1),
        event_id("s1", 2, 1),
    ]
    assert ids(search(store, "topic", turn_id=turn_id("s1", 2))) == [event_id("s1", 2, 1)]
    assert ids(search(store, "topic", session_id="session:none")) == []


def test_harness_and_source_filters(store: AnySessionStore) -> None:
    for key, source, harness in [
        ("pi1", "pi", "pi-coding-agent"),
        ("omp1", "omp", "pi-coding-agent"),
        ("cx1", "codex", "codex"),
    ]:
        store.write_session(
            "p", assemble(key, [[(USER, "ranking bug")]], source=source, harness=harness)
        )
    found = search(store, "ranking", harness="pi-coding-agent")
    assert sorted(ids(found)) == [event_id("omp1", 1, 1), event_id("pi1", 1, 1)]
    assert ids(search(store, "ranking", source="omp")) == [event_id("omp1", 1, 1)]
    assert ids(search(store, "ranking", harness="pi-coding-agent", source="codex")) == []
    assert ids(search(store, "ranking", harness="Codex")) == []


def test_projects_are_isolated(store: AnySessionStore) -> None:
    store.write_session("p", assemble("s1", [[(USER, "secret plan")]]))
    store.write_session("q", assemble("s1", [[(USER, "secret plan")]], project="q"))
    assert ids(search(store, "secret", project="q")) == [event_id("s1", 1, 1)]
    assert search(store, "secret", project="q").hits[0].event.session_id == session_id("s1")
    assert ids(search(store, "secret", project="nobody")) == []
    # Re-writing in one project leaves the other's index alone.
    store.write_session("q", assemble("s1", [[(USER, "other words")]], project="q"))
    assert ids(search(store, "secret", project="q")) == []
    assert ids(search(store, "secret")) == [event_id("s1", 1, 1)]


def test_unicode_case_and_diacritics_fold(store: AnySessionStore) -> None:
    texts = [
        "Meet at the Café tomorrow",
        "ÜBER alles",
        "die Straße entlang",
        "e\u0301cole normale",  # decomposed é
        "ΚΑΛΗΜΈΡΑ κόσμε",
        "Ёлка и Ель",
    ]
    store.write_session("p", assemble("s1", [[(USER, text)] for text in texts]))

    def first(query: str) -> str:
        return search(store, query).hits[0].event.text

    assert first("cafe") == texts[0]
    assert first("CAFÉ") == texts[0]
    assert first("uber") == texts[1]
    assert first("Über") == texts[1]
    assert first("strasse") == texts[2]
    assert first("straße") == texts[2]
    assert first("école") == texts[3]
    assert first("ECOLE") == texts[3]
    assert first("καλημερα") == texts[4]
    assert first("елка") == texts[5]


def test_cjk_runs_match_as_phrases(store: AnySessionStore) -> None:
    store.write_session(
        "p",
        assemble(
            "s1",
            [
                [(USER, "東京タワーに行きました")],
                [(USER, "京東のサイト")],
                [(USER, "서울에서 만나요")],
            ],
        ),
    )
    assert ids(search(store, "東京")) == [event_id("s1", 1, 1)]
    assert sorted(ids(search(store, "東"))) == [event_id("s1", 1, 1), event_id("s1", 2, 1)]
    assert ids(search(store, "서울")) == [event_id("s1", 3, 1)]
    # Mixed scripts: each run is a unit of its own, OR-ed.
    assert len(search(store, "タワー 서울").hits) == 2


def test_queries_are_words_never_syntax(store: AnySessionStore) -> None:
    store.write_session("p", assemble("s1", [[(USER, "fix the parser: AND (OR) it's NOT done")]]))
    for query in ['text:"parser', "AND OR NOT", "it's", "(parser", "parser^2 ~1 *", "\\'x'"]:
        result = search(store, query)  # none of these raises
        assert all(0 <= hit.score <= 1 for hit in result.hits)
    assert ids(search(store, "it's")) == [event_id("s1", 1, 1)]
    assert search(store, "!!! ???").hits == []


def test_snippet_is_a_window_around_a_deep_match(store: AnySessionStore) -> None:
    filler = "lorem ipsum dolor sit amet " * 120
    text = f"{filler}the Café au lait incident happened here. {filler}"
    store.write_session("p", assemble("s1", [[(USER, text)], [(USER, "a short cafe note")]]))
    result = search(store, "cafe")
    deep = next(hit for hit in result.hits if hit.event.id == event_id("s1", 1, 1))
    assert "Café au lait incident" in deep.snippet
    assert deep.snippet.startswith("…")
    assert deep.snippet.endswith("…")
    assert deep.snippet_truncated is True
    assert len(deep.snippet) <= 210
    assert deep.event.text == text  # the hit carries the full event
    short = next(hit for hit in result.hits if hit.event.id == event_id("s1", 2, 1))
    assert (short.snippet, short.snippet_truncated) == ("a short cafe note", False)


def test_snippet_of_an_early_match_starts_at_the_beginning(store: AnySessionStore) -> None:
    text = "Kubernetes rollout stuck.\n\n" + "details " * 200
    store.write_session("p", assemble("s1", [[(USER, text)]]))
    hit = search(store, "rollout").hits[0]
    assert hit.snippet.startswith("Kubernetes rollout stuck. details")
    assert hit.snippet.endswith("…")
    assert hit.snippet_truncated is True


def test_self_tool_calls_are_never_found(store: AnySessionStore) -> None:
    store.write_session(
        "p",
        assemble(
            "s1",
            [
                [
                    (USER, "search my sessions"),
                    (TOOL_CALL, "search_sessions query", {"payload": {"self_tool": True}}),
                    (TOOL_RESPONSE, "search_sessions results", {"payload": {"self_tool": True}}),
                    (TOOL_CALL, "grep search_sessions", {"payload": {"self_tool": False}}),
                ]
            ],
        ),
    )
    found = search(store, "search_sessions", types=["tool_call", "tool_response", "user_input"])
    assert sorted(ids(found)) == [event_id("s1", 1, 1), event_id("s1", 1, 4)]


def test_the_index_follows_rewrites(store: AnySessionStore) -> None:
    store.write_session("p", assemble("s1", [[(USER, "original words")], [(USER, "gone soon")]]))
    assert len(search(store, "original gone").hits) == 2
    store.write_session("p", assemble("s1", [[(USER, "replacement words")]]))
    assert search(store, "original gone").hits == []
    assert ids(search(store, "replacement")) == [event_id("s1", 1, 1)]
    assert ids(search(store, "words")) == [event_id("s1", 1, 1)]


def test_rebuilding_the_index_keeps_the_results(store: AnySessionStore) -> None:
    store.write_session(
        "p",
        assemble(
            "s1",
            [
                [(USER, "rebuild me please"), (TOOL_CALL, "rebuild", {"tool_name": "Bash"})],
                [(USER, "and rebuild this"), (TOOL_CALL, "x", {"payload": {"self_tool": True}})],
            ],
        ),
    )
    before = [(hit.event.id, hit.score, hit.snippet) for hit in search(store, "rebuild").hits]
    assert store.reconcile_search_index() == 0  # already in step
    # Three searchable events: the MCP server's own call is never indexed.
    assert store.rebuild_search_index() == 3
    after = [(hit.event.id, hit.score, hit.snippet) for hit in search(store, "rebuild").hits]
    assert after == before
