"""Tail sampling: held traces are decided once they complete, and the decision is remembered.

Spans of a tail-sampling project are written to the trace store's holding table (durably, in
the same transaction as the rest of their batch), not to `spans`. A sweep every
`interval_s` asks the store for a summary of every held trace and the project's policy for a
verdict: keep (every error, every slow trace, and the sampled share of the rest), drop, or keep
waiting (root still running, settling after it ended, under `max_wait_s`). Kept traces move
into `spans` with their projection, and into their sessions (the trace store's release is
followed like its writes, `services.ingest.trace_sessions`); dropped ones are deleted.

The decision is remembered per (project, trace id) in a bounded memory, so spans that arrive
after it follow it instead of being held again; a straggler held all the same (it reached
another process first, see below) follows the remembered decision at the next sweep. After a
restart the memory is empty: a late straggler is then held and decided on its own when
`max_wait_s` runs out (its share is drawn from its trace id, so a trace that was sampled out
stays out unless the straggler itself failed).

One process sweeps (the primary of `mcpd serve`'s server processes); the others hold spans
without sweeping, and the stragglers they hold follow the sweeper's remembered decision at its
next sweep.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections import OrderedDict, defaultdict
from collections.abc import Iterable

from mcpd.runtime.clock import Clock, epoch_nanos
from mcpd.storage.interfaces import HeldSpans
from services.ingest.policies import ProjectPolicies

log = logging.getLogger(__name__)

DECISION_MEMORY = 100_000

Decision = tuple[str, list[str], list[str]]
"""One project's verdicts of a sweep: (project, trace ids kept, trace ids dropped)."""


class TailSampler:
    """Decides held traces (see the module docstring)."""

    def __init__(
        self,
        store: HeldSpans,
        policies: ProjectPolicies,
        clock: Clock,
        *,
        interval_s: float = 1.0,
        memory: int = DECISION_MEMORY,
    ) -> None:
        self._store = store
        self._policies = policies
        self._clock = clock
        self._interval_s = interval_s
        self._memory = memory
        self._decisions: OrderedDict[tuple[str, str], bool] = OrderedDict()
        self._lock = threading.Lock()
        self._task: asyncio.Task[None] | None = None

    def decided(self, project: str, trace_id: str) -> bool | None:
        """The remembered decision for a trace, or None when it has not been decided here."""
        with self._lock:
            return self._decisions.get((project, trace_id))

    def sweep(self) -> list[Decision]:
        """Decide every held trace that is ready; return the decisions, per project."""
        now = epoch_nanos(self._clock.now())
        verdicts: dict[str, tuple[list[str], list[str]]] = defaultdict(lambda: ([], []))
        for held in self._store.held_traces():
            verdict = self.decided(held.project, held.trace_id)
            if verdict is None:
                sampling = self._policies.get(held.project).sampling
                # A project that stopped tail sampling keeps what it held.
                verdict = sampling.tail_verdict(held, now) if sampling.is_tail else True
            if verdict is not None:
                verdicts[held.project][0 if verdict else 1].append(held.trace_id)
        decisions = [(project, keep, drop) for project, (keep, drop) in verdicts.items()]
        for project, keep, drop in decisions:
            # Remembered first: a straggler arriving while the release runs follows the
            # decision instead of being held and decided alone.
            self.remember([(project, keep, drop)])
            self._store.release_held(project, keep, drop)
        return decisions

    def remember(self, decisions: Iterable[Decision]) -> None:
        """Keep decisions, so stragglers follow them."""
        with self._lock:
            for project, keep, drop in decisions:
                for trace_ids, verdict in ((keep, True), (drop, False)):
                    for trace_id in trace_ids:
                        self._decisions[(project, trace_id)] = verdict
                        self._decisions.move_to_end((project, trace_id))
            while len(self._decisions) > self._memory:
                self._decisions.popitem(last=False)

    def start(self) -> None:
        """Sweep every `interval_s` on the running loop until `close`."""
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run(), name="tail-sampler")

    async def close(self) -> None:
        """Stop sweeping. Held traces stay held, durably, for the next start."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self._interval_s)
            try:
                await asyncio.to_thread(self.sweep)
            except Exception:
                log.exception("tail sampling sweep failed; held traces stay held")
