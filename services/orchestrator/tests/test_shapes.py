"""GetRunShapes' request checks, its defaults and bounds, and the messages it answers from the
store's shapes."""

from __future__ import annotations

import pytest
from google.protobuf.timestamp_pb2 import Timestamp

from mcpd.model.v1 import enums_pb2
from mcpd.orchestrator.v1 import orchestrator_service_pb2 as rpc
from mcpd.runtime.errors import InvalidArgument
from mcpd.storage.run_records import RunShape, RunShapes
from services.orchestrator.shapes import DEFAULT_BASELINE, DEFAULT_LIMIT, Shapes

S = 1_000_000_000


class Store:
    def __init__(self) -> None:
        self.asked: list[tuple[str, int, int, int, int]] = []

    def run_shapes(
        self, project: str, *, start: int, end: int, limit: int, baseline: int
    ) -> RunShapes:
        self.asked.append((project, start, end, limit, baseline))
        return RunShapes(
            runs=(
                RunShape("r2", "flow", 2, "running", 7, None, 3),
                RunShape("r1", "flow", 1, "failed", 2, 90 * S, 1),
            ),
            truncated=True,
            baselines={("flow", 2): (), ("flow", 1): (4, 5)},
        )


def request(**changes: object) -> rpc.GetRunShapesRequest:
    fields: dict[str, object] = {"project": "p", "to": Timestamp(seconds=100), **changes}
    made = rpc.GetRunShapesRequest(**fields)  # type: ignore[arg-type]
    getattr(made, "from").CopyFrom(Timestamp(seconds=40))
    return made


def test_the_shapes_of_the_window_with_defaults() -> None:
    store = Store()
    answer = Shapes(store).read(request())
    assert store.asked == [("p", 40 * S, 100 * S, DEFAULT_LIMIT, DEFAULT_BASELINE)]
    assert answer == rpc.GetRunShapesResponse(
        runs=[
            rpc.RunShape(
                run_id="r2",
                definition_id="flow",
                definition_version=2,
                status=enums_pb2.RUN_STATUS_RUNNING,
                steps_used=7,
                max_node_attempts=3,
            ),
            rpc.RunShape(
                run_id="r1",
                definition_id="flow",
                definition_version=1,
                status=enums_pb2.RUN_STATUS_FAILED,
                steps_used=2,
                ended_at=Timestamp(seconds=90),
                max_node_attempts=1,
            ),
        ],
        truncated=True,
        baselines=[
            rpc.RunStepBaseline(definition_id="flow", definition_version=1, steps_used=[4, 5]),
            rpc.RunStepBaseline(definition_id="flow", definition_version=2),
        ],
    )
    Shapes(store).read(request(limit=1, baseline=0))
    assert store.asked[-1][3:] == (1, 0)


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"limit": 0}, "limit"),
        ({"limit": 10_001}, "limit"),
        ({"baseline": 1001}, "baseline"),
        ({"to": Timestamp(seconds=40)}, "to"),
    ],
)
def test_a_request_out_of_bounds_names_its_field(changes: dict[str, object], field: str) -> None:
    with pytest.raises(InvalidArgument) as refused:
        Shapes(Store()).read(request(**changes))
    assert refused.value.field == field


def test_the_window_is_required() -> None:
    with pytest.raises(InvalidArgument) as refused:
        Shapes(Store()).read(rpc.GetRunShapesRequest(project="p", to=Timestamp(seconds=1)))
    assert refused.value.field == "from"
