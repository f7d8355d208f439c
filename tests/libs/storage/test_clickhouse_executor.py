"""The ClickHouse executors: parameters, result decoding, errors, URLs."""

from __future__ import annotations

import json
import math
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

from mcpd.runtime.errors import InvalidArgument, Unavailable
from mcpd.signals.batch import SignalBatch
from mcpd.storage.clickhouse.executor import (
    UNKNOWN_TABLE,
    ChdbExecutor,
    ClickHouseError,
    HttpExecutor,
    HttpTarget,
    decode,
    insert_statement,
    open_executor,
)
from mcpd.storage.clickhouse.params import (
    DATETIME64_MAX_NS,
    DATETIME64_MIN_NS,
    datetime64_text,
    format_param,
)
from mcpd.storage.clickhouse.store import ClickHouseTraceStore
from mcpd.testing.templates import ClickHouseTemplate
from tests.libs.signals.samples import T0, span

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
        # A delete's mutations get the server's threads, not two (chdb's default on 2 cores).
        pool = "SELECT value FROM system.server_settings WHERE name = 'background_pool_size'"
        assert executor.query(pool) == [("16",)]
    finally:
        executor.close()
    assert (tmp_path / "data").is_dir()
    assert sorted(path.name for path in tmp_path.iterdir()) == ["data"]


def test_open_executor_http_unreachable_is_unavailable() -> None:
    # Port 1 on loopback: nothing listens, so the connection is refused at once.
    with pytest.raises(Unavailable) as raised:
        open_executor("http://user:secret@127.0.0.1:1/db")
    assert raised.value.field == "storage.clickhouse_url"
    assert "secret" not in raised.value.message


# --- insert: the rows as the statement's data ----------------------------------------------

TABLE = """
CREATE TABLE t
(
    id UInt32,
    s String,
    maybe Nullable(String),
    low LowCardinality(String),
    at DateTime64(9, 'UTC'),
    maybe_at Nullable(DateTime64(9, 'UTC')),
    tags Array(String),
    counts Array(Nullable(Int64)),
    big UInt64,
    small Int64,
    ratio Nullable(Float64),
    flag Bool,
    maybe_flag Nullable(Bool)
)
ENGINE = MergeTree ORDER BY id
"""
COLUMNS = (
    "id",
    "s",
    "maybe",
    "low",
    "at",
    "maybe_at",
    "tags",
    "counts",
    "big",
    "small",
    "ratio",
    "flag",
    "maybe_flag",
)
READ = (
    "SELECT id, s, maybe, low, toUnixTimestamp64Nano(at), toUnixTimestamp64Nano(maybe_at), "
    "tags, counts, big, small, ratio, flag, maybe_flag FROM t ORDER BY id"
)
CONTROL = "".join(chr(code) for code in range(0x20)) + "\x7f"
HUGE = ("x" * 1000 + "\\'\"\n\0é🚀") * 1100  # over 1 MiB, escapes and all
TRICKY = [*NASTY_STRINGS, CONTROL, "\u2028\u2029\ufeff", "nul \0 inside", HUGE]
TIMES = [
    0,
    1,
    -1,
    999_999_999,
    -1_000_000_001,
    1_700_000_000_123_456_789,
    1_700_000_000_123_456_790,
    DATETIME64_MAX_NS,
    DATETIME64_MIN_NS,
]


def tricky_rows() -> list[tuple[Any, ...]]:
    """Rows of `t` as the values read back, one per tricky string."""
    rows = []
    for index, text in enumerate(TRICKY):
        at = TIMES[index % len(TIMES)]
        rows.append(
            (
                index,
                text,
                None if index % 2 else text,
                text[:50],
                at,
                None if index % 3 == 0 else TIMES[-1 - index % len(TIMES)],
                [] if index % 4 == 0 else [text[:10], "", "\\"],
                [None, -(2**63), 2**63 - 1] if index % 2 else [],
                2**64 - 1 - index,
                -(2**63) + index,
                [None, 0.1, -1e300, math.inf, -math.inf][index % 5],
                bool(index % 2),
                [None, True, False][index % 3],
            )
        )
    return rows


def as_input(row: tuple[Any, ...]) -> list[Any]:
    """A read-back row as insert values: times as DateTime64 text."""
    values = list(row)
    values[4] = datetime64_text(values[4])
    values[5] = None if values[5] is None else datetime64_text(values[5])
    return values


