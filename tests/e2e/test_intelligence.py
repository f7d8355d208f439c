"""Aspects, notes and themes end to end: a real `mcpd serve` on SQLite and PostgreSQL with a
clustering pass every second. Notes along three aspects of one agent's traces arrive over the
native ingest API; the pass writes snapshots; every read RPC answers over REST and gRPC alike:
the catalogue, the entity index, progress, snapshots (inventory and landmarks), a flow across
the three aspects, one theme, its examples (and the noise's), its history and a trace's notes.
The daemon derives an outcome note for every trace that ended. Erasing a person takes their
notes out of the themes."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import grpc
import httpx
import pytest

from mcpd import codec
from mcpd.intelligence.v1 import intelligence_service_pb2 as rpc
from mcpd.intelligence.v1.intelligence_service_pb2_grpc import IntelligenceServiceStub
from mcpd.model.v1 import enums_pb2
from mcpd.testing.daemon import DaemonProcess
from mcpd.testing.eventually import eventually
from tests.e2e.conftest import storage_env
from tests.e2e.ingest_payloads import new_span_id, new_trace_id, rfc3339

pytestmark = pytest.mark.e2e

AGENT = {"entity_kind": "agent", "entity_name": "support-bot"}
TRACES = 72
# Per aspect, the groups of wording its notes are written in (a trace takes group i % len).
WORDING = {
    "goal": [
        "the customer asked for a refund of order {n} after a duplicate charge",
        "the user could not log in to the dashboard because the reset link expired",
        "the customer wanted to change the delivery address of parcel {n}",
    ],
    "sentiment": [
        "the customer was frustrated and wrote in capital letters about order {n}",
        "the user was calm and thanked the agent twice for the help",
    ],
    "behaviour": [
        "the agent looked up order {n} and issued the refund without asking a human",
        "the agent sent a new password reset link and waited for the user",
        "the agent asked a clarifying question about parcel {n} before acting",
    ],
}
ODD = "the moon was made of green cheese according to a passing remark"


@pytest.fixture(
    scope="module", params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
)
def daemon(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[DaemonProcess]:
    directory = tmp_path_factory.mktemp(f"intelligence-{request.param}")
    env = {
        **storage_env(request.param, directory, request),
        "MCPD_INTELLIGENCE_PASS_INTERVAL_S": "1",
    }
    with DaemonProcess(extra_env=env) as running:
        yield running


@pytest.fixture(scope="module")
def http(daemon: DaemonProcess) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=f"{daemon.http_url}/v1/api", timeout=30) as client:
        yield client


@pytest.fixture(scope="module")
def stub(daemon: DaemonProcess) -> Iterator[IntelligenceServiceStub]:
    with grpc.insecure_channel(daemon.grpc_addr) as channel:
        yield IntelligenceServiceStub(channel)


def ok(answer: httpx.Response) -> Any:
    assert answer.status_code == 200, answer.text
    return answer.json()


@pytest.fixture(scope="module")
def traces(http: httpx.Client) -> list[str]:
    """TRACES traces of the agent, each with one note per aspect (the last trace's goal note is
    a sentence nothing else resembles), written a minute ago; and a pass has covered them."""
    now = time.time_ns() - 60 * 1_000_000_000
    trace_ids = [new_trace_id() for _ in range(TRACES)]
    spans, notes = [], []
    for index, trace_id in enumerate(trace_ids):
        user = "erase-me" if index == 0 else f"user-{index}"
        correlation = {"project": "", "service_name": "support-bot", "user_id": user}
        spans.append(
            {
                "trace_id": trace_id,
                "span_id": new_span_id(),
                "name": "handle_ticket",
                "kind": "agent_run",
                "status": "ok",
                "start_time": rfc3339(now + index),
                "end_time": rfc3339(now + index + 1_000),
                "correlation": correlation,
                **AGENT,
            }
        )
        for aspect, groups in WORDING.items():
            text = groups[index % len(groups)].format(n=1000 + index)
            if aspect == "goal" and index == TRACES - 1:
                text = ODD
            notes.append(
                {
                    "note_id": f"{aspect}-{trace_id}",
                    "trace_id": trace_id,
                    "aspect": aspect,
                    "text": text,
                    "definition_version": 1,
                    "created_at": rfc3339(now + index + 2_000),
                    "correlation": correlation,
                }
            )
    result = ok(http.post("/ingest", json={"spans": spans, "aspect_notes": notes}))
    assert result["accepted"] == len(spans) + len(notes), result
    eventually(lambda: _ready(http), timeout=60)
    return trace_ids


def _ready(http: httpx.Client) -> None:
    progress = ok(http.get("/intelligence/progress", params=AGENT))
    assert progress["readiness"] == "ready", progress


def test_the_catalogue_lists_the_built_ins_with_limits(
    http: httpx.Client, stub: IntelligenceServiceStub
) -> None:
    answer = ok(http.get("/aspects"))
    assert [a["name"] for a in answer["aspects"]] == ["goal", "sentiment", "behaviour", "outcome"]
    outcome = answer["aspects"][-1]
    assert (outcome["derived"], outcome["built_in"], outcome["version"]) == (True, True, 1)
    assert answer["limits"] == {
        "min_notes_to_cluster": 50,
        "max_notes_per_pass": 20000,
        "page_size": 500,
        "max_aspects": 16,
        "pass_armed": True,
    }
    grpc_answer = stub.GetAspectCatalogue(rpc.GetAspectCatalogueRequest())
    assert codec.encode(grpc_answer) == answer


def test_a_note_for_an_unknown_aspect_is_refused_naming_the_field(http: httpx.Client) -> None:
    note = {
        "note_id": "n-unknown",
        "trace_id": new_trace_id(),
        "aspect": "mood",
        "text": "something",
        "definition_version": 1,
        "created_at": rfc3339(time.time_ns()),
        "correlation": {"project": ""},
    }
    result = ok(http.post("/ingest", json={"aspect_notes": [note]}))
    assert (result["accepted"], result["rejected"]) == (0, 1)
    assert result["errors"][0]["message"].startswith("aspect: 'mood' is not an aspect")


def test_entities_and_progress_read_the_same_counts(
    http: httpx.Client, stub: IntelligenceServiceStub, traces: list[str]
) -> None:
    index = ok(http.get("/intelligence/entities"))
    [row] = [e for e in index["entities"] if e["entity_name"] == "support-bot"]
    assert row["entity_kind"] == "agent"
    # Three notes per trace from the test, and the daemon's derived outcome note.
    assert (row["trace_count"], row["note_count"]) == (TRACES, 4 * TRACES)
    assert (row["enabled_aspects"], row["ready_aspects"], row["readiness"]) == (4, 4, "ready")
    progress = ok(http.get("/intelligence/progress", params=AGENT))
    rows = {a["aspect"]: a for a in progress["aspects"]}
    assert list(rows) == ["goal", "sentiment", "behaviour", "outcome"]
    assert rows["goal"]["note_count"] == TRACES
    assert rows["goal"]["notes_needed"] == 0
    assert (rows["outcome"]["note_count"], rows["outcome"]["readiness"]) == (TRACES, "ready")
    assert progress["latest_snapshot"]["aspects"] == ["goal", "sentiment", "behaviour", "outcome"]
    request = rpc.EntityRequest(entity_kind=enums_pb2.ENTITY_KIND_AGENT, entity_name="support-bot")
    assert codec.encode(stub.GetAspectProgress(request))["aspects"] == progress["aspects"]
    missing = http.get("/intelligence/progress", params={"entity_name": "support-bot"})
    assert missing.status_code == 400
    assert "entity_kind" in missing.text


def test_snapshots_as_an_inventory_and_as_landmarks(
    http: httpx.Client, stub: IntelligenceServiceStub, traces: list[str]
) -> None:
    # A pass runs every second: wait for a few snapshots.
    eventually(
        lambda: _at_least(ok(http.get("/intelligence/snapshots", params=AGENT))["total"], 3),
        timeout=30,
    )
    inventory = ok(http.get("/intelligence/snapshots", params={**AGENT, "limit": 2}))
    first, second = (item["snapshot"] for item in inventory["snapshots"])
    assert (first["ordinal"], second["ordinal"]) == (1, 2)
    assert first["cutoff_at"] < second["cutoff_at"]
    assert inventory["page"]["has_more"] is True
    assert "reason" not in inventory["snapshots"][0]
    landmarks = ok(
        http.get(
            "/intelligence/snapshots",
            params={**AGENT, "presentation": "landmarks", "points": 3},
        )
    )
    reasons = [item["reason"] for item in landmarks["snapshots"]]
    assert reasons == ["range_start", "time_sample", "range_end"]
    assert landmarks["total"] >= 3
    request = rpc.ListSnapshotsRequest(
        entity_kind=enums_pb2.ENTITY_KIND_AGENT, entity_name="support-bot", limit=2
    )
    assert [s.snapshot.ordinal for s in stub.ListSnapshots(request).snapshots] == [1, 2]


def _at_least(value: int, floor: int) -> None:
    assert value >= floor


def test_a_flow_across_three_aspects_adds_up(
    http: httpx.Client, stub: IntelligenceServiceStub, traces: list[str]
) -> None:
    flow = ok(
        http.get(
            "/intelligence/flow",
            params={**AGENT, "aspects": "goal,behaviour,sentiment", "theme_limit_per_stage": 2},
        )
    )
    assert [stage["aspect"] for stage in flow["stages"]] == ["goal", "behaviour", "sentiment"]
    goal = flow["stages"][0]
    assert goal["trace_count"] == TRACES
    assert sum(node["coverage"] for node in goal["nodes"]) == pytest.approx(1.0)
    assert sum(node["trace_count"] for node in goal["nodes"]) == TRACES
    kinds = [node["kind"] for node in goal["nodes"]]
    # Three goal themes shown two at a time: two theme nodes, the odd note's noise, the fold.
    assert kinds == ["theme", "theme", "noise", "other"]
    assert "theme_id" not in goal["nodes"][-1]
    links = [link for link in flow["links"] if link["source_node_id"].startswith("goal:")]
    assert sum(link["trace_count"] for link in links) == TRACES
    for link in flow["links"]:
        assert 0 < link["source_share"] <= 1
        assert 0 < link["target_share"] <= 1
    grpc_flow = stub.GetThemeFlow(
        rpc.GetThemeFlowRequest(
            entity_kind=enums_pb2.ENTITY_KIND_AGENT,
            entity_name="support-bot",
            aspects=["goal", "behaviour", "sentiment"],
            theme_limit_per_stage=2,
            snapshot_id=flow["snapshot"]["snapshot_id"],
        )
    )
    assert codec.encode(grpc_flow) == flow
    bad = http.get("/intelligence/flow", params={**AGENT, "aspects": "goal"})
    assert bad.status_code == 400
    assert "aspects" in bad.text


def test_a_theme_its_examples_its_history_and_a_trace_s_notes(
    http: httpx.Client, stub: IntelligenceServiceStub, traces: list[str]
) -> None:
    flow = ok(http.get("/intelligence/flow", params={**AGENT, "aspects": "goal,behaviour"}))
    snapshot_id = flow["snapshot"]["snapshot_id"]
    node = flow["stages"][0]["nodes"][0]
    theme_id = node["theme_id"]
    detail = ok(http.get(f"/intelligence/themes/{theme_id}", params={"snapshot_id": snapshot_id}))
    theme = detail["theme"]
    assert (theme["theme_id"], theme["aspect"], theme["note_count"]) == (
        theme_id,
        "goal",
        node["trace_count"],
    )
    examples = ok(
        http.get(
            f"/intelligence/themes/{theme_id}/examples",
            params={"snapshot_id": snapshot_id, "limit": 5},
        )
    )
    assert examples["examples"][0]["note_id"] == theme["label_note_id"]
    assert examples["examples"][0]["similarity"] == 64
    assert examples["examples"][0]["text"] == theme["label"]
    similarities = [e["similarity"] for e in examples["examples"]]
    assert similarities == sorted(similarities, reverse=True)
    assert examples["page"]["total"] == theme["note_count"]
    assert "trace_started_at" in examples["examples"][0]
    noise = ok(
        http.get(
            "/intelligence/themes/noise/examples",
            params={"snapshot_id": snapshot_id, "aspect": "goal"},
        )
    )
    assert [e["text"] for e in noise["examples"]] == [ODD]
    history = ok(http.get(f"/intelligence/themes/{theme_id}/history"))
    states = [point["state"] for point in history["points"]]
    assert states[0] == "birth"
    assert set(states[1:]) <= {"continue"}
    assert history["label"] == theme["label"]
    grpc_history = stub.GetThemeHistory(rpc.GetThemeHistoryRequest(theme_id=theme_id))
    assert [p.snapshot_id for p in grpc_history.points][: len(states)] == [
        p["snapshot_id"] for p in history["points"]
    ][: len(grpc_history.points)]
    assert http.get("/intelligence/themes/not-a-theme").status_code == 404
    # The same answers over gRPC.
    grpc_detail = stub.GetTheme(rpc.GetThemeRequest(theme_id=theme_id, snapshot_id=snapshot_id))
    assert codec.encode(grpc_detail) == detail
    grpc_examples = stub.ListThemeExamples(
        rpc.ListThemeExamplesRequest(theme_id=theme_id, snapshot_id=snapshot_id, limit=5)
    )
    assert codec.encode(grpc_examples)["examples"] == examples["examples"]
    grpc_notes = stub.GetTraceNotes(rpc.GetTraceNotesRequest(trace_id=traces[1]))
    assert codec.encode(grpc_notes) == ok(http.get(f"/traces/{traces[1]}/notes"))
    grpc_index = stub.ListEntities(rpc.ListEntitiesRequest())
    assert codec.encode(grpc_index) == ok(http.get("/intelligence/entities"))
    notes = ok(http.get(f"/traces/{traces[1]}/notes"))
    assert [n["aspect"] for n in notes["notes"]] == ["goal", "sentiment", "behaviour", "outcome"]
    # Derived by the daemon, with no model: the trace ended well.
    assert notes["notes"][-1]["text"] == "The trace ended without errors."
    assert "model" not in notes["notes"][-1]
    assert http.get(f"/traces/{new_trace_id()}/notes").status_code == 404


def test_erasing_a_person_takes_their_notes_out_of_the_themes(
    http: httpx.Client, traces: list[str]
) -> None:
    erased = ok(http.post("/erasure", json={"user_id": "erase-me"}))
    assert erased["aspect_notes_erased"] == 4
    assert erased["theme_examples_erased"] >= 3
    notes = http.get(f"/traces/{traces[0]}/notes")
    assert notes.status_code == 404
