"""Property-based conformance of the query API: Schemathesis against a real `mcpd serve`.

The daemon (SQLite) holds the dataset of test_query_api; the schema is the daemon's own
/v1/api/openapi.json. Each query route (erasure included: the daemon is thrown away) gets
requests Schemathesis generates from the document, valid and invalid ones alike, and every
response must not be a 5xx, must have a status code the document declares (200, 4XX, 5XX), and
must match the declared schema: the response message on 200, the one error shape otherwise.

Generation is bounded (max_examples per route) and derandomized, so CI sends the same requests
on every run. The routes are driven through the documented strategy API
(`APIOperation.as_strategy` under Hypothesis' `@given`), one test per route:
`schemathesis.pytest.from_fixture`, which would load the schema from a fixture, does not run
on pytest 9.2 (it reads `Node._nodeid`, which pytest 9.2 removed), and a schema loaded at import
time would need the daemon before collection.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from schemathesis import GenerationMode, checks

from tests.e2e.test_query_api import seeded_daemon

pytestmark = pytest.mark.e2e

# The query routes: QueryService's reads, the trace delete, and erasure.
QUERY_ROUTES = [
    ("GET", "/v1/api/capabilities"),
    ("GET", "/v1/api/traces"),
    ("GET", "/v1/api/traces/{trace_id}"),
    ("DELETE", "/v1/api/traces/{trace_id}"),
    ("GET", "/v1/api/spans"),
    ("GET", "/v1/api/logs"),
    ("GET", "/v1/api/metrics/{name}/series"),
    ("GET", "/v1/api/scores"),
    ("GET", "/v1/api/feedback"),
    ("GET", "/v1/api/analytics/summary"),
    ("GET", "/v1/api/analytics/cost"),
    ("GET", "/v1/api/discovery"),
    ("GET", "/v1/api/deltas"),
    ("POST", "/v1/api/erasure"),
]
CHECKS = [
    checks.not_a_server_error,
    checks.status_code_conformance,
    checks.response_schema_conformance,
]
# Routes whose generated requests cannot be expected to find anything: a random trace id names
# no stored trace. Every other route must answer 200 to some generated request, or the run
# proved nothing about its successful answers.
NO_SUCCESS_EXPECTED = {
    ("GET", "/v1/api/traces/{trace_id}"),
    ("DELETE", "/v1/api/traces/{trace_id}"),
}
MAX_EXAMPLES = 50
LOCAL_PROJECT = "default"  # the anonymous caller's project on a daemon without keys
# The document declares bearer auth; the daemon runs in local mode (no keys), so requests go
# without credentials instead of with generated ones, which would only exercise the 401 path.
CONFIG = {"generation": {"with-security-parameters": False}}


@pytest.fixture(scope="module")
def query_schema() -> Iterator[schemathesis.BaseSchema]:
    """The daemon's own OpenAPI document; requests go to the daemon that served it."""
    with seeded_daemon() as client:
        yield schemathesis.openapi.from_url(
            f"{client.base_url}/v1/api/openapi.json",
            config=schemathesis.Config.from_dict(CONFIG),
            timeout=30,
        )


def test_the_document_declares_every_query_route(query_schema: schemathesis.BaseSchema) -> None:
    for method, path in QUERY_ROUTES:
        operation = query_schema[path][method]
        assert operation.method.upper() == method
        # Error responses are declared, so status_code_conformance has something to hold to.
        assert {"200", "4XX", "5XX"} <= set(operation.definition.raw["responses"])


@pytest.mark.parametrize(
    ("method", "path"), QUERY_ROUTES, ids=[f"{m} {p}" for m, p in QUERY_ROUTES]
)
def test_query_route_conforms_to_its_openapi(
    query_schema: schemathesis.BaseSchema, method: str, path: str
) -> None:
    operation = query_schema[path][method]
    # Query routes name the local project (any other is a 403 before anything else is read);
    # everything else is generated.
    query = {"project": LOCAL_PROJECT} if method != "POST" else None
    cases = st.one_of(
        operation.as_strategy(generation_mode=GenerationMode.POSITIVE, query=query),
        operation.as_strategy(generation_mode=GenerationMode.NEGATIVE, query=query),
    )

    @settings(
        max_examples=MAX_EXAMPLES,
        deadline=None,
        derandomize=True,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
    )
    @given(case=cases)
    def conforms(case: schemathesis.Case[Any]) -> None:
        response = case.call_and_validate(checks=CHECKS, timeout=30)
        statuses[response.status_code] += 1

    statuses: Counter[int] = Counter()
    conforms()
    if (method, path) not in NO_SUCCESS_EXPECTED:
        assert statuses[200], f"no generated request succeeded: {dict(statuses)}"