def compact_columns(rows: Sequence[tuple[Any, ...]]) -> str:
    """JSONCompactColumns, as `signals.columns` writes it (non-ASCII kept as is)."""
    inputs = [as_input(row) for row in rows]
    columns = [[row[index] for row in inputs] for index in range(len(COLUMNS))]
    return json.dumps(columns, ensure_ascii=False, separators=(",", ":"))


def each_row(rows: Sequence[tuple[Any, ...]]) -> str:
    """JSONEachRow, as `sessions.tables` writes it (non-ASCII escaped)."""
    lines = [json.dumps(dict(zip(COLUMNS, as_input(row), strict=True))) for row in rows]
    return "\n".join(lines)


@pytest.mark.parametrize("mode", ["basic", "best_effort"])
@pytest.mark.parametrize("fmt", ["JSONCompactColumns", "JSONEachRow"])
def test_insert_round_trips_tricky_values(executor: ChdbExecutor, fmt: str, mode: str) -> None:
    # clickhouse-connect sets date_time_input_format=best_effort on a server; the times read
    # back the same either way.
    executor.command(f"SET date_time_input_format = '{mode}'")
    executor.command(TABLE)
    rows = tricky_rows()
    data = compact_columns(rows) if fmt == "JSONCompactColumns" else each_row(rows)
    assert len(data.encode()) > 1024 * 1024
    executor.insert("t", COLUMNS, data, fmt)
    assert executor.query(READ) == rows


def test_insert_takes_bytes(executor: ChdbExecutor) -> None:
    executor.command("CREATE TABLE b (s String) ENGINE = MergeTree ORDER BY s")
    executor.insert("b", ["s"], '{"s":"café"}'.encode(), "JSONEachRow")
    assert executor.query("SELECT s FROM b") == [("café",)]


def test_datetime64_text_is_the_earliest_time_clickhouse_parses(executor: ChdbExecutor) -> None:
    executor.command("CREATE TABLE d (at DateTime64(9, 'UTC')) ENGINE = MergeTree ORDER BY at")
    executor.insert(
        "d", ["at"], json.dumps([[datetime64_text(DATETIME64_MIN_NS)]]), "JSONCompactColumns"
    )
    assert executor.query("SELECT toUnixTimestamp64Nano(at) FROM d") == [(DATETIME64_MIN_NS,)]
    # One nanosecond earlier is in the previous second, which overflows as nanoseconds: this
    # is why datetime64_text refuses it.
    earlier = "1677-09-21 00:12:43.999999999"
    with pytest.raises(ClickHouseError):
        executor.insert("d", ["at"], json.dumps([[earlier]]), "JSONCompactColumns")


def test_a_refused_insert_writes_nothing_and_names_the_code(executor: ChdbExecutor) -> None:
    executor.command(TABLE)
    with pytest.raises(ClickHouseError) as raised:
        executor.insert("no_such_table", ["s"], '{"s":"x"}', "JSONEachRow")
    assert raised.value.clickhouse_code == UNKNOWN_TABLE
    bad = '{"id":1,"s":"x","at":"not a time"}'
    with pytest.raises(ClickHouseError):
        executor.insert("t", COLUMNS, bad, "JSONEachRow")
    assert executor.query("SELECT count() FROM t") == [(0,)]
    executor.insert(
        "t", ["id", "s", "at"], '{"id":2,"s":"y","at":"2026-01-01 00:00:00"}', "JSONEachRow"
    )
    assert executor.query("SELECT id, s FROM t") == [(2, "y")]


@pytest.mark.parametrize(
    ("table", "columns", "fmt"),
    [
        ("t; DROP TABLE t", ["s"], "JSONEachRow"),
        ("t", ["s`"], "JSONEachRow"),
        ("t", ["s"], "JSONEachRow SETTINGS x=1"),
        ("t", [], "JSONEachRow"),
    ],
)
def test_insert_refuses_names_that_are_not_identifiers(
    executor: ChdbExecutor, table: str, columns: list[str], fmt: str
) -> None:
    with pytest.raises(ValueError):  # noqa: PT011 - which name is wrong varies
        executor.insert(table, columns, "{}", fmt)
    with pytest.raises(ValueError):  # noqa: PT011
        HttpExecutor(client=None).insert(table, columns, "{}", fmt)


def test_insert_statement_spelling() -> None:
    assert insert_statement("spans", ["a", "b_2"], "JSONCompactColumns") == (
        "INSERT INTO spans (`a`, `b_2`) FORMAT JSONCompactColumns"
    )


