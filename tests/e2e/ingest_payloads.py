"""Native IngestBatch bodies (spec JSON) shared by the ingest end-to-end tests."""

from __future__ import annotations

import secrets
from typing import Any

T0 = "2026-11-29T10:00:00.000Z"
T1 = "2026-11-29T10:00:01.500Z"
T2 = "2026-11-29T10:00:02.000Z"


def new_trace_id() -> str:
    return secrets.token_hex(16)


def new_span_id() -> str:
    return secrets.token_hex(8)


def agent_trace(trace_id: str, *, user_id: str = "user-42") -> dict[str, Any]:
    """An agent run with one model inference (cache read, reasoning) and one tool call."""
    root, model, tool = new_span_id(), new_span_id(), new_span_id()
    correlation = {
        "project": "",
        "environment": "production",
        "service_name": "support-bot",
        "session_id": "session-7",
        "user_id": user_id,
    }
    return {
        "spans": [
            {
                "trace_id": trace_id,
                "span_id": root,
                "name": "answer_ticket",
                "kind": "agent_run",
                "status": "ok",
                "start_time": T0,
                "end_time": T2,
                "is_root": True,
                "is_event": False,
                "tags": ["beta"],
                "input": {"question": "where is my order?"},
                "correlation": correlation,
            },
            {
                "trace_id": trace_id,
                "span_id": model,
                "parent_span_id": root,
                "name": "chat claude-sonnet-4-5",
                "kind": "model_inference",
                "status": "ok",
                "start_time": T0,
                "end_time": T1,
                "is_root": False,
                "is_event": False,
                "model": "claude-sonnet-4-5",
                "provider": "anthropic",
                "usage": {
                    "input_tokens": 1000,
                    "output_tokens": 500,
                    "input_details": {"cache_read": 600, "text": 400},
                    "output_details": {"reasoning": 200, "text": 300},
                },
                "correlation": correlation,
            },
            {
                "trace_id": trace_id,
                "span_id": tool,
                "parent_span_id": root,
                "name": "lookup_order",
                "kind": "tool_call",
                "status": "ok",
                "start_time": T1,
                "end_time": T2,
                "is_root": False,
                "is_event": False,
                "correlation": correlation,
            },
        ],
        "logs": [
            {
                "log_id": f"log-{trace_id[:8]}",
                "trace_id": trace_id,
                "span_id": tool,
                "timestamp": T1,
                "level": "info",
                "message": "order found",
                "correlation": correlation,
            }
        ],
        "metrics": [
            {
                "metric_id": f"metric-{trace_id[:8]}",
                "name": "orders.lookups",
                "kind": "counter",
                "value": 1,
                "timestamp": T1,
                "labels": {"region": "eu"},
                "trace_id": trace_id,
                "correlation": correlation,
            }
        ],
        "scores": [
            {
                "score_id": f"score-{trace_id[:8]}",
                "trace_id": trace_id,
                "scorer_id": "helpfulness",
                "source": "live",
                "value": 0.75,
                "timestamp": T2,
                "correlation": correlation,
            }
        ],
        "feedback": [
            {
                "feedback_id": f"feedback-{trace_id[:8]}",
                "trace_id": trace_id,
                "kind": "thumbs",
                "value": "up",
                "timestamp": T2,
                "correlation": correlation,
            }
        ],
    }
