"""The ClickHouse executors: parameters, result decoding, errors, URLs."""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path

import pytest

from mcpd.runtime.errors import InvalidArgument, Unavailable
from mcpd.storage.clickhouse.executor import (
    UNKNOWN_TABLE,
    ChdbExecutor,
    ClickHouseError,
    HttpTarget,
    decode,
    open_executor,
)
from mcpd.storage.clickhouse.params import format_param

NASTY_STRINGS = [
    "",
    "plain",
    "it's",
    'say "hi"',
    "back\\slash",
    "\\N",  # the escaped-format spelling of NULL, as a real string
    "tab\there",
    "new\nline",
    "carriage\rreturn",
    "nul\0byte",
    "{q:String}",
    "'); DROP TABLE spans; --",
    "café ДОМ 🚀",
]


@pytest.fixture
def executor(tmp_path: Path) -> Iterator[ChdbExecutor]:
    opened = ChdbExecutor(tmp_path / "ch")
    try:
        yield opened
    finally:
        opened.close()


@pytest.mark.parametrize("value", NASTY_STRINGS)
def test_string_parameters_round_trip(executor: ChdbExecutor, value: str) -> None:
    assert executor.query("SELECT {v:String}", {"v": value}) == [(value,)]


def test_container_parameters_round_trip(executor: ChdbExecutor) -> None:
    rows = executor.query(
        "SELECT {a:Array(String)}, {b:Array(Nullable(Int64))}, {c:Array(Array(String))}, "
        "{d:Tuple(String, Int64)}, {e:Array(String)}",
        {
            "a": NASTY_STRINGS,
            "b": [1, None, -(2**63)],
            "c": [["x'y"], []],
            "d": ("t\\", 7),
            "e": [],
        },
    )
    a, b, c, d, e = rows[0]
    assert a == NASTY_STRINGS
    assert b == [1, None, -(2**63)]
    assert c == [["x'y"], []]
    assert list(d) == ["t\\", 7]
    assert e == []


def test_scalar_parameters_and_decoding(executor: ChdbExecutor) -> None:
    rows = executor.query(
        "SELECT {i:Int64}, {u:UInt64}, {f:Float64}, {n:Float64}, {inf:Float64}, "
        "{b:Bool}, {null:Nullable(String)}, toLowCardinality({s:String})",
        {
            "i": -(2**63),
            "u": 2**64 - 1,
            "f": 0.1,
            "n": math.nan,
            "inf": -math.inf,
            "b": False,
            "null": None,
            "s": "x",
        },
    )
    i, u, f, n, inf, b, null, s = rows[0]
    assert (i, u, f, inf, b, null, s) == (-(2**63), 2**64 - 1, 0.1, -math.inf, False, None, "x")
    assert math.isnan(n)
    assert isinstance(u, int)
    assert isinstance(b, bool)


def test_a_parameter_is_never_sql(executor: ChdbExecutor) -> None:
    executor.command("CREATE TABLE t (s String) ENGINE = MergeTree ORDER BY s")
    executor.command("INSERT INTO t VALUES ({s:String})", {"s": "'); DROP TABLE t; --"})
    assert executor.query("SELECT s FROM t") == [("'); DROP TABLE t; --",)]


def test_empty_result(executor: ChdbExecutor) -> None:
    assert executor.query("SELECT 1 WHERE 0") == []


def test_server_errors_carry_the_clickhouse_code(executor: ChdbExecutor) -> None:
    with pytest.raises(ClickHouseError) as raised:
        executor.query("SELECT * FROM no_such_table")
    assert raised.value.clickhouse_code == UNKNOWN_TABLE
    assert "no_such_table" in raised.value.detail
    assert "no_such_table" not in raised.value.message  # no SQL in what a caller sees


def test_unsupported_parameter_type_is_refused() -> None:
    with pytest.raises(TypeError, match="dict"):
        format_param({"a": 1})


def test_format_param_spells_values_the_way_clickhouse_parses_them() -> None:
    assert format_param(None) == "\\N"
    assert format_param("a\tb\\c") == "a\\tb\\\\c"
    assert format_param(True) == "true"
    assert format_param(["it's", None]) == "['it\\'s', NULL]"
    assert format_param(("x",)) == "tuple('x')"


def test_decode_follows_the_declared_type() -> None:
    assert decode("Nullable(UInt64)", "18446744073709551615") == 2**64 - 1
    assert decode("Array(Int64)", ["1", 2]) == [1, 2]
    assert decode("LowCardinality(Nullable(String))", None) is None
    assert math.isinf(decode("Float64", "inf"))
    assert decode("DateTime64(9, 'UTC')", "2026-01-01 00:00:00.000000001") == (
        "2026-01-01 00:00:00.000000001"
    )


def test_http_target_from_url() -> None:
    target = HttpTarget.from_url("https://mcpd:p%40ss%2Fword@ch.example:9443/telemetry")
    assert target == HttpTarget(
        host="ch.example",
        port=9443,
        username="mcpd",
        password="p@ss/word",
        database="telemetry",
        secure=True,
    )
    assert "p@ss" not in repr(target)

    defaults = HttpTarget.from_url("http://ch.internal")
    assert (defaults.port, defaults.username, defaults.password, defaults.database) == (
        8123,
        "default",
        "",
        "default",
    )
    assert HttpTarget.from_url("https://h/").port == 8443


@pytest.mark.parametrize(
    "url", ["ftp://h/db", "http:///db", "http://h/a/b"], ids=["scheme", "host", "path"]
)
def test_http_target_refuses_bad_urls(url: str) -> None:
    with pytest.raises(ValueError):  # noqa: PT011 - the message is checked via open_executor
        HttpTarget.from_url(url)


@pytest.mark.parametrize(
    "url",
    ["clickhouse://h/db", "chdb://relative/path", "chdb:relative", "http://h/a/b", "nonsense"],
)
def test_open_executor_refuses_bad_urls_naming_the_setting(url: str) -> None:
    with pytest.raises(InvalidArgument) as raised:
        open_executor(url)
    assert raised.value.field == "storage.clickhouse_url"


def test_open_executor_chdb(tmp_path: Path) -> None:
    executor = open_executor(f"chdb://{tmp_path}/data")
    try:
        assert isinstance(executor, ChdbExecutor)
        assert executor.query("SELECT 1") == [(1,)]
    finally:
        executor.close()
    assert (tmp_path / "data").is_dir()


def test_open_executor_http_unreachable_is_unavailable() -> None:
    # Port 1 on loopback: nothing listens, so the connection is refused at once.
    with pytest.raises(Unavailable) as raised:
        open_executor("http://user:secret@127.0.0.1:1/db")
    assert raised.value.field == "storage.clickhouse_url"
    assert "secret" not in raised.value.message
