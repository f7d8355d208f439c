"""The engine behaviour the capability table relies on, checked against the real engines.

If an engine upgrade changed how it matches or folds text, the claim in
mcpd.storage.capabilities would become a lie; these tests are where that shows.
"""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import text

from mcpd.storage.clickhouse.executor import ChdbExecutor
from mcpd.storage.sql.engine import Synchronous, create_postgres_engine, create_sqlite_engine
from mcpd.storage.sql.signals.statements import folded_words

DOCS = ["Le CAFÉ est prêt", "checkout failed", "refunds issued", "ДОМ на улице"]


def test_sqlite_fts5_matches_whole_words_and_folds_unicode_case(tmp_path: Path) -> None:
    engine = create_sqlite_engine(tmp_path / "fts.db", synchronous=Synchronous.NORMAL)
    try:
        with engine.begin() as conn:
            conn.execute(text("CREATE VIRTUAL TABLE docs USING fts5(body, tokenize='unicode61')"))
            for doc in DOCS:
                conn.execute(text("INSERT INTO docs (body) VALUES (:b)"), {"b": doc})

            def search(term: str) -> list[str]:
                rows = conn.execute(
                    text("SELECT body FROM docs WHERE docs MATCH :q"), {"q": f'"{term}"'}
                )
                return [row[0] for row in rows]

            assert search("café") == ["Le CAFÉ est prêt"]  # non-ASCII case folded
            assert search("дом") == ["ДОМ на улице"]
            assert search("heck") == []  # words, not substrings
            assert search("refund") == []  # no stemming
            assert search("refunds") == ["refunds issued"]
    finally:
        engine.dispose()


def test_clickhouse_ilike_matches_substrings_and_folds_unicode_case(tmp_path: Path) -> None:
    executor = ChdbExecutor(tmp_path / "ch")
    try:

        def search(term: str) -> list[str]:
            rows = executor.query(
                "SELECT doc FROM (SELECT arrayJoin({docs:Array(String)}) AS doc) "
                "WHERE doc ILIKE concat('%', {q:String}, '%') ORDER BY doc",
                {"docs": DOCS, "q": term},
            )
            return [row[0] for row in rows]

        assert search("café") == ["Le CAFÉ est prêt"]
        assert search("дом") == ["ДОМ на улице"]
        assert search("heck") == ["checkout failed"]  # substrings
    finally:
        executor.close()


def test_postgres_tsvector_of_casefolded_words_matches_words(postgres_url: str) -> None:
    engine = create_postgres_engine(postgres_url)
    try:
        with engine.connect() as conn:

            def matches(doc: str, term: str) -> bool:
                # Both sides split and folded by the daemon, as the store indexes and queries.
                query = " & ".join(folded_words(term).split())
                result = conn.execute(
                    text("SELECT CAST(:d AS tsvector) @@ CAST(:q AS tsquery)"),
                    {"d": folded_words(doc), "q": query},
                ).scalar_one()
                return bool(result)

            assert matches("Le CAFÉ est prêt", "café")
            assert matches("ДОМ на улице", "Дом")
            assert not matches("checkout failed", "heck")
            assert not matches("refunds issued", "refund")
            assert matches("refunds issued", "ISSUED refunds")
    finally:
        engine.dispose()
