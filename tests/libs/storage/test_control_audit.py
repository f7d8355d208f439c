"""The control store's audit log: appending, and paging newest first, on SQLite and PostgreSQL."""

from __future__ import annotations

import base64
import json

import pytest
from google.protobuf import timestamp_pb2
from sqlalchemy import select

from mcpd.model.v1 import account_pb2, enums_pb2
from mcpd.runtime.errors import InvalidArgument
from mcpd.storage.sql import audit
from mcpd.storage.sql.control_store import SqlControlStore
from mcpd.storage.sql.schema import control
from tests.libs.storage.helpers import record_statements

BASE_NS = 1_767_225_600_123_456_789  # 2026-01-01, with nanoseconds


def event(
    number: int,
    *,
    project: str = "acme",
    at: int | None = None,
    result: enums_pb2.AuditResult.ValueType = enums_pb2.AUDIT_RESULT_ALLOWED,
    resource: str | None = None,
) -> account_pb2.AuditEvent:
    """Event `number`; by default one second after event `number - 1`. Ids are zero-padded
    digits, which sort alike in every collation."""
    moment = BASE_NS + number * 1_000_000_000 if at is None else at
    seconds, nanos = divmod(moment, 1_000_000_000)
    return account_pb2.AuditEvent(
        audit_id=f"{project}-{number:06d}",
        timestamp=timestamp_pb2.Timestamp(seconds=seconds, nanos=nanos),
        principal="3f2a9c",
        subject="",
        action="get_trace",
        project=project,
        resource=resource,
        result=result,
        count=1,
    )


def walk(store: SqlControlStore, project: str, limit: int) -> list[list[account_pb2.AuditEvent]]:
    pages: list[list[account_pb2.AuditEvent]] = []
    cursor: str | None = None
    while True:
        page = store.list_audit(project, cursor=cursor, limit=limit)
        pages.append(page.events)
        if page.next_cursor is None:
            return pages
        cursor = page.next_cursor


def newest_first(events: list[account_pb2.AuditEvent]) -> list[str]:
    ordered = sorted(
        events, key=lambda e: (e.timestamp.seconds, e.timestamp.nanos, e.audit_id), reverse=True
    )
    return [e.audit_id for e in ordered]


def ids(events: list[account_pb2.AuditEvent]) -> list[str]:
    return [e.audit_id for e in events]


def test_events_round_trip_newest_first(control_store: SqlControlStore) -> None:
    first = event(1, resource="trace-1")
    second = event(2, result=enums_pb2.AUDIT_RESULT_REFUSED)
    empty_resource = event(3, resource="")
    control_store.append_audit([first, second, empty_resource])

    page = control_store.list_audit("acme", cursor=None, limit=10)

    assert page.events == [empty_resource, second, first]
    assert page.events[0].HasField("resource")
    assert not page.events[1].HasField("resource")
    assert page.events[2].timestamp.nanos == 123_456_789  # nanoseconds kept
    assert page.next_cursor is None
    with control_store.engine.connect() as conn:
        stored = conn.execute(
            select(control.audit_log.c.result).order_by(control.audit_log.c.audit_id)
        ).scalars()
        assert list(stored) == ["allowed", "refused", "allowed"]  # the spec's names


def test_source_count_and_reason_round_trip(control_store: SqlControlStore) -> None:
    folded = event(1, result=enums_pb2.AUDIT_RESULT_REFUSED)
    folded.source, folded.count, folded.reason = "203.0.113.9", 499, "UNKNOWN_CREDENTIALS"
    direct = event(2, result=enums_pb2.AUDIT_RESULT_REFUSED)
    direct.ClearField("count")  # a writer that did not count: one request
    control_store.append_audit([folded, direct])

    newest, oldest = control_store.list_audit("acme", cursor=None, limit=10).events

    assert oldest == folded
    assert newest.count == 1
    assert not newest.HasField("source")
    assert not newest.HasField("reason")


def test_appending_nothing_touches_nothing(control_store: SqlControlStore) -> None:
    statements = record_statements(control_store.engine)
    control_store.append_audit([])
    assert statements == []


