"""The public surface of mcpd.redaction, pinned: changing it is a decision, not an accident."""

from __future__ import annotations

import mcpd.redaction

EXPECTED = [
    "BUILTIN_RULES",
    "HASH_PREFIX",
    "IDENTITY_FIELDS",
    "KEY_BYTES",
    "MIN_KEY_BYTES",
    "PAYLOAD_FIELDS",
    "RedactionMode",
    "RedactionPolicy",
    "RedactionRule",
    "Redactor",
    "Rule",
    "is_hashed",
    "is_secret_key",
    "load_or_create_key",
    "mask",
    "partial",
    "redact_row",
]


def test_all_is_pinned() -> None:
    assert mcpd.redaction.__all__ == EXPECTED


def test_every_exported_name_resolves() -> None:
    for name in mcpd.redaction.__all__:
        assert getattr(mcpd.redaction, name) is not None
