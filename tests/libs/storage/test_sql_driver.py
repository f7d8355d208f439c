"""Statements run on the driver's cursor (`DriverStatement`), on SQLite and PostgreSQL: values
are written and read exactly as through SQLAlchemy (JSON documents, SQL NULL for None, floats,
64-bit integers), an UPDATE compiles for the columns each call writes, and a driver error is
raised as SQLAlchemy raises it, with nothing of the failed transaction stored."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import bindparam, func, insert, select, update
from sqlalchemy.exc import IntegrityError

from mcpd.storage.sql.driver import DriverStatement
from mcpd.storage.sql.engine import read_connection
from mcpd.storage.sql.schema.run import parked_events
from mcpd.storage.sql.stores import SqlRunStore

P = parked_events.c
BY_PROJECT = select(parked_events).where(P.project == bindparam("p_project")).order_by(P.event_id)
INSERT = DriverStatement(insert(parked_events))
READ = DriverStatement(BY_PROJECT)
SET_BY_ID = DriverStatement(
    update(parked_events).where(
        P.project == bindparam("p_project"), P.event_id == bindparam("p_event_id")
    )
)


def parked(event_id: str, payload: Any, *, project: str = "p") -> dict[str, Any]:
    return {
        "project": project,
        "event_id": event_id,
        "event": "approved",
        "key": "k-1",
        "payload": payload,
        "parked_at": 2**62,
        "expires_at": 2**62 + 1,
    }


DOCUMENTS = [
    parked("a", {"text": "refund ✓", "n": [1, 2.5, None], "nested": {"ok": True}}),
    parked("b", None),
    parked("c", [None, "x"]),
    parked("d", "a bare string"),
    parked("e", {"x": 1}, project="q"),
]


def test_rows_written_and_read_as_sqlalchemy_writes_and_reads_them(
    run_store: SqlRunStore,
) -> None:
    with run_store.engine.begin() as conn:
        INSERT.executemany(conn, DOCUMENTS[:2])
        conn.execute(insert(parked_events), DOCUMENTS[2:])
    with run_store.engine.connect() as conn:
        through_driver = READ.rows(conn, {"p_project": "p"})
        through_sqlalchemy = [
            dict(row) for row in conn.execute(BY_PROJECT, {"p_project": "p"}).mappings()
        ]
        null_payloads = conn.execute(
            select(P.event_id).where(P.payload.is_(None)).order_by(P.event_id)
        ).scalars()
        assert list(null_payloads) == ["b"]  # None is SQL NULL, not the JSON literal null
    assert through_driver == through_sqlalchemy
    assert through_driver == [row for row in DOCUMENTS if row["project"] == "p"]
    assert [row["payload"] for row in through_driver] == [
        {"text": "refund ✓", "n": [1, 2.5, None], "nested": {"ok": True}},
        None,
        [None, "x"],
        "a bare string",
    ]


def test_first_and_aggregates_read_with_their_types(run_store: SqlRunStore) -> None:
    totals = DriverStatement(
        select(
            func.count().label("n"),
            func.coalesce(func.max(P.parked_at), 0).label("latest"),
        ).where(P.project == bindparam("p_project"))
    )
    with run_store.engine.begin() as conn:
        INSERT.executemany(conn, DOCUMENTS)
        assert totals.first(conn, {"p_project": "p"}) == {"n": 4, "latest": 2**62}
        assert totals.first(conn, {"p_project": "nobody"}) == {"n": 0, "latest": 0}
        assert READ.first(conn, {"p_project": "nobody"}) is None
        assert READ.rows(conn, {"p_project": "q"})[0]["payload"] == {"x": 1}


def test_an_update_sets_exactly_the_columns_each_call_names(run_store: SqlRunStore) -> None:
    with run_store.engine.begin() as conn:
        INSERT.executemany(conn, DOCUMENTS)
        SET_BY_ID.execute(conn, {"p_project": "p", "p_event_id": "a", "key": "k-2"})
        SET_BY_ID.executemany(
            conn,
            [
                {"p_project": "p", "p_event_id": "b", "payload": {"late": 1}, "expires_at": 7},
                {"p_project": "p", "p_event_id": "c", "payload": None, "expires_at": 8},
            ],
        )
        rows = {row["event_id"]: row for row in READ.rows(conn, {"p_project": "p"})}
    assert (rows["a"]["key"], rows["a"]["payload"]["nested"]) == ("k-2", {"ok": True})
    assert (rows["b"]["key"], rows["b"]["payload"], rows["b"]["expires_at"]) == (
        "k-1",
        {"late": 1},
        7,
    )
    assert (rows["c"]["payload"], rows["c"]["expires_at"]) == (None, 8)
    assert rows["d"] == DOCUMENTS[3]


def test_a_driver_error_is_sqlalchemys_and_the_transaction_rolls_back(
    run_store: SqlRunStore,
) -> None:
    with pytest.raises(IntegrityError) as raised, run_store.engine.begin() as conn:  # noqa: PT012
        INSERT.execute(conn, DOCUMENTS[0])
        INSERT.execute(conn, DOCUMENTS[0])  # the same (project, event_id)
    assert "parked_events" in str(raised.value.statement)
    with run_store.engine.connect() as conn:
        assert READ.rows(conn, {"p_project": "p"}) == []


def test_a_read_on_a_fresh_connection_runs_in_a_transaction_of_the_store(
    run_store: SqlRunStore,
) -> None:
    """A reader's statements share one transaction (on SQLite, one snapshot), as through
    SQLAlchemy, which begins one before the first statement."""
    with read_connection(run_store.engine) as conn:
        assert not conn.in_transaction()
        READ.rows(conn, {"p_project": "p"})
        assert conn.in_transaction()
        with run_store.engine.begin() as other:
            INSERT.execute(other, DOCUMENTS[0])
        seen = READ.rows(conn, {"p_project": "p"})
        conn.rollback()
        assert conn.in_transaction() is False
        assert READ.rows(conn, {"p_project": "p"})[0]["event_id"] == "a"
    if run_store.engine.dialect.name == "sqlite":
        assert seen == []  # the snapshot the first read took


def test_expanding_parameters_are_refused(run_store: SqlRunStore) -> None:
    some = DriverStatement(
        select(P.event_id).where(P.event_id.in_(bindparam("ids", expanding=True)))
    )
    with run_store.engine.connect() as conn, pytest.raises(ValueError, match="expanding"):
        some.rows(conn, {"ids": ["a"]})