def test_insert_refuses_text_that_is_not_unicode(executor: ChdbExecutor) -> None:
    executor.command("CREATE TABLE b (s String) ENGINE = MergeTree ORDER BY s")
    with pytest.raises(UnicodeEncodeError):
        executor.insert("b", ["s"], '{"s":"\ud800"}', "JSONEachRow")
    assert executor.query("SELECT count() FROM b") == [(0,)]


# --- chdb: a failed statement leaves nothing behind ------------------------------------------

# Fails on the 6th row with max_block_size=1, after chdb has produced output for five blocks.
FAILS_MIDWAY = "SELECT throwIf(number = 5) FROM numbers(10) SETTINGS max_block_size = 1"


def test_a_failed_query_leaves_no_output_for_the_next(executor: ChdbExecutor) -> None:
    with pytest.raises(ClickHouseError):
        executor.query(FAILS_MIDWAY)
    assert executor.query("SELECT 42") == [(42,)]
    with pytest.raises(ClickHouseError):
        executor.command(FAILS_MIDWAY)
    with pytest.raises(ClickHouseError):
        executor.query("SELECT * FROM no_such_table")
    assert executor.query("SELECT number FROM numbers(3)") == [(0,), (1,), (2,)]


def test_a_failed_insert_leaves_no_output_for_the_next(executor: ChdbExecutor) -> None:
    executor.command(TABLE)
    with pytest.raises(ClickHouseError):
        executor.insert("t", ["id", "at"], '{"id":1,"at":"never"}', "JSONEachRow")
    with pytest.raises(ClickHouseError):
        executor.query(FAILS_MIDWAY)
    executor.insert("t", ["id", "at"], '{"id":1,"at":"2026-01-01 00:00:00"}', "JSONEachRow")
    assert executor.query("SELECT id FROM t") == [(1,)]


def test_failures_on_other_threads_do_not_leak_into_results(executor: ChdbExecutor) -> None:
    wrong: list[object] = []

    def fail() -> None:
        for _ in range(15):
            try:
                executor.query(FAILS_MIDWAY)
            except ClickHouseError:
                continue
            wrong.append("the failing query succeeded")

    def read() -> None:
        for _ in range(30):
            try:
                found: object = executor.query("SELECT number FROM numbers(4)")
            except Exception as error:  # any failure here is the finding
                found = error
            if found != [(0,), (1,), (2,), (3,)]:
                wrong.append(found)

    threads = [threading.Thread(target=target) for target in (fail, read, fail, read)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert wrong == []


# --- HttpExecutor against a stub server: the request's shape ---------------------------------


@dataclass
class Request:
    method: str
    path: str
    params: dict[str, str]
    headers: dict[str, str]
    body: bytes


@dataclass
class StubClickHouse:
    """A local HTTP server answering like ClickHouse would, just enough for clickhouse-connect:
    the version query is answered, a statement naming `refused_table` gets ClickHouse's error
    for an unknown table, and anything else succeeds with no rows. Every request is kept."""

    server: ThreadingHTTPServer
    requests: list[Request] = field(default_factory=list)

    @property
    def target(self) -> HttpTarget:
        port = self.server.server_address[1]
        return HttpTarget("127.0.0.1", int(port), "mcpd", "secret", "telemetry", secure=False)

    def inserts(self) -> list[Request]:
        return [request for request in self.requests if request.body.startswith(b"INSERT")]


def _handler(stub_requests: list[Request]) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:
            size = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(size)
            params = {
                name: values[0] for name, values in parse_qs(urlsplit(self.path).query).items()
            }
            stub_requests.append(
                Request(self.command, self.path, params, dict(self.headers.items()), body)
            )
            statement = params.get("query", "") + body[:4096].decode(errors="replace")
            status, headers, answer = 200, {}, b""
            if "version()" in statement:
                answer = b"25.8.1.1\tUTC\n"
            elif "refused_table" in statement:
                status, headers = 404, {"X-ClickHouse-Exception-Code": str(UNKNOWN_TABLE)}
                answer = b"Code: 60. DB::Exception: Unknown table refused_table. (UNKNOWN_TABLE)\n"
            self.send_response(status)
            for name, value in headers.items():
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(answer)))
            self.end_headers()
            self.wfile.write(answer)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    return Handler


