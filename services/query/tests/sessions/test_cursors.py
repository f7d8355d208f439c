"""Continuation cursors: opaque, signed, bound to target, kind, page size, anchor, project and
snapshot; tampered, mismatched and stale cursors are structured invalid_request errors."""

from __future__ import annotations

import base64
import json
from datetime import timedelta

import pytest

from mcpd.runtime.clock import ManualClock
from mcpd.sessions.store import SessionStore
from services.query.sessions import SessionTools
from services.query.sessions.cursors import CursorCodec
from services.query.sessions.errors import ToolError
from services.query.tests.sessions.builders import (
    OTHER_PROJECT,
    T0,
    build,
    session_id,
    turn_id,
    user,
)
from services.query.tests.sessions.conftest import CURSOR_KEY, call, error_of, make_tools, seed
from services.query.tests.sessions.corpus import migration, seed_world

MIG = session_id("mig")


async def first_cursor(tools: SessionTools, ident: str = MIG) -> str:
    page = await call(tools, "open", {"id": ident, "limit": 1})
    cursor = page["data"]["next_cursor"]
    assert isinstance(cursor, str)
    return cursor


def _body(cursor: str) -> dict[str, object]:
    payload = cursor.split(".")[0]
    decoded: dict[str, object] = json.loads(
        base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4))
    )
    return decoded


def _forge(cursor: str, **changes: object) -> str:
    """The cursor with its body changed and its old tag kept (what tampering looks like)."""
    body = {**_body(cursor), **changes}
    payload = base64.urlsafe_b64encode(json.dumps(body).encode()).rstrip(b"=").decode()
    return f"{payload}.{cursor.split('.')[1]}"


async def test_cursor_is_opaque_and_url_safe(store: SessionStore, tools: SessionTools) -> None:
    seed_world(store)
    cursor = await first_cursor(tools)
    assert set(cursor) <= set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_.")
    body = _body(cursor)
    assert body["t"] == MIG
    assert body["tk"] == "session"
    assert body["n"] == 1
    assert body["a"] == 1
    assert isinstance(body["s"], int)
    assert MIG not in cursor  # the target travels inside the signed body only


@pytest.mark.parametrize(
    "mutate",
    [
        lambda c: _forge(c, t=session_id("mon")),  # another target
        lambda c: _forge(c, n=50),  # a bigger page
        lambda c: _forge(c, a=0),  # another anchor
        lambda c: _forge(c, s=0),  # another snapshot
        lambda c: _forge(c, tk="turn"),  # another kind
        lambda c: c[:-1] + ("A" if c[-1] != "A" else "B"),  # a flipped tag
        lambda c: c.split(".")[0],  # no tag
        lambda c: c + "." + c,  # junk
        lambda c: "!!!." + c.split(".")[1],  # not base64
        lambda c: "a" * 5000,  # too long
    ],
    ids=["target", "size", "anchor", "snapshot", "kind", "tag", "untagged", "junk", "b64", "long"],
)
async def test_tampered_cursors_are_refused(
    store: SessionStore, tools: SessionTools, mutate: object
) -> None:
    seed_world(store)
    cursor = await first_cursor(tools)
    bad = mutate(cursor)  # type: ignore[operator]
    got = await call(tools, "open", {"cursor": bad})
    assert error_of(got) == ("invalid_request", "cursor")
    assert "reopen" in got["error"]["message"]


async def test_cursor_from_another_key_or_project(
    store: SessionStore, tools: SessionTools, clock: ManualClock
) -> None:
    seed_world(store)
    cursor = await first_cursor(tools)
    rotated = SessionTools(
        store, clock=clock, cursor_key=b"another-key-0123456789abcdefgh", sources=()
    )
    assert error_of(await call(rotated, "open", {"cursor": cursor})) == (
        "invalid_request",
        "cursor",
    )
    elsewhere = await call(tools, "open", {"cursor": cursor}, project=OTHER_PROJECT)
    assert error_of(elsewhere) == ("invalid_request", "cursor")
    assert elsewhere["error"]["details"]["reason"] == "cursor_mismatch"
    assert elsewhere["error"]["details"]["reopen"] == MIG
    # Same key on another replica: the cursor continues.
    replica = make_tools(store, clock)
    assert "data" in await call(replica, "open", {"cursor": cursor})


async def test_stale_cursor_tells_the_caller_to_reopen(
    store: SessionStore, tools: SessionTools
) -> None:
    seed_world(store)
    turn_cursor = await first_cursor(tools, turn_id("mig", 1))
    session_cursor = await first_cursor(tools)
    # Re-writing identical data is no change: the cursors stay valid.
    seed(store, migration())
    assert "data" in await call(tools, "open", {"cursor": session_cursor})
    # A new session elsewhere is no change to the walked one: the cursors stay valid.
    seed(store, build("new", [[user("a new session elsewhere")]]))
    assert "data" in await call(tools, "open", {"cursor": session_cursor})
    seed(store, migration(start=T0 + timedelta(minutes=1)))
    for cursor, target, size in ((turn_cursor, turn_id("mig", 1), 1), (session_cursor, MIG, 1)):
        got = await call(tools, "open", {"cursor": cursor})
        assert got["error"]["code"] == "invalid_request"
        assert got["error"]["details"] == {
            "field": "cursor",
            "reason": "stale_cursor",
            "reopen": target,
            "limit": size,
        }
        assert got["error"]["message"].endswith(f"reopen {target} with limit {size}")
    # Reopening gives a fresh cursor that works.
    fresh = await first_cursor(tools)
    assert "data" in await call(tools, "open", {"cursor": fresh})


def test_codec_rejects_short_keys_and_foreign_versions() -> None:
    with pytest.raises(ValueError, match="16 bytes"):
        CursorCodec(b"short")
    codec = CursorCodec(CURSOR_KEY)
    assert codec.decode(codec.encode({"k": "x"})) == {"v": 1, "k": "x"}
    with pytest.raises(ToolError):
        codec.decode(codec.encode({"v": 2}))
