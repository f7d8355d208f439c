"""Admission by the bytes of the requests in progress."""

from __future__ import annotations

import pytest

from mcpd.runtime.errors import ResourceExhausted
from services.ingest.admission import RETRY_AFTER_S, Admission


def test_requests_are_admitted_up_to_the_bound_and_released_when_done() -> None:
    admission = Admission(100)
    with admission.admit(60), admission.admit(40):
        assert admission.pending_bytes == 100
        with pytest.raises(ResourceExhausted) as refused, admission.admit(1):
            pass
        assert refused.value.reason == "INGEST_BUSY"
        assert refused.value.retry_after_s == RETRY_AFTER_S
        assert admission.pending_bytes == 100  # a refusal holds nothing
    assert admission.pending_bytes == 0
    with admission.admit(100):
        pass


def test_a_request_larger_than_the_bound_is_admitted_alone() -> None:
    admission = Admission(10)
    with admission.admit(50), pytest.raises(ResourceExhausted), admission.admit(1):
        pass
    assert admission.pending_bytes == 0


def test_a_failed_request_releases_its_bytes() -> None:
    admission = Admission(10)
    with pytest.raises(RuntimeError), admission.admit(5):
        raise RuntimeError("mapping failed")
    assert admission.pending_bytes == 0