@pytest.fixture
def stub(monkeypatch: pytest.MonkeyPatch) -> Iterator[StubClickHouse]:
    for name in ("HTTP_PROXY", "http_proxy", "HTTPS_PROXY", "https_proxy"):
        monkeypatch.delenv(name, raising=False)
    requests: list[Request] = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(requests))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield StubClickHouse(server, requests)
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


@pytest.fixture
def http(stub: StubClickHouse) -> Iterator[HttpExecutor]:
    opened = HttpExecutor.connect(stub.target)
    stub.requests.clear()
    try:
        yield opened
    finally:
        opened.close()


def small_url(request: Request) -> bool:
    """The URL holds no statement, no data and no parameter: only ids and settings."""
    names = set(request.params)
    return (
        len(request.path) < 512
        and "query" not in names
        and not any(name.startswith("param_") for name in names)
    )


def test_http_insert_sends_the_statement_and_the_data_in_the_body(
    stub: StubClickHouse, http: HttpExecutor, executor: ChdbExecutor
) -> None:
    rows = tricky_rows()
    data = compact_columns(rows)
    http.insert("t", COLUMNS, data, "JSONCompactColumns")

    [request] = stub.requests
    assert request.method == "POST"
    assert small_url(request), request.path
    assert request.params["database"] == "telemetry"
    assert request.headers["Content-Type"] == "application/octet-stream"
    statement = insert_statement("t", COLUMNS, "JSONCompactColumns")
    assert request.body == statement.encode() + b"\n" + data.encode()
    assert len(request.body) > 1024 * 1024

    # What a server would run, run by the engine: the same rows as ChdbExecutor.insert stores.
    executor.command(TABLE)
    executor.insert("t", COLUMNS, data, "JSONCompactColumns")
    assert executor.query(READ) == rows
    executor.command("TRUNCATE TABLE t")
    executor.command(request.body.decode())
    assert executor.query(READ) == rows


def test_http_insert_errors_are_translated(stub: StubClickHouse, http: HttpExecutor) -> None:
    with pytest.raises(ClickHouseError) as raised:
        http.insert("refused_table", ["s"], '{"s":"x"}', "JSONEachRow")
    assert raised.value.clickhouse_code == UNKNOWN_TABLE
    with pytest.raises(UnicodeEncodeError):
        http.insert("t", ["s"], '{"s":"\ud800"}', "JSONEachRow")
    assert len(stub.requests) == 1  # text that is not Unicode was never sent


def test_a_large_group_commit_over_http_keeps_every_url_small(
    stub: StubClickHouse,
    http: HttpExecutor,
    tmp_path: Path,
    clickhouse_template: ClickHouseTemplate,
) -> None:
    # 512 spans of ~4 KB in one call: 2 MiB of span data, twice the default http_max_uri_size.
    spans = [
        span(
            f"s{index}",
            trace_id=f"t{index // 10}",
            is_root=index % 10 == 0,
            start_time=T0 + index,
            input={"text": f"{index} " + "é\\'\n" * 1000},
        )
        for index in range(512)
    ]
    batches = [SignalBatch(key_project="p", ingest_key="k1", received_at=T0 + 10**9, spans=spans)]
    assert ClickHouseTraceStore(http).write_batches(batches) == [True]

    # The reads' parameters (ids, keys) go in the URL; the rows never do.
    assert all(len(request.path) < 4096 for request in stub.requests)
    inserts = stub.inserts()
    assert all(small_url(request) for request in inserts)
    assert [request.body.split(b" ", 3)[2] for request in inserts] == [
        b"spans",
        b"traces",
        b"rollups",
        b"ingest_keys",
    ]
    assert len(inserts[0].body) > 2 * 1024 * 1024

    # The bodies, run by the engine, store what the same call stores through chdb.
    direct = ClickHouseTraceStore(ChdbExecutor(clickhouse_template.copy(tmp_path / "direct")))
    try:
        assert direct.write_batches(batches) == [True]
        expected = [
            direct.trace_records("p", f"t{trace}", logs=True, scores=True, feedback=True)
            for trace in range(52)
        ]
    finally:
        direct.close()
    replayed = ClickHouseTraceStore(ChdbExecutor(clickhouse_template.copy(tmp_path / "replayed")))
    try:
        for request in inserts:
            replayed.executor.command(request.body.decode())
        found = [
            replayed.trace_records("p", f"t{trace}", logs=True, scores=True, feedback=True)
            for trace in range(52)
        ]
    finally:
        replayed.close()
    assert found == expected
    assert all(records is not None and records.spans for records in found)
