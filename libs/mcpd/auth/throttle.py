"""Slowing down password guessing: failed logins lock out an account and an address for a while.

Two counters per failed login: one for the account's email, one for the client's address. An
attacker trying many passwords on one account is stopped by the first; one trying one password on
many accounts (spraying) by the second. `max_failures` failures within `window_s` seconds lock
the counter out for `window_s` seconds; each further lock-out of the same counter doubles that,
up to `max_lockout_s`. A counter that stays quiet for `max_lockout_s + window_s` is forgotten,
which also resets the doubling.

State lives in this process only: each replica throttles on its own, so N replicas behind a load
balancer allow up to N times the attempts. That is still a hard ceiling on guessing rate; a shared
throttle would need the control store on every failed login.

Memory is bounded: beyond `max_entries` counters the least recently touched are dropped. An
attacker could flush a lock-out by touching that many fresh counters; the cap is set far above
what honest traffic produces so that costs them many requests first.
"""

from __future__ import annotations

import math
import threading
from collections import OrderedDict
from dataclasses import dataclass, field

from mcpd.runtime.clock import Clock
from mcpd.runtime.errors import ResourceExhausted

DEFAULT_MAX_LOCKOUT_S = 3600.0
DEFAULT_MAX_ENTRIES = 100_000


@dataclass(slots=True)
class _Counter:
    failures: list[float] = field(default_factory=list)  # monotonic times within the window
    locked_until: float = 0.0
    lockouts: int = 0  # consecutive lock-outs, for the doubling
    last_failure: float = 0.0


class LoginThrottle:
    """Per-account and per-address lock-outs after repeated failed logins.

    Use: `check(email, address)` before verifying a password (raises while either is locked
    out), then `record_failure` or `record_success`. `email` is the normalised email.
    """

    def __init__(
        self,
        clock: Clock,
        *,
        max_failures: int,
        window_s: float,
        max_lockout_s: float = DEFAULT_MAX_LOCKOUT_S,
        max_entries: int = DEFAULT_MAX_ENTRIES,
    ) -> None:
        if max_failures < 1 or window_s <= 0 or max_lockout_s <= 0 or max_entries < 2:
            raise ValueError("max_failures, window_s, max_lockout_s and max_entries must be > 0")
        self._clock = clock
        self._max_failures = max_failures
        self._window_s = window_s
        self._max_lockout_s = max(max_lockout_s, window_s)
        self._max_entries = max_entries
        self._counters: OrderedDict[tuple[str, str], _Counter] = OrderedDict()
        # The gateway and the gRPC server may share one throttle from different threads.
        self._lock = threading.Lock()

    def check(self, email: str, address: str) -> None:
        """Raise ResourceExhausted (TOO_MANY_LOGIN_ATTEMPTS, metadata `retry_after_s`, and the
        same delay as its retry delay: `Retry-After` over REST) while the account or the address
        is locked out."""
        now = self._clock.monotonic()
        with self._lock:
            until = max(
                self._locked_until(("email", email), now),
                self._locked_until(("address", address), now),
            )
        if until > now:
            retry_after = max(1, math.ceil(until - now))
            raise ResourceExhausted(
                f"too many failed logins: try again in {retry_after} seconds",
                reason="TOO_MANY_LOGIN_ATTEMPTS",
                metadata={"retry_after_s": str(retry_after)},
                retry_after_s=retry_after,
            )

    def record_failure(self, email: str, address: str) -> None:
        """Count a failed login against the account and the address."""
        now = self._clock.monotonic()
        with self._lock:
            for key in (("email", email), ("address", address)):
                self._fail(self._counter(key, now), now)

    def record_success(self, email: str, address: str) -> None:
        """Clear the account's counter. The address keeps its own: one good password from an
        address must not wash out the guesses it made at other accounts."""
        with self._lock:
            self._counters.pop(("email", email), None)

    def _fail(self, counter: _Counter, now: float) -> None:
        horizon = now - self._window_s
        counter.failures = [t for t in counter.failures if t > horizon]
        counter.failures.append(now)
        counter.last_failure = now
        if len(counter.failures) >= self._max_failures:
            counter.lockouts += 1
            # window, 2 x window, 4 x window... capped; the exponent is capped too, so a counter
            # that keeps failing cannot grow a float overflow.
            doubled = self._window_s * 2 ** min(counter.lockouts - 1, 32)
            counter.locked_until = now + min(doubled, self._max_lockout_s)
            counter.failures.clear()

    def _counter(self, key: tuple[str, str], now: float) -> _Counter:
        counter = self._counters.get(key)
        if counter is None or self._stale(counter, now):
            counter = _Counter()
            self._counters[key] = counter
        self._counters.move_to_end(key)
        while len(self._counters) > self._max_entries:
            self._counters.popitem(last=False)
        return counter

    def _locked_until(self, key: tuple[str, str], now: float) -> float:
        counter = self._counters.get(key)
        if counter is None:
            return 0.0
        if self._stale(counter, now):
            del self._counters[key]
            return 0.0
        return counter.locked_until

    def _stale(self, counter: _Counter, now: float) -> bool:
        quiet_since = max(counter.last_failure, counter.locked_until)
        return now - quiet_since > self._max_lockout_s + self._window_s
