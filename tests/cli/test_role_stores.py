"""Which stores each role opens: every role authenticates, only the orchestrator owns runs."""

from __future__ import annotations

from cli.roles import GRPC_ROLES, ROLE_STORES, ROLES, stores_of
from mcpd.storage import STORE_NAMES


def test_every_grpc_role_opens_the_control_store_and_only_the_orchestrator_the_run_store() -> None:
    assert set(ROLE_STORES) == set(GRPC_ROLES)
    assert all("control" in stores for stores in ROLE_STORES.values())
    assert [role for role, stores in ROLE_STORES.items() if "run" in stores] == ["orchestrator"]
    assert stores_of(["query"]) == {"trace", "control"}
    assert stores_of(["ingest"]) == {"trace", "control"}


def test_a_process_opens_the_union_of_its_roles_stores_and_the_gateway_none() -> None:
    assert stores_of(["gateway"]) == frozenset()
    assert stores_of(["query", "orchestrator"]) == STORE_NAMES
    assert stores_of(ROLES) == STORE_NAMES
