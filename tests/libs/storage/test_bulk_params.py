"""The parameters of bulk upserts: `json_text` (orjson, the standard encoder for what orjson
refuses) and a span's rendered `head_json` give compact JSON of the same document as
`json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode`, with non-finite numbers
as null and NUL scrubbed (the very same text where no float is involved); and the reads
`reproject` makes are the statements it used to build per call."""

from __future__ import annotations

import json
import math
import random
from collections import OrderedDict
from enum import IntEnum
from typing import Any, cast

import pytest
from sqlalchemy import select
from sqlalchemy.dialects import sqlite
from sqlalchemy.dialects.postgresql import psycopg

from mcpd.signals.documents import span_head
from mcpd.signals.projection import (
    PROJECTION_FEEDBACK_COLUMNS,
    PROJECTION_SCORE_COLUMNS,
    PROJECTION_SPAN_COLUMNS,
)
from mcpd.signals.rows import SpanRow
from mcpd.storage.sql.dialect import SqlDialect
from mcpd.storage.sql.schema.trace import HEAD_JSON, feedback, scores, spans, traces
from mcpd.storage.sql.signals.reproject import _select
from mcpd.storage.sql.signals.statements import bulk_upsert
from mcpd.storage.stored_json import _finite, json_text, scrub_nul

_REFERENCE = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode


def reference_json_text(document: Any) -> str:
    """What `json_text` means: the standard encoder's `encode`, non-finite numbers as null, NUL
    scrubbed."""
    text = _REFERENCE(_finite(document))
    if "\\u0000" in text:
        text = _REFERENCE(_finite(scrub_nul(document)))
    return text


def _strict(text: str) -> Any:
    """`text` parsed as JSON, refusing the NaN and Infinity tokens JSON has no place for."""

    def refuse(token: str) -> Any:
        raise AssertionError(f"{token} is not JSON")

    return json.loads(text, parse_constant=refuse)


def _has_float(document: Any) -> bool:
    if isinstance(document, float):
        return True
    if isinstance(document, dict):
        return any(_has_float(key) or _has_float(item) for key, item in document.items())
    if isinstance(document, list | tuple):
        return any(_has_float(item) for item in document)
    return False


class Level(IntEnum):
    LOW = 1


class Text(str):
    pass


def _documents(count: int, seed: int) -> list[Any]:
    rng = random.Random(seed)
    scalars: list[Any] = [
        None,
        True,
        False,
        0,
        -1,
        2**70,
        -(2**70),
        0.1,
        -0.0,
        1e300,
        5e-324,
        float("nan"),
        float("inf"),
        float("-inf"),
        "",
        "plain",
        'quote " backslash \\ slash / tab \t newline \n',
        "Grüße, café crème — naïve résumé ✓ 東京 Ωμέγα",
        "emoji 😀 and a lone surrogate \ud800",
        "NUL \x00 inside",
        "\\u0000 that merely looks like one",
        "\x01\x1f\x7f\u2028\u2029",
        Level.LOW,
        Text("a str subclass"),
    ]

    def document(depth: int) -> Any:
        roll = rng.random()
        if depth >= 4 or roll < 0.4:
            return rng.choice(scalars)
        if roll < 0.7:
            keys: list[Any] = ["a", "b", "ключ", "nul\x00key", "", 1, 2.5, True, None]
            return {rng.choice(keys): document(depth + 1) for _ in range(rng.randrange(0, 5))}
        if roll < 0.9:
            return [document(depth + 1) for _ in range(rng.randrange(0, 5))]
        return tuple(document(depth + 1) for _ in range(rng.randrange(0, 3)))

    fixed: list[Any] = [
        *scalars,
        {},
        [],
        (),
        OrderedDict(b=1, a=2),
        [{"role": "user", "parts": [{"type": "text", "content": "hello"}]}],
        {"input": {"cache_read": 5323, "text": 16239}, "output": {"reasoning": 158}},
    ]
    return fixed + [document(0) for _ in range(count)]


def test_json_text_is_json_of_the_same_document() -> None:
    for document in _documents(2000, seed=1):
        text = json_text(document)
        reference = reference_json_text(document)
        assert _strict(text) == _strict(reference)
        if not _has_float(document):
            # Floats aside (1e+300 or 1e300), the text itself is the standard encoder's.
            assert text == reference


def test_json_text_of_a_nul_is_scrubbed() -> None:
    assert json_text({"k\x00": ["a\x00b"]}) == '{"k\ufffd":["a\ufffdb"]}'
    assert json_text("\\u0000") == '"\\\\u0000"'


