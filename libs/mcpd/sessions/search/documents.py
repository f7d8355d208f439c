"""What the embedded index stores: its schema, and the documents and filters it takes."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass

import tantivy

from mcpd.sessions.search.analysis import prepare

TOKENIZER = "mcpd_text"
# Joins a project and an id into one key term (neither contains it).
SEP = "\x1f"
FILTER_FIELDS = ("project", "session_id", "turn_id", "type", "harness", "source")
# Fast fields holding a digest of `project` and of `type`, so a search can check the hits of an
# unfiltered query against those filters without reading stored documents.
PROJECT_CODE = "project_code"
TYPE_CODE = "type_code"


@dataclass(frozen=True, slots=True)
class IndexDoc:
    """One searchable event. `text` is everything searched (event text, tool name)."""

    project: str
    event_id: str
    session_id: str
    turn_id: str
    type: str
    harness: str
    source: str
    timestamp_ns: int
    text: str


@dataclass(frozen=True, slots=True)
class IndexFilter:
    """Exact-match restrictions of a search; `project` and `event_types` always apply."""

    project: str
    event_types: Sequence[str]
    session_id: str | None = None
    turn_id: str | None = None
    harness: str | None = None
    source: str | None = None


@dataclass(frozen=True, slots=True)
class IndexHit:
    """A ranked event id with its raw BM25 score."""

    event_id: str
    score: float
    timestamp_ns: int


@dataclass(frozen=True, slots=True)
class Mark:
    """How far the index has caught up with one project's read model."""

    generation: str
    version: int


def schema() -> tantivy.Schema:
    builder = tantivy.SchemaBuilder()
    for name in ("key", "skey", *FILTER_FIELDS):
        builder.add_text_field(name, tokenizer_name="raw", index_option="basic")
    builder.add_text_field("event_id", stored=True, tokenizer_name="raw", index_option="basic")
    builder.add_integer_field("timestamp_ns", fast=True)
    builder.add_integer_field(PROJECT_CODE, fast=True)
    builder.add_integer_field(TYPE_CODE, fast=True)
    builder.add_text_field("text", tokenizer_name=TOKENIZER, index_option="position")
    return builder.build()


def document(doc: IndexDoc) -> tantivy.Document:
    return tantivy.Document(
        key=doc.project + SEP + doc.event_id,
        skey=doc.project + SEP + doc.session_id,
        project=doc.project,
        session_id=doc.session_id,
        turn_id=doc.turn_id,
        type=doc.type,
        harness=doc.harness,
        source=doc.source,
        event_id=doc.event_id,
        timestamp_ns=doc.timestamp_ns,
        project_code=value_code(doc.project),
        type_code=value_code(doc.type),
        text=prepare(doc.text),
    )


def value_code(value: str) -> int:
    """A filter value's fast-field code: 64 bits of its BLAKE2b digest, as a signed integer.

    Two projects may share a code (one chance in 2**64): a hit checked by code alone is checked
    by project again where its row is read, so a collision can only cost a hit, never show one.
    """
    digest = hashlib.blake2b(value.encode("utf-8"), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)
