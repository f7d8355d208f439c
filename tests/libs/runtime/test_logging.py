"""Structured logs: JSON lines with extras and trace context, and no secrets."""

from __future__ import annotations

import io
import json
import logging
import re
from collections.abc import Iterator

import pytest
from opentelemetry.sdk.trace import TracerProvider

from mcpd.runtime.logging import configure_logging, redact_url

TS = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")


@pytest.fixture
def output() -> Iterator[io.StringIO]:
    """Where configure_logging writes; the root logger is restored afterwards."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    stream = io.StringIO()
    yield stream
    for handler in [h for h in root.handlers if h not in handlers]:
        root.removeHandler(handler)
    root.setLevel(level)


def _lines(stream: io.StringIO) -> list[dict[str, object]]:
    return [json.loads(line) for line in stream.getvalue().splitlines()]


def test_json_lines_carry_the_fixed_fields_and_extras(output: io.StringIO) -> None:
    configure_logging("info", "json", stream=output)
    log = logging.getLogger("mcpd.test")
    log.info("run %s started", "r1", extra={"run_id": "r1", "attempt": 2, "tags": ["a"]})
    log.debug("not shown at info")
    [entry] = _lines(output)
    assert TS.match(str(entry["ts"])), entry["ts"]
    assert entry["level"] == "info"
    assert entry["logger"] == "mcpd.test"
    assert entry["msg"] == "run r1 started"
    assert (entry["run_id"], entry["attempt"], entry["tags"]) == ("r1", 2, ["a"])
    assert "trace_id" not in entry


def test_json_lines_carry_the_active_span(output: io.StringIO) -> None:
    configure_logging("debug", "json", stream=output)
    tracer = TracerProvider().get_tracer("test")
    with tracer.start_as_current_span("work") as span:
        logging.getLogger("mcpd.test").debug("inside")
        context = span.get_span_context()
    [entry] = _lines(output)
    assert entry["trace_id"] == f"{context.trace_id:032x}"
    assert entry["span_id"] == f"{context.span_id:016x}"


def test_exceptions_are_one_line_with_the_traceback(output: io.StringIO) -> None:
    configure_logging("info", "json", stream=output)
    try:
        raise ValueError("bad thing")
    except ValueError:
        logging.getLogger("mcpd.test").exception("failed")
    [entry] = _lines(output)
    assert "ValueError: bad thing" in str(entry["exc"])
    assert "Traceback" in str(entry["exc"])


def test_extras_cannot_impersonate_fixed_fields(output: io.StringIO) -> None:
    configure_logging("info", "json", stream=output)
    logging.getLogger("mcpd.test").warning("real", extra={"level": "debug", "ts": "never"})
    [entry] = _lines(output)
    assert (entry["level"], entry["msg"]) == ("warning", "real")
    assert entry["ts"] != "never"


def test_passwords_never_reach_the_output(output: io.StringIO) -> None:
    configure_logging("info", "json", stream=output)
    url = "postgresql://mcpd:hunter2@db:5432/mcpd"
    log = logging.getLogger("mcpd.test")
    log.info("connecting to %s", url, extra={"url": url})
    try:
        raise ConnectionError(f"cannot reach {url}")
    except ConnectionError:
        log.exception("failed")
    text = output.getvalue()
    assert "hunter2" not in text
    assert "postgresql://mcpd:***@db:5432/mcpd" in text


def test_text_format_is_readable(output: io.StringIO) -> None:
    configure_logging("warning", "text", stream=output)
    logging.getLogger("mcpd.serve").warning("stopping", extra={"roles": ["query"], "note": "a b"})
    line = output.getvalue().strip()
    assert re.match(r'^\S+Z WARNING  mcpd\.serve: stopping roles=\["query"\] note="a b"$', line), (
        line
    )


def test_configuring_again_replaces_the_handler(output: io.StringIO) -> None:
    configure_logging("info", "json", stream=io.StringIO())
    configure_logging("info", "json", stream=output)
    logging.getLogger("mcpd.test").info("once")
    assert len(_lines(output)) == 1
    marked = [h for h in logging.getLogger().handlers if getattr(h, "_mcpd_handler", False)]
    assert len(marked) == 1


def test_bad_level_or_format_is_refused() -> None:
    with pytest.raises(ValueError, match="log level"):
        configure_logging("verbose", "json")
    with pytest.raises(ValueError, match="log format"):
        configure_logging("info", "xml")


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("postgresql://u:p@h:5432/db", "postgresql://u:***@h:5432/db"),
        ("https://default:s3cr3t@ch:8443/mcpd", "https://default:***@ch:8443/mcpd"),
        ("postgresql://u@h/db", "postgresql://u@h/db"),
        (
            "postgresql://h/db?sslmode=require&password=x",
            "postgresql://h/db?sslmode=require&password=***",
        ),
        ("chdb:///var/lib/mcpd", "chdb:///var/lib/mcpd"),
        ("host=db user=u password=x dbname=m", "host=db user=u password=*** dbname=m"),
        ("http://[::1:80/", "***"),
    ],
)
def test_redact_url(url: str, expected: str) -> None:
    assert redact_url(url) == expected