@pytest.mark.parametrize("value", [object(), {1j: 1}, {"a": {1, 2}}, b"bytes"])
def test_json_text_refuses_what_the_standard_encoder_refuses(value: Any) -> None:
    with pytest.raises(TypeError) as expected:
        _REFERENCE(value)
    with pytest.raises(TypeError) as raised:
        json_text(value)
    assert str(raised.value) == str(expected.value)


def test_json_text_writes_non_finite_numbers_as_null() -> None:
    # JSON has no spelling for them; SQLite's and PostgreSQL's JSON functions refuse the tokens.
    assert json_text([math.nan, math.inf, -math.inf, 1.5]) == "[null,null,null,1.5]"
    # Also where orjson gives way to the standard encoder (an integer past 64 bits).
    assert json_text({"n": 2**70, "x": math.nan}) == '{"n":1180591620717411303424,"x":null}'


def _reference_params(table: Any, row: dict[str, Any]) -> tuple[Any, ...]:
    upsert = bulk_upsert(table, SqlDialect.SQLITE)
    values = [row.get(name) for name in upsert.columns]
    if HEAD_JSON in upsert.columns:
        values[upsert.columns.index(HEAD_JSON)] = reference_json_text(span_head(cast(SpanRow, row)))
    for position in upsert.json_positions:
        if values[position] is not None:
            values[position] = reference_json_text(values[position])
    for position in upsert.text_positions:
        text = values[position]
        if text is not None and "\x00" in text:
            values[position] = text.replace("\x00", "\ufffd")
    return tuple(values)


def _decoded(upsert: Any, params: tuple[Any, ...]) -> list[Any]:
    """`params` with each JSON text (the documents and a span's head) parsed, strictly."""
    json_positions = {*upsert.json_positions}
    if upsert.head_position is not None:
        json_positions.add(upsert.head_position)
    return [
        _strict(value) if index in json_positions and value is not None else value
        for index, value in enumerate(params)
    ]


def test_span_params_are_the_reference_params() -> None:
    upsert = bulk_upsert(spans, SqlDialect.SQLITE)
    rng = random.Random(2)
    documents = _documents(200, seed=3)
    for index in range(300):
        row: dict[str, Any] = {name: None for name in upsert.columns}
        row.update(
            project="p",
            trace_id="0af7651916cd43dd8448eb211c80319c",
            span_id="b7ad6b7169203331",
            name=rng.choice(["chat", "nul \x00 name", "名前"]),
            start_time=1,
            input=rng.choice(documents),
            output=rng.choice(documents),
            attributes=rng.choice([None, {"a": rng.choice(documents)}]),
            usage_details=rng.choice([None, {"input": {"cache_read": 1, "text": 2}}]),
        )
        if index % 2:
            del row["metadata"]  # a row that leaves an optional column out
        assert _decoded(upsert, upsert.params(row)) == _decoded(
            upsert, _reference_params(spans, row)
        )


def test_trace_params_are_the_reference_params() -> None:
    upsert = bulk_upsert(traces, SqlDialect.SQLITE)
    row: dict[str, Any] = {name: None for name in upsert.columns}
    row.update(project="p", trace_id="0af7651916cd43dd8448eb211c80319c", tags=["a\x00", "b"])
    assert _decoded(upsert, upsert.params(row)) == _decoded(upsert, _reference_params(traces, row))


@pytest.mark.parametrize(
    ("table", "names"),
    [
        (spans, PROJECTION_SPAN_COLUMNS),
        (scores, PROJECTION_SCORE_COLUMNS),
        (feedback, PROJECTION_FEEDBACK_COLUMNS),
    ],
)
@pytest.mark.parametrize(
    "dialect",
    [sqlite.dialect(), psycopg.dialect()],  # type: ignore[no-untyped-call]
)
def test_reproject_reads_with_the_statement_it_used_to_build(
    table: Any, names: tuple[str, ...], dialect: Any
) -> None:
    project, chunk = "shop", ["0af7651916cd43dd8448eb211c80319c", "1" * 32]
    built = select(*[table.c[name] for name in names]).where(
        table.c.project == project, table.c.trace_id.in_(chunk)
    )
    expected = built.compile(dialect=dialect)
    cached = _select(table, tuple(names))
    assert _select(table, tuple(names)) is cached
    compiled = cached.compile(dialect=dialect)
    assert compiled.string == expected.string
    params = {"project_1": project, "trace_id_1": chunk}
    assert compiled.construct_params(params) == expected.params
    expanded = compiled.construct_expanded_state(params)
    expected_expanded = expected.construct_expanded_state()
    assert expanded.statement == expected_expanded.statement
    assert expanded.parameters == expected_expanded.parameters
