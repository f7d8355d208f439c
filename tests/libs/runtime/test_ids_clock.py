"""Ids and clocks."""

from __future__ import annotations

import re
import time
from datetime import UTC, datetime, timedelta, timezone

import pytest
from google.protobuf import timestamp_pb2

from mcpd.runtime.clock import Clock, ManualClock, SystemClock, from_timestamp, to_timestamp
from mcpd.runtime.ids import (
    _Monotonic,
    encode_ulid,
    new_id,
    new_span_id,
    new_trace_id,
    ulid_timestamp_ms,
)

ULID = re.compile(r"^[0-7][0-9A-HJKMNP-TV-Z]{25}$")


def test_new_id_is_a_ulid_of_the_current_time() -> None:
    before = time.time_ns() // 1_000_000
    value = new_id()
    after = time.time_ns() // 1_000_000
    assert ULID.match(value), value
    assert before <= ulid_timestamp_ms(value) <= after


def test_ids_sort_in_creation_order_even_within_a_millisecond() -> None:
    ids = [new_id() for _ in range(2000)]
    assert sorted(ids) == ids
    assert len(set(ids)) == len(ids)


def test_monotonic_steps_the_random_part_when_time_stands_still_or_goes_back() -> None:
    monotonic = _Monotonic()
    first = monotonic.next(1000)
    assert monotonic.next(1000) == (1000, first[1] + 1)
    assert monotonic.next(999) == (1000, first[1] + 2)  # the clock stepped back
    assert monotonic.next(1001)[0] == 1001


def test_ulid_encoding_matches_the_reference_vector() -> None:
    # The ULID specification's seeded example: ulid(1469918176385) starts 01ARYZ6S41.
    assert encode_ulid(1469918176385, 0).startswith("01ARYZ6S41")
    assert ulid_timestamp_ms("01ARYZ6S41TSV4RRFFQ69G5FAV") == 1469918176385
    assert ulid_timestamp_ms("01aryz6s41tsv4rrffq69g5fav") == 1469918176385
    assert encode_ulid(2**48 - 1, 2**80 - 1) == "7" + "Z" * 25
    with pytest.raises(ValueError, match="ULID"):
        ulid_timestamp_ms("8" + "0" * 25)  # beyond 128 bits


def test_trace_and_span_ids_are_w3c_shaped() -> None:
    for _ in range(100):
        trace_id, span_id = new_trace_id(), new_span_id()
        assert re.fullmatch(r"[0-9a-f]{32}", trace_id)
        assert re.fullmatch(r"[0-9a-f]{16}", span_id)
        assert trace_id != "0" * 32
        assert span_id != "0" * 16
    assert len({new_trace_id() for _ in range(100)}) == 100


def test_system_clock_is_aware_utc() -> None:
    clock: Clock = SystemClock()
    assert clock.now().tzinfo is UTC
    assert clock.monotonic() <= clock.monotonic()


def test_manual_clock_moves_only_when_told() -> None:
    start = datetime(2026, 4, 29, 18, 42, 31, tzinfo=UTC)
    clock = ManualClock(start, monotonic_start=100.0)
    assert isinstance(clock, Clock)
    assert (clock.now(), clock.monotonic()) == (start, 100.0)
    clock.advance(timedelta(seconds=1.5))
    clock.advance(2)
    assert (clock.now(), clock.monotonic()) == (start + timedelta(seconds=3.5), 103.5)
    clock.set(start - timedelta(hours=1))  # the wall clock may step back ...
    assert clock.now() == start - timedelta(hours=1)
    assert clock.monotonic() == 103.5  # ... monotonic time does not
    with pytest.raises(ValueError, match="forwards"):
        clock.advance(-1)
    with pytest.raises(ValueError, match="timezone-aware"):
        clock.set(datetime(2026, 1, 1))  # naive on purpose


def test_manual_clock_normalises_to_utc() -> None:
    plus_two = timezone(timedelta(hours=2))
    clock = ManualClock(datetime(2026, 1, 1, 12, tzinfo=plus_two))
    assert clock.now() == datetime(2026, 1, 1, 10, tzinfo=UTC)
    assert clock.now().tzinfo is UTC


def test_timestamps_round_trip_with_microseconds() -> None:
    moment = datetime(2026, 4, 29, 18, 42, 31, 125_678, tzinfo=UTC)
    timestamp = to_timestamp(moment)
    assert (timestamp.seconds, timestamp.nanos) == (int(moment.timestamp()), 125_678_000)
    assert from_timestamp(timestamp) == moment
    assert from_timestamp(timestamp).tzinfo is UTC
    local = moment.astimezone(timezone(timedelta(hours=-5)))
    assert to_timestamp(local) == timestamp


def test_naive_datetimes_are_refused() -> None:
    with pytest.raises(ValueError, match="naive"):
        to_timestamp(datetime(2026, 1, 1))  # naive on purpose


def test_from_timestamp_truncates_nanoseconds() -> None:
    timestamp = timestamp_pb2.Timestamp(seconds=0, nanos=999)
    assert from_timestamp(timestamp) == datetime(1970, 1, 1, tzinfo=UTC)
