"""The session read model's ids: stored and handed to agents, so they never change."""

from __future__ import annotations

import base64
import hashlib

from services.ingest.transcripts import keys


def test_ids_keep_their_values() -> None:
    assert keys.session_id("codex", "abc") == "session:ses_hw63f5a3z6tlctqj6qgf5h6sf2"
    assert keys.turn_id("session:ses_x", "k1") == "turn:turn_jsqfyy7tcm2czupk7mmjylfnk5"
    assert keys.event_id("s", "ev\u00e9") == "event:evt_im3pnkjrynfhtjeva4gbx5ee6i"
    assert keys.ContentKeys().key("a", "b") == "h:xrmlirtdx34k4dut7suntsqynl:0"


def test_ids_are_the_first_26_base32_characters_of_the_whole_digest() -> None:
    for number in range(500):
        key = f"key-{number}-" + "\u00e9" * (number % 7)
        whole = hashlib.sha256("\x1f".join(("event", "s", key)).encode("utf-8")).digest()
        expected = base64.b32encode(whole).decode("ascii").lower()[:26]
        assert keys.event_id("s", key) == f"event:evt_{expected}"