@pytest.mark.parametrize(
    ("spoil", "field"),
    [
        (lambda e: e.ClearField("audit_id"), "events[1].audit_id"),
        (lambda e: e.ClearField("timestamp"), "events[1].timestamp"),
        (lambda e: e.timestamp.FromSeconds(10**11), "events[1].timestamp"),
        (lambda e: e.ClearField("result"), "events[1].result"),
    ],
)
def test_an_unfit_event_refuses_the_whole_batch(
    control_store: SqlControlStore, spoil: object, field: str
) -> None:
    bad = event(2)
    spoil(bad)  # type: ignore[operator]

    with pytest.raises(InvalidArgument) as raised:
        control_store.append_audit([event(1), bad])

    assert raised.value.field == field
    assert control_store.list_audit("acme", cursor=None, limit=10).events == []


def test_a_refusal_naming_no_project_is_kept(control_store: SqlControlStore) -> None:
    anonymous = event(1, project="", result=enums_pb2.AUDIT_RESULT_REFUSED)
    control_store.append_audit([anonymous])

    assert control_store.list_audit("", cursor=None, limit=10).events == [anonymous]
    assert control_store.list_audit("acme", cursor=None, limit=10).events == []


def test_a_retried_batch_is_stored_once(control_store: SqlControlStore) -> None:
    batch = [event(1), event(2)]
    control_store.append_audit(batch)
    control_store.append_audit([*batch, event(3)])

    assert ids(control_store.list_audit("acme", cursor=None, limit=10).events) == [
        "acme-000003",
        "acme-000002",
        "acme-000001",
    ]


