"""The small interface the ClickHouse trace store runs SQL through, and its two implementations.

`HttpExecutor` talks to a ClickHouse server through clickhouse-connect (production);
`ChdbExecutor` runs the real ClickHouse engine in process through chdb (tests, embedded use).
Both run the same SQL with the same `{name:Type}` server-side parameters, so a value never
becomes part of the SQL text.

Rows are written with `insert`: `INSERT INTO table (columns) FORMAT <format>` followed by the
rows as text in that input format, which both implementations send as the statement's *data*
(the HTTP request body; chdb's streaming insert), never as SQL or a parameter. The text must
hold each column in its table type (a DateTime64 as `params.datetime64_text`, say): the rows
go into the table as they are parsed, with no SELECT to convert them. Parameters, by contrast,
travel in the URL, which a server caps (`http_max_uri_size`, 1 MiB by default), so data of any
size belongs in `insert`.

Result contract, which both implementations honour: each row is a tuple of plain Python values
(int for every Int/UInt width, float, str, bool, None for NULL, list for Array). Select times as
integers (`toUnixTimestamp64Nano(t)`): the two drivers decode DateTime64 differently, and a
Python datetime would drop the nanoseconds anyway.

Driver errors are translated here, once: a server that cannot be reached is `Unavailable`, and
an error the server reports is `ClickHouseError` carrying ClickHouse's numeric error code.
"""

from __future__ import annotations

import contextlib
import json
import re
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import unquote, urlsplit

from mcpd.runtime.errors import Internal, InvalidArgument, Unavailable
from mcpd.storage.clickhouse.params import format_params

URL_SETTING = "storage.clickhouse_url"
UNKNOWN_TABLE = 60  # ClickHouse's error code for a table that does not exist.

_CODE = re.compile(r"Code: (\d+)")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class ClickHouseError(Internal):
    """ClickHouse refused a statement.

    `clickhouse_code` is ClickHouse's error code when it gave one; `detail` is its full message,
    for logs.
    The message a caller sees says only that storage failed, since it would otherwise carry SQL.
    """

    def __init__(self, detail: str, *, code: int | None) -> None:
        super().__init__(f"storage error (ClickHouse code {code})", reason="STORAGE_ERROR")
        self.clickhouse_code = code
        self.detail = detail

    @classmethod
    def from_driver(cls, error: Exception) -> ClickHouseError:
        """Wrap a driver exception, reading the `Code: N` ClickHouse puts in every message."""
        text = str(error)
        match = _CODE.search(text)
        return cls(text, code=int(match.group(1)) if match else None)


class ClickHouseExecutor(Protocol):
    """Runs SQL on one ClickHouse database. Synchronous; safe to share between threads."""

    def command(self, sql: str, params: Mapping[str, object] | None = None) -> None:
        """Run a statement that returns no rows (DDL, INSERT ... VALUES, ALTER)."""
        ...

    def query(self, sql: str, params: Mapping[str, object] | None = None) -> list[tuple[Any, ...]]:
        """Run a SELECT and return every row."""
        ...

    def insert(self, table: str, columns: Sequence[str], data: str | bytes, fmt: str) -> None:
        """Write rows: `INSERT INTO table (columns) FORMAT fmt` with `data`, the rows as text in
        that input format (JSONCompactColumns, JSONEachRow...), sent as the statement's data.

        One call is one INSERT (one block, so one part per partition). Raises ValueError when a
        table, column or format name is not a plain identifier.
        """
        ...

    def close(self) -> None:
        """Release the connection or the engine. Idempotent."""
        ...


def insert_statement(table: str, columns: Sequence[str], fmt: str) -> str:
    """`INSERT INTO table (`a`, `b`) FORMAT fmt`: the statement both executors run for `insert`
    (spelled as clickhouse-connect's `raw_insert` spells it).

    Raises ValueError for a name that is not a plain identifier, as the names become SQL text.
    """
    return f"{_insert_target(table, columns, fmt)} FORMAT {fmt}"


def _insert_target(table: str, columns: Sequence[str], fmt: str) -> str:
    for name in (table, *columns, fmt):
        if not _NAME.fullmatch(name):
            raise ValueError(f"not a plain identifier: {name!r}")
    if not columns:
        raise ValueError("an INSERT names at least one column")
    listed = ", ".join(f"`{column}`" for column in columns)
    return f"INSERT INTO {table} ({listed})"


