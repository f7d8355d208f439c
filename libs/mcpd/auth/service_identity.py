"""The internal service identity: one credential shared by every mcpd process of a deployment,
for the calls one service makes on another (the query service's erasure of runs; background
work such as span writes from a timer).

It lives in a file: `service.credential` in the data directory by default, created on first start
(mode 0600, atomically, once, so processes sharing the directory agree on it), or wherever
`security.service_credential_file` says, so Kubernetes mounts one Secret into every role's pod.
A caller presents it in its own metadata, `x-mcpd-service-credential: <service>:<credential>`,
never in `authorization` (which the gateway forwards from clients); the service's name is what
the audit log records (`service:query`). The server keeps the credential's SHA-256 digest only
and compares digests in constant time. The credential is never logged, and never printed by a
repr.

Which RPCs accept it is declared in the protos (`internal`, `service` in the access option).
"""

from __future__ import annotations

import logging
import stat
from dataclasses import dataclass, field
from pathlib import Path

from mcpd.auth.metadata import SERVICE_CREDENTIAL
from mcpd.auth.tokens import digest, new_service_credential
from mcpd.runtime.data_dir import write_private_once
from mcpd.runtime.errors import FailedPrecondition

__all__ = [
    "CREDENTIAL_FILE",
    "MIN_CREDENTIAL_LENGTH",
    "SERVICE_PRINCIPAL_PREFIX",
    "ServiceCredential",
    "load_or_create_service_credential",
]

CREDENTIAL_FILE = "service.credential"
# What a credential written by hand (a Kubernetes Secret) needs at least: 192 bits of base64.
MIN_CREDENTIAL_LENGTH = 32
SERVICE_PRINCIPAL_PREFIX = "service:"

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class ServiceCredential:
    """The credential of this deployment's services."""

    secret: str = field(repr=False)

    @property
    def digest(self) -> str:
        """Its SHA-256 digest: all a server keeps to recognise it."""
        return digest(self.secret)

    def metadata(self, service: str) -> tuple[tuple[str, str], ...]:
        """The call metadata presenting the credential on behalf of `service` (`query`)."""
        return ((SERVICE_CREDENTIAL, f"{service}:{self.secret}"),)


def load_or_create_service_credential(path: Path) -> ServiceCredential:
    """The credential stored at `path`, created first when the file does not exist.

    The file holds one line of printable ASCII without spaces, at least `MIN_CREDENTIAL_LENGTH`
    characters (a created one is `mcpd_c_` and 43 random characters); surrounding whitespace is
    ignored. Raises FailedPrecondition naming the file, never its content, when it cannot be
    read or holds anything else.
    """
    existing = _read(path)
    if existing is not None:
        return existing
    try:
        created = write_private_once(path, (new_service_credential() + "\n").encode("ascii"))
    except OSError as error:
        raise FailedPrecondition(
            f"{path}: cannot create the service credential: {error.strerror}"
        ) from error
    if created:
        log.info("created the service credential", extra={"path": str(path)})
    loaded = _read(path)
    if loaded is None:  # pragma: no cover - removed between creation and read
        raise FailedPrecondition(f"{path}: the service credential disappeared while being created")
    return loaded


def _read(path: Path) -> ServiceCredential | None:
    try:
        text = path.read_bytes().decode("ascii").strip()
        mode = path.stat().st_mode
    except FileNotFoundError:
        return None
    except UnicodeDecodeError:
        text, mode = "", 0  # refused below, like any other text that is not a credential
    except OSError as error:
        raise FailedPrecondition(
            f"{path}: cannot read the service credential: {error.strerror}"
        ) from error
    if len(text) < MIN_CREDENTIAL_LENGTH or not text.isprintable() or " " in text:
        raise FailedPrecondition(
            f"{path}: a service credential is one line of at least {MIN_CREDENTIAL_LENGTH} "
            "printable ASCII characters without spaces; delete the file to have one made, and "
            "give every process of the deployment the same file"
        )
    if mode & stat.S_IRWXO:
        log.warning(
            "the service credential file is readable by every user; chmod 600 it",
            extra={"path": str(path)},
        )
    return ServiceCredential(text)
