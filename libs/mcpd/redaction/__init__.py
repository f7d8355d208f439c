"""Redaction: secrets, project rules and identities removed before anything is stored.

* `Redactor` applies the server's built-in secret rules (`BUILTIN_RULES`, masked as
  `[REDACTED:<rule>]`), a project's own rules (`RedactionPolicy`, parsed from the project's
  `redaction` document; modes `RedactionMode`) and keyed hashing (`hash_identifier`) to text
  and JSON payloads.
* `redact_row` applies a redactor to one signal row: its payload columns (`PAYLOAD_FIELDS`)
  and its identities (`IDENTITY_FIELDS`, always hashed).
* `load_or_create_key` reads or creates the server's redaction key.

The names below are the public surface (pinned by `tests/libs/redaction/test_exports.py`).
"""

from __future__ import annotations

from mcpd.redaction._builtin import BUILTIN_RULES, Rule, is_secret_key, mask
from mcpd.redaction._keys import KEY_BYTES, load_or_create_key
from mcpd.redaction._policy import RedactionMode, RedactionPolicy, RedactionRule
from mcpd.redaction._redactor import HASH_PREFIX, MIN_KEY_BYTES, Redactor, is_hashed, partial
from mcpd.redaction._rows import IDENTITY_FIELDS, PAYLOAD_FIELDS, redact_row

__all__ = [
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