@dataclass(frozen=True)
class HttpTarget:
    """Where `HttpExecutor` connects, parsed from `http(s)://user:pass@host:port/database`."""

    host: str
    port: int
    username: str
    password: str = field(repr=False)
    database: str
    secure: bool

    @classmethod
    def from_url(cls, url: str) -> HttpTarget:
        """Parse a ClickHouse HTTP URL. Raises ValueError naming what is wrong."""
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https"):
            raise ValueError(f"scheme must be http or https, not {parts.scheme!r}")
        if not parts.hostname:
            raise ValueError("the URL names no host")
        secure = parts.scheme == "https"
        database = unquote(parts.path.strip("/")) or "default"
        if "/" in database:
            raise ValueError("the URL path must be one database name")
        return cls(
            host=parts.hostname,
            port=parts.port or (8443 if secure else 8123),
            username=unquote(parts.username or "default"),
            password=unquote(parts.password or ""),
            database=database,
            secure=secure,
        )


class HttpExecutor:
    """A ClickHouse server over HTTP(S), through clickhouse-connect."""

    def __init__(self, client: Any) -> None:
        # clickhouse_connect's Client; typed Any because its method signatures are loose.
        self._client = client
        self._closed = False

    @classmethod
    def connect(cls, target: HttpTarget) -> HttpExecutor:
        """Connect (clickhouse-connect checks the server on construction)."""
        import clickhouse_connect
        from clickhouse_connect.driver.exceptions import Error as DriverError

        try:
            client = clickhouse_connect.get_client(
                host=target.host,
                port=target.port,
                username=target.username,
                password=target.password,
                database=target.database,
                secure=target.secure,
                # No server session: queries in one session run one at a time, and the store is
                # called from many threads at once. Nothing here relies on session state.
                autogenerate_session_id=False,
            )
        except (DriverError, OSError) as error:
            raise Unavailable(
                f"cannot reach ClickHouse at {target.host}:{target.port}", field=URL_SETTING
            ) from error
        return cls(client)

    def command(self, sql: str, params: Mapping[str, object] | None = None) -> None:
        """Run a statement through `Client.command`."""
        self._call(lambda: self._client.command(sql, parameters=_driver_params(params)))

    def query(self, sql: str, params: Mapping[str, object] | None = None) -> list[tuple[Any, ...]]:
        """Run a SELECT through `Client.query`; rows as tuples."""
        result = self._call(lambda: self._client.query(sql, parameters=_driver_params(params)))
        return [tuple(row) for row in result.result_rows]

    def insert(self, table: str, columns: Sequence[str], data: str | bytes, fmt: str) -> None:
        """Write rows through `Client.raw_insert`: the statement and the data make up the POST
        body (`INSERT ... FORMAT fmt`, a newline, the data), so the URL carries only the
        database and settings whatever the size of the data."""
        _insert_target(table, columns, fmt)  # the names are checked as ChdbExecutor checks them
        block = data.encode() if isinstance(data, str) else data
        self._call(
            lambda: self._client.raw_insert(table, list(columns), insert_block=block, fmt=fmt)
        )

    def close(self) -> None:
        """Close the client's HTTP connections."""
        if not self._closed:
            self._closed = True
            self._client.close()

    @staticmethod
    def _call(request: Callable[[], Any]) -> Any:
        from clickhouse_connect.driver.exceptions import DatabaseError, OperationalError

        try:
            return request()
        except OperationalError as error:
            raise Unavailable("ClickHouse is unreachable") from error
        except DatabaseError as error:
            raise ClickHouseError.from_driver(error) from error


def _driver_params(params: Mapping[str, object] | None) -> dict[str, object] | None:
    return dict(params) if params else None


