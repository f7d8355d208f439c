"""The login throttle, on a manual clock."""

from __future__ import annotations

import pytest

from mcpd.auth.throttle import LoginThrottle
from mcpd.runtime.clock import ManualClock
from mcpd.runtime.errors import ResourceExhausted

WINDOW = 100.0


def _throttle(clock: ManualClock, **kwargs: float) -> LoginThrottle:
    settings = {"max_failures": 3, "window_s": WINDOW, "max_lockout_s": 350.0, **kwargs}
    return LoginThrottle(
        clock,
        max_failures=int(settings["max_failures"]),
        window_s=settings["window_s"],
        max_lockout_s=settings["max_lockout_s"],
        max_entries=int(settings.get("max_entries", 1000)),
    )


def _retry_after(throttle: LoginThrottle, email: str, address: str) -> int:
    with pytest.raises(ResourceExhausted) as caught:
        throttle.check(email, address)
    assert caught.value.reason == "TOO_MANY_LOGIN_ATTEMPTS"
    delay = int(caught.value.metadata["retry_after_s"])
    assert caught.value.retry_after_s == delay  # the Retry-After a REST client gets
    return delay


def _fail(throttle: LoginThrottle, email: str, address: str, times: int) -> None:
    for _ in range(times):
        throttle.check(email, address)
        throttle.record_failure(email, address)


def test_locks_the_account_after_max_failures_until_the_window_passes() -> None:
    clock = ManualClock()
    throttle = _throttle(clock)
    _fail(throttle, "a@x", "10.0.0.1", 2)
    throttle.check("a@x", "10.0.0.1")  # two failures: still allowed
    throttle.record_failure("a@x", "10.0.0.1")
    assert _retry_after(throttle, "a@x", "10.0.0.1") == 100
    # The account is locked from any address.
    assert _retry_after(throttle, "a@x", "10.0.0.2") == 100
    clock.advance(99.5)
    assert _retry_after(throttle, "a@x", "10.0.0.2") == 1
    clock.advance(0.5)
    throttle.check("a@x", "10.0.0.2")


def test_failures_outside_the_window_do_not_add_up() -> None:
    clock = ManualClock()
    throttle = _throttle(clock)
    _fail(throttle, "a@x", "10.0.0.1", 2)
    clock.advance(WINDOW + 1)
    _fail(throttle, "a@x", "10.0.0.1", 2)
    throttle.check("a@x", "10.0.0.1")


def test_the_address_is_locked_across_accounts() -> None:
    clock = ManualClock()
    throttle = _throttle(clock)
    _fail(throttle, "a@x", "10.0.0.1", 1)
    _fail(throttle, "b@x", "10.0.0.1", 1)
    _fail(throttle, "c@x", "10.0.0.1", 1)
    assert _retry_after(throttle, "d@x", "10.0.0.1") == 100
    throttle.check("d@x", "10.0.0.2")  # d itself is fine from elsewhere


def test_success_clears_the_account_but_not_the_address() -> None:
    clock = ManualClock()
    throttle = _throttle(clock)
    _fail(throttle, "a@x", "10.0.0.1", 2)
    throttle.record_success("a@x", "10.0.0.1")
    # The account starts over: two more failures from a new address do not lock it...
    _fail(throttle, "a@x", "10.0.0.2", 2)
    throttle.check("a@x", "10.0.0.3")
    # ...but the first address remembers its two failures: one more locks it.
    throttle.record_failure("z@x", "10.0.0.1")
    assert _retry_after(throttle, "y@x", "10.0.0.1") == 100


def test_repeated_lockouts_double_up_to_the_cap() -> None:
    clock = ManualClock()
    throttle = _throttle(clock)
    seen = []
    for _ in range(4):
        _fail(throttle, "a@x", "10.0.0.1", 3)
        retry = _retry_after(throttle, "a@x", "10.0.0.1")
        seen.append(retry)
        clock.advance(retry)
    assert seen == [100, 200, 350, 350]


def test_a_long_quiet_period_forgets_the_lockouts() -> None:
    clock = ManualClock()
    throttle = _throttle(clock)
    _fail(throttle, "a@x", "10.0.0.1", 3)
    clock.advance(100)
    _fail(throttle, "a@x", "10.0.0.1", 3)
    assert _retry_after(throttle, "a@x", "10.0.0.1") == 200
    clock.advance(200 + 350 + WINDOW + 1)
    _fail(throttle, "a@x", "10.0.0.1", 3)
    assert _retry_after(throttle, "a@x", "10.0.0.1") == 100


def test_memory_is_bounded_by_evicting_the_oldest() -> None:
    clock = ManualClock()
    throttle = _throttle(clock, max_failures=1, max_entries=4)
    throttle.record_failure("a@x", "10.0.0.1")  # locks a@x and 10.0.0.1
    assert _retry_after(throttle, "a@x", "10.0.0.9") == 100
    throttle.record_failure("b@x", "10.0.0.2")
    throttle.record_failure("c@x", "10.0.0.3")  # six counters: the two oldest (a's) go
    throttle.check("a@x", "10.0.0.1")
    assert len(throttle._counters) == 4


def test_rejects_nonsense_settings() -> None:
    with pytest.raises(ValueError, match="must be > 0"):
        LoginThrottle(ManualClock(), max_failures=0, window_s=1.0)
