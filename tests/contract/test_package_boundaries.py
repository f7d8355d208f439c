"""Package boundaries, read from the imports of every module outside the test suites (ast).

Two kinds of package meet here:

- a component (a package `services.<name>` or `gateway.<name>`) is closed: from outside it, only
  the names its `__init__` lists in `__all__` may be imported. A subpackage it lists there is open
  in turn up to its own `__all__`; anything else in it is its own business. A plain module there
  (`gateway.app`) is published like a library's;
- a library (`mcpd.<name>`, and the `cli`, `bench` and `scripts` tools) publishes its modules: any
  module may be imported unless its name starts with `_`, and a name imported from a package or
  module that declares `__all__` must be listed there.

Besides: no service imports another service (they talk over gRPC), the gateway imports no
service (it is an edge that forwards), and no library imports a component or a tool. Within one
of these packages anything goes: the boundary is between them.

Tests may reach into what they test: modules under a `tests` directory are not walked.
"""

from __future__ import annotations

import ast
import functools
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).parents[2]
# Top-level package -> its directory.
ROOTS = {
    "mcpd": REPO / "libs" / "mcpd",
    "services": REPO / "services",
    "gateway": REPO / "gateway",
    "cli": REPO / "cli",
    "bench": REPO / "bench",
    "scripts": REPO / "scripts",
}
COMPONENTS = frozenset({"services", "gateway"})
TOOLS = frozenset({"cli", "bench", "scripts"})


@dataclass(frozen=True)
class Module:
    """One module of the repository: its dotted name, file, and whether it is a package."""

    name: str
    path: Path
    is_package: bool

    @property
    def package(self) -> str:
        """The package the module's code lives in (a package's own name for an `__init__`)."""
        return self.name if self.is_package else self.name.rpartition(".")[0]


def _module_of(top: str, path: Path) -> Module:
    parts = [top, *path.relative_to(ROOTS[top]).with_suffix("").parts]
    is_package = parts[-1] == "__init__"
    return Module(".".join(parts[:-1] if is_package else parts), path, is_package)


def _generated(path: Path) -> bool:
    return path.stem.endswith(("_pb2", "_pb2_grpc"))


def _walked(path: Path) -> bool:
    return "tests" not in path.parts and not _generated(path)


@functools.cache
def modules() -> dict[str, Module]:
    """Every Python module of the repository, by dotted name."""
    found: dict[str, Module] = {}
    for top, root in ROOTS.items():
        for path in sorted(root.rglob("*.py")):
            module = _module_of(top, path)
            found[module.name] = module
    return found


@functools.cache
def declared_all(name: str) -> frozenset[str] | None:
    """The `__all__` a module or package declares (as a literal), None when it declares none."""
    module = modules().get(name)
    if module is None:
        return None
    for node in ast.parse(module.path.read_text()).body:
        targets = node.targets if isinstance(node, ast.Assign) else []
        if any(isinstance(target, ast.Name) and target.id == "__all__" for target in targets):
            assert isinstance(node, ast.Assign)
            return frozenset(ast.literal_eval(node.value))
    return None


def unit_of(name: str) -> str:
    """The package a boundary is drawn around: `services.ingest`, `mcpd.storage`, `cli`."""
    parts = name.split(".")
    return parts[0] if parts[0] in TOOLS else ".".join(parts[:2])


def _inside(module: Module, package: str) -> bool:
    return module.package == package or module.package.startswith(package + ".")


@dataclass(frozen=True)
class Import:
    """One imported module, or one name imported from a module, at a line of a module."""

    importer: Module
    line: int
    target: str
    name: str | None = None

    def __str__(self) -> str:
        what = self.target if self.name is None else f"{self.target}.{self.name}"
        return f"{self.importer.path.relative_to(REPO)}:{self.line}: {what}"


def imports(module: Module) -> Iterator[Import]:
    """Every absolute import of the repository's packages in `module`, nested ones included."""
    for node in ast.walk(ast.parse(module.path.read_text())):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if _ours(alias.name):
                    yield Import(module, node.lineno, alias.name)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and _ours(node.module):
            for alias in node.names:
                yield Import(module, node.lineno, str(node.module), alias.name)


def _ours(name: str | None) -> bool:
    return name is not None and name.split(".")[0] in ROOTS


