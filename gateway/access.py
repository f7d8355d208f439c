"""The gateway's credential check before costly work on a request body.

The gateway enforces nothing itself: the services' auth interceptor decides every call. But a
request body costs the gateway work before any service sees it (reading up to the body limit,
inflating gzip, converting JSON to protobuf), so a caller without a valid credential could make
it burn CPU for nothing. Before that work the gateway asks the process that will serve the call
whether the caller's credential is admitted: the same gRPC method, called with
`x-mcpd-check-access` metadata and an empty request, which the interceptor answers from the
metadata alone (`mcpd.auth.interceptor`), refusing and auditing exactly as the call itself would.

Granted answers are remembered for `ttl_s` per (method, credential digest), so a busy exporter
pays one check per interval; refusals are not remembered, so a key created a moment ago works
at once. Remembering a grant is safe because it only lets the gateway do the work: the call
that follows is authenticated again by the service, so a key revoked within the interval is
still refused there.
"""

from __future__ import annotations

import hashlib
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence

import grpc.aio

from mcpd.auth.metadata import ACCESS_CHECK, AUTHORIZATION
from mcpd.runtime.errors import Unavailable

GRANT_TTL_S = 5.0
MAX_GRANTS = 10_000


class AccessCheck:
    """Asks the serving process whether a caller may call a method (see the module docstring).

    `monotonic` is injectable for tests of the grant interval.
    """

    def __init__(
        self,
        *,
        deadline_s: float,
        ttl_s: float = GRANT_TTL_S,
        max_grants: int = MAX_GRANTS,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        if deadline_s <= 0 or ttl_s < 0 or max_grants < 1:
            raise ValueError("need deadline_s > 0, ttl_s >= 0 and max_grants >= 1")
        self._deadline_s = deadline_s
        self._ttl_s = ttl_s
        self._max_grants = max_grants
        self._monotonic = monotonic
        # (method path, credential digest) -> when the grant lapses; oldest first.
        self._grants: OrderedDict[tuple[str, bytes], float] = OrderedDict()

    async def require(
        self, channel: grpc.aio.Channel, path: str, metadata: Sequence[tuple[str, str]]
    ) -> None:
        """Return when the caller whose `metadata` (as forwarded upstream) would be admitted to
        the method `path` served on `channel`; raise the service's refusal
        (`grpc.aio.AioRpcError`) otherwise."""
        key = (path, _credential_digest(metadata))
        now = self._monotonic()
        lapses = self._grants.get(key)
        if lapses is not None and now < lapses:
            return
        check: grpc.aio.UnaryUnaryMultiCallable[bytes, bytes] = channel.unary_unary(path)
        try:
            await check(b"", timeout=self._deadline_s, metadata=(*metadata, (ACCESS_CHECK, "1")))
        except grpc.aio.UsageError as exc:
            # A closed channel: the process is shutting down or the peer went away.
            raise Unavailable(str(exc)) from exc
        self._remember(key, now + self._ttl_s)

    def _remember(self, key: tuple[str, bytes], lapses: float) -> None:
        self._grants[key] = lapses
        self._grants.move_to_end(key)
        while len(self._grants) > self._max_grants:
            self._grants.popitem(last=False)


def _credential_digest(metadata: Sequence[tuple[str, str]]) -> bytes:
    # A digest, so the table holds no secret; b"" stands for "no credential" (local mode).
    for name, value in metadata:
        if name == AUTHORIZATION:
            return hashlib.sha256(value.encode()).digest()
    return b""
