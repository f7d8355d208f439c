"""What the processes of one `mcpd serve` say to each other: every message is one of these.

The supervisor forks its server processes (`cli.supervisor`) and talks to each over a pipe
(`multiprocessing.Pipe`, which pickles these frozen dataclasses):

- supervisor -> every server, at fork: its `ServerPlan` (an argument, not a message);
- server 0 -> supervisor, once storage is migrated (it is the one that migrates): `Migrated`;
- supervisor -> every other server, then: `Proceed` (they open storage without migrating);
- server -> supervisor, once all its ports listen: `Ready`, with the lines it adds to the
  start-up banner;
- supervisor -> every server, once all are Ready and the banner is printed: `Open`. Until then a
  server's gateway holds the HTTP requests it receives, so whoever sees mcpd answer over HTTP
  finds the banner printed and every server serving;
- server -> supervisor, when it cannot start: `Failed`, with the reason; it exits 1 after.

Nothing else crosses: the servers share storage the way replicas of a deployment do, and each
one serves every request it receives whole.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Failed", "Message", "Migrated", "Open", "Proceed", "Ready", "ServerPlan"]


@dataclass(frozen=True, slots=True)
class ServerPlan:
    """One server process of `mcpd serve`: its place and the addresses every server shares.

    `index` 0 is the primary: it migrates storage first and runs the work that must happen once
    per daemon (transcript tailing, the tail-sampling sweep, the retention sweep)."""

    index: int
    count: int
    http_addr: str
    grpc_addr: str
    otlp_grpc_addr: str

    @property
    def primary(self) -> bool:
        """Whether this server runs the once-per-daemon work."""
        return self.index == 0


@dataclass(frozen=True, slots=True)
class Migrated:
    """Storage is migrated: the other servers may open it."""


@dataclass(frozen=True, slots=True)
class Proceed:
    """Open storage (migrated by server 0) and serve."""


@dataclass(frozen=True, slots=True)
class Ready:
    """Every port of this server listens; `banner` are the lines it adds to the banner."""

    index: int
    pid: int
    banner: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Open:
    """Every server is Ready and the banner is printed: serve HTTP requests."""


@dataclass(frozen=True, slots=True)
class Failed:
    """This server cannot start, because of `reason` (what `mcpd serve` prints)."""

    index: int
    reason: str


Message = Migrated | Proceed | Ready | Open | Failed