class ChdbExecutor:
    """The ClickHouse engine in process, through chdb, storing its data under `path`.

    chdb runs one engine per process: a second executor on a *different* path fails until the
    first is closed (one on the same path shares the engine).

    Calls are serialised (chdb runs one statement at a time on a connection anyway). After a
    statement fails, chdb keeps whatever output it had produced and hands it out ahead of the
    next statement's (seen with chdb 4.4), so a failure is followed, under the same lock, by
    `_drain`, which runs a probe until its output is the probe's own.

    The engine gets the server's default `background_pool_size` (chdb sizes it by the cores, two
    threads on two): merges and mutations share those threads, each part a delete touches is a
    mutation task, and a task that finds every thread busy is postponed for hundreds of
    milliseconds: with more parts than threads, a delete would wait seconds.
    """

    _PROBE = "SELECT 1"
    _PROBE_OUTPUT = b"1\n"  # its output in TSV
    _DRAIN_ATTEMPTS = 3
    _BACKGROUND_POOL_SIZE = 16

    def __init__(self, path: Path) -> None:
        import chdb.session

        # chdb ships no signatures for Session; it is used through the few calls below.
        session_class: Any = chdb.session.Session
        self._lock = threading.Lock()
        try:
            self._session: Any = session_class(
                f"{path}?background_pool_size={self._BACKGROUND_POOL_SIZE}"
            )
            # NaN and infinities as strings, so they survive the JSON result format.
            self._session.query("SET output_format_json_quote_denormals = 1")
        except RuntimeError as error:
            raise ClickHouseError.from_driver(error) from error
        self._closed = False

    def command(self, sql: str, params: Mapping[str, object] | None = None) -> None:
        """Run a statement; its output, if any, is discarded."""
        self._run(sql, params)

    def query(self, sql: str, params: Mapping[str, object] | None = None) -> list[tuple[Any, ...]]:
        """Run a SELECT; decoded from JSONCompact by each column's declared type."""
        raw = self._run(sql, params)
        if not raw:
            return []
        document = json.loads(raw)
        types = [column["type"] for column in document["meta"]]
        return [
            tuple(decode(kind, value) for kind, value in zip(types, row, strict=True))
            for row in document["data"]
        ]

    def insert(self, table: str, columns: Sequence[str], data: str | bytes, fmt: str) -> None:
        """Write rows through chdb's streaming insert (`Session.send_insert`): the data is fed
        to the INSERT's input format as an HTTP body would be, never parsed as SQL."""
        target = _insert_target(table, columns, fmt)
        block = data.encode() if isinstance(data, str) else data
        with self._lock:
            try:
                inserter = self._session.send_insert(target, fmt)
            except RuntimeError as error:
                self._drain()
                raise ClickHouseError.from_driver(error) from error
            finished = False
            try:
                inserter.append(block)
                inserter.finish()
                finished = True
            except RuntimeError as error:
                raise ClickHouseError.from_driver(error) from error
            finally:
                if not finished:
                    self._abandon(inserter)

    def close(self) -> None:
        """Close the session (and the engine, when it is the last one)."""
        with self._lock:
            if not self._closed:
                self._closed = True
                self._session.close()

    def _run(self, sql: str, params: Mapping[str, object] | None) -> bytes:
        formatted = format_params(params) if params else None
        with self._lock:
            try:
                result = self._session.query(sql, "JSONCompact", params=formatted)
            except RuntimeError as error:  # chdb's ChdbError is a RuntimeError
                self._drain()
                raise ClickHouseError.from_driver(error) from error
            data: bytes = result.bytes()
            return data

    def _abandon(self, inserter: Any) -> None:
        """Cancel a streaming insert that failed (a no-op once it finished), then drain."""
        with contextlib.suppress(RuntimeError):  # the engine already dropped it
            inserter.cancel()
        self._drain()

    def _drain(self) -> None:
        """Discard the output a failed statement left behind (the caller holds the lock)."""
        for _ in range(self._DRAIN_ATTEMPTS):
            try:
                output = self._session.query(self._PROBE, "TSV").bytes()
            except RuntimeError:
                continue
            if output == self._PROBE_OUTPUT:
                return
        raise ClickHouseError("chdb output still holds a failed statement's result", code=None)


def decode(kind: str, value: Any) -> Any:
    """Turn one JSONCompact value into the Python value the result contract promises.

    JSON output may quote 64-bit integers and non-finite floats; the declared type says how to
    read them back.
    """
    if value is None:
        return None
    for wrapper in ("Nullable(", "LowCardinality("):
        if kind.startswith(wrapper):
            return decode(kind[len(wrapper) : -1], value)
    if kind.startswith("Array("):
        return [decode(kind[len("Array(") : -1], item) for item in value]
    if kind.startswith(("Int", "UInt")):
        return int(value)
    if kind.startswith("Float"):
        return float(value)
    if kind == "Bool":
        return bool(value)
    return value


def open_executor(url: str) -> ClickHouseExecutor:
    """The executor a `storage.clickhouse_url` names.

    `chdb:///absolute/path` runs the engine in process with its data at that path;
    `http(s)://user:password@host:port/database` connects to a server.
    """
    parts = urlsplit(url)
    match parts.scheme:
        case "chdb":
            if parts.netloc or not parts.path.startswith("/"):
                raise InvalidArgument(
                    "a chdb URL names an absolute path: chdb:///var/lib/mcpd/clickhouse",
                    field=URL_SETTING,
                )
            return ChdbExecutor(Path(unquote(parts.path)))
        case "http" | "https":
            try:
                target = HttpTarget.from_url(url)
            except ValueError as error:
                raise InvalidArgument(f"bad ClickHouse URL: {error}", field=URL_SETTING) from error
            return HttpExecutor.connect(target)
        case _:
            raise InvalidArgument(
                f"ClickHouse URL scheme must be chdb, http or https, not {parts.scheme!r}",
                field=URL_SETTING,
            )