def problem(found: Import) -> str | None:
    """Why `found` crosses a boundary it must not, None when it crosses none."""
    importer, target = found.importer, found.target
    home, there = unit_of(importer.name), unit_of(target)
    if home == there or _inside(importer, there):
        return None
    if home.startswith("services.") and there.startswith("services."):
        return "a service imports another service (call its gRPC API)"
    if home.startswith("gateway.") and there.startswith("services."):
        return "the gateway imports a service (forward to its gRPC API)"
    if home.startswith("mcpd.") and there.split(".")[0] in COMPONENTS | TOOLS:
        return "a library imports a component or a tool"
    path = target.split(".")
    if found.name is not None and f"{target}.{found.name}" in modules():
        path.append(found.name)  # `from package import module`: the module is the target
        names: list[str] = []
    else:
        names = [found.name] if found.name is not None else []
    unit = modules().get(there)
    if there.split(".")[0] in COMPONENTS and unit is not None and unit.is_package:
        return _closed(there, path, names)
    return _published(path, names)


def _closed(unit: str, path: list[str], names: list[str]) -> str | None:
    """A component: every step below it, and every name, listed by the `__all__` above it."""
    depth = len(unit.split("."))
    for step in range(depth, len(path) + len(names)):
        package = ".".join(path[:step])
        listed = declared_all(package) or frozenset()
        wanted = (path + names)[step]
        if wanted not in listed:
            return f"{wanted!r} is not in the __all__ of {package}"
    return None


def _published(path: list[str], names: list[str]) -> str | None:
    """A library: no `_private` module or name; a name listed by its module's `__all__` when it
    has one."""
    private = [part for part in path[1:] + names if part.startswith("_") and part[:2] != "__"]
    if private:
        return f"{'.'.join(path + names)} is private to its package"
    listed = declared_all(".".join(path))
    for name in names:
        if listed is not None and name not in listed:
            return f"{name!r} is not in the __all__ of {'.'.join(path)}"
    return None


def violations() -> list[str]:
    """Every import of the walked modules that crosses a boundary it must not."""
    found = []
    for module in modules().values():
        if not _walked(module.path):
            continue
        for each in imports(module):
            reason = problem(each)
            if reason is not None:
                found.append(f"{each}: {reason}")
    return found


def test_no_import_crosses_a_package_boundary() -> None:
    found = violations()
    assert not found, f"{len(found)} imports cross a package boundary:\n" + "\n".join(found)


def _from(importer: str, target: str, name: str | None = None) -> Import:
    module = modules()[importer]
    return Import(module, 1, target, name)


@pytest.mark.parametrize(
    ("found", "reason"),
    [
        # A component's modules are its own; its `__all__` is what others may take.
        (_from("cli.ingest", "services.ingest.writer", "BatchWriter"), "'writer' is not in"),
        (_from("cli.ingest", "services.ingest", "IngestServicer"), "'IngestServicer' is not in"),
        (_from("cli.roles", "services.query.sessions.common", "TEXT"), "'common' is not in"),
        (_from("cli.serve", "gateway.rest.transcoder", "ChannelFor"), "'transcoder' is not in"),
        # Services call each other over gRPC; the gateway forwards to them.
        (_from("services.query.erasure", "services.orchestrator"), "another service"),
        (_from("gateway.mcp.catalog", "services.query", "sessions"), "the gateway imports"),
        # Libraries sit below everything else.
        (_from("mcpd.storage.factory", "cli.roles", "ROLE_STORES"), "a library imports"),
        # A library's modules are public unless private, and its `__all__` holds where declared.
        (_from("services.ingest.pipeline", "mcpd.codec._decode", "decode"), "private"),
        (_from("cli.serve", "mcpd.auth.metadata", "_peer_host"), "private"),
        (_from("services.ingest.pipeline", "mcpd.storage", "open_everything"), "not in the"),
        (_from("cli.serve", "mcpd.auth.interceptor", "log"), "'log' is not in the __all__"),
    ],
)
def test_an_import_across_a_boundary_is_named(found: Import, reason: str) -> None:
    assert reason in (problem(found) or "")


@pytest.mark.parametrize(
    "found",
    [
        _from("cli.ingest", "services.ingest", "BatchWriter"),
        _from("cli.ingest", "services.ingest.otlp", "otlp_registrations"),
        _from("cli.roles", "services.query.sessions", "SessionTools"),
        _from("services.ingest.pipeline", "services.ingest.writer", "BatchWriter"),
        _from("gateway.app", "gateway.rest", "RestTranscoder"),
        _from("services.query.servicer", "mcpd.storage.interfaces", "TraceReads"),
        _from("services.query.servicer", "mcpd.runtime.errors", "NotFound"),
        _from("mcpd.redaction", "mcpd.redaction._keys", "load_or_create_key"),
        _from("scripts.deploy_checks.constants", "cli.roles", "SERVICE_ROLES"),
    ],
)
def test_an_import_through_a_published_surface_passes(found: Import) -> None:
    assert problem(found) is None
