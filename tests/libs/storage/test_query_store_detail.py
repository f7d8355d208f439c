"""`TraceStore.trace_detail_json` on the behaviour suite's dataset, on every backend: every trace
renders exactly as the codec encodes its records; an unknown trace is None."""

from __future__ import annotations

from typing import Any

import pytest

from mcpd.signals.queries import TraceQuery
from tests.libs.storage import query_data
from tests.libs.storage.detail_checks import rendered_and_encoded

# The dataset in a migrated store per backend, loaded once for this module's read-only tests.
store = query_data.loaded


@pytest.mark.parametrize("include", [False, True])
def test_every_trace_of_the_dataset_renders_as_the_codec_encodes_it(
    store: Any, include: bool
) -> None:
    traces = store.list_traces(query_data.P, TraceQuery()).rows
    assert len(traces) == 6
    for trace in traces:
        rendered, encoded = rendered_and_encoded(store, query_data.P, trace["trace_id"], include)
        assert rendered == encoded
        assert len(rendered["spans"]) == trace["span_count"]


def test_an_unknown_trace_is_none(store: Any) -> None:
    assert (
        store.trace_detail_json(query_data.P, "f" * 32, logs=True, scores=True, feedback=True)
        is None
    )
    assert store.trace_detail_json("nobody", "tr-a", logs=True, scores=True, feedback=True) is None