def test_paging_is_newest_first_without_gaps_or_repeats(control_store: SqlControlStore) -> None:
    # Seven events share each timestamp, so pages cut through ties (broken by audit_id).
    events = [event(n, at=BASE_NS + (n // 7) * 1000) for n in range(250)]
    control_store.append_audit(events[:120])
    control_store.append_audit(events[120:])

    pages = walk(control_store, "acme", 100)

    assert [len(page) for page in pages] == [100, 100, 50]
    assert [i for page in pages for i in ids(page)] == newest_first(events)


def test_a_walk_is_stable_while_events_are_appended(control_store: SqlControlStore) -> None:
    old = [event(n) for n in range(250)]
    control_store.append_audit(old)
    first = control_store.list_audit("acme", cursor=None, limit=100)
    assert first.next_cursor is not None

    # Events keep arriving between pages: newer ones here, and another project's.
    control_store.append_audit([event(n) for n in range(250, 260)])
    control_store.append_audit([event(n, project="other", at=BASE_NS) for n in range(300)])
    second = control_store.list_audit("acme", cursor=first.next_cursor, limit=100)
    assert second.next_cursor is not None
    control_store.append_audit([event(n) for n in range(260, 270)])
    third = control_store.list_audit("acme", cursor=second.next_cursor, limit=100)

    assert third.next_cursor is None
    walked = ids(first.events) + ids(second.events) + ids(third.events)
    assert walked == newest_first(old)
    # A new walk sees everything, the new events first.
    fresh = [i for page in walk(control_store, "acme", 100) for i in ids(page)]
    assert fresh[:20] == [f"acme-{n:06d}" for n in range(269, 249, -1)]
    assert len(fresh) == 270


def test_projects_are_isolated(control_store: SqlControlStore) -> None:
    control_store.append_audit([event(n, project="acme") for n in range(5)])
    control_store.append_audit([event(n, project="zeta") for n in range(5, 8)])

    assert {e.project for page in walk(control_store, "acme", 2) for e in page} == {"acme"}
    assert ids(control_store.list_audit("zeta", cursor=None, limit=10).events) == [
        "zeta-000007",
        "zeta-000006",
        "zeta-000005",
    ]
    assert control_store.list_audit("nobody", cursor=None, limit=10).events == []


def test_a_cursor_belongs_to_its_project(control_store: SqlControlStore) -> None:
    control_store.append_audit([event(n, project=p) for p in ("acme", "zeta") for n in range(3)])
    cursor = control_store.list_audit("acme", cursor=None, limit=1).next_cursor
    assert cursor is not None

    with pytest.raises(InvalidArgument) as raised:
        control_store.list_audit("zeta", cursor=cursor, limit=1)

    assert (raised.value.field, raised.value.reason) == ("cursor", "INVALID_CURSOR")


def _encoded(document: object) -> str:
    return base64.urlsafe_b64encode(json.dumps(document).encode()).decode().rstrip("=")


def _forged(version: object, moment: object, audit_id: object) -> str:
    check = audit.encode_cursor("acme", audit.Position(1, "x"))  # a real cursor, to reuse
    real = json.loads(base64.urlsafe_b64decode(check + "=" * (-len(check) % 4)))
    return _encoded([version, moment, audit_id, real[3]])


@pytest.mark.parametrize(
    "cursor",
    [
        "not a cursor",
        "!!!!",
        "eyJ",  # base64 of a truncated JSON document
        _encoded({"t": 1, "id": "x"}),
        _encoded([1, 1, "x"]),
        _encoded([1, 1, "x", "0000000000000000"]),  # the check does not match
        _forged(2, 1, "x"),  # an unknown version
        _forged(True, 1, "x"),
        _forged(1, True, "x"),
        _forged(1, "1", "x"),
        _forged(1, 1, 1),
        _forged(1, 2**63, "x"),
        "A" * 1000,
        base64.urlsafe_b64encode(b"\xff\xfe").decode(),
    ],
)
def test_a_malformed_cursor_is_invalid(control_store: SqlControlStore, cursor: str) -> None:
    with pytest.raises(InvalidArgument) as raised:
        control_store.list_audit("acme", cursor=cursor, limit=10)
    assert (raised.value.field, raised.value.reason) == ("cursor", "INVALID_CURSOR")


def test_the_real_cursor_of_the_forging_helper_is_accepted(control_store: SqlControlStore) -> None:
    # Guards the test above: `_forged(1, 1, "x")` is exactly a valid cursor.
    assert control_store.list_audit("acme", cursor=_forged(1, 1, "x"), limit=1).events == []


def test_an_empty_cursor_starts_at_the_newest_event(control_store: SqlControlStore) -> None:
    control_store.append_audit([event(1), event(2)])
    assert ids(control_store.list_audit("acme", cursor="", limit=1).events) == ["acme-000002"]


def test_limit_is_clamped(control_store: SqlControlStore) -> None:
    control_store.append_audit([event(n) for n in range(1001)])

    assert len(control_store.list_audit("acme", cursor=None, limit=0).events) == 1
    assert len(control_store.list_audit("acme", cursor=None, limit=-5).events) == 1
    big = control_store.list_audit("acme", cursor=None, limit=5000)
    assert len(big.events) == 1000
    assert big.next_cursor is not None


def test_an_exact_multiple_ends_without_an_empty_page(control_store: SqlControlStore) -> None:
    control_store.append_audit([event(n) for n in range(200)])
    assert [len(page) for page in walk(control_store, "acme", 100)] == [100, 100]


def test_a_page_is_one_index_range_scan(control_store: SqlControlStore) -> None:
    # The (project, timestamp, audit_id) index serves filter, keyset and order: no sort step.
    control_store.append_audit([event(n) for n in range(50)])
    after = audit.Position(BASE_NS + 10**10, "acme-000010")
    dialect = control_store.engine.dialect
    sql = str(
        audit.page_query("acme", after, 101).compile(
            dialect=dialect, compile_kwargs={"literal_binds": True}
        )
    )
    with control_store.engine.connect() as conn:
        if control_store.backend == "sqlite":
            plan = " ".join(row[3] for row in conn.exec_driver_sql(f"EXPLAIN QUERY PLAN {sql}"))
            assert "TEMP B-TREE" not in plan
        else:
            conn.exec_driver_sql("SET LOCAL enable_seqscan = off")  # a tiny table: force it
            plan = " ".join(row[0] for row in conn.exec_driver_sql(f"EXPLAIN {sql}"))
            assert "Sort" not in plan
    assert "ix_audit_log_project_timestamp_audit_id" in plan
