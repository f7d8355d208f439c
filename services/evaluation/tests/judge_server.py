"""A small real HTTP server that speaks OpenAI's chat-completions protocol, as a judge.

It grades the answer in the request's user message: 0.9 when it mentions a refund, else 0.2,
with a reason saying which. An answer holding a marker makes it misbehave instead: `[garbage]`
answers content that is not JSON, `[shape]` a JSON object without a score, `[outside]` the score
1.5, `[http500]` HTTP 500, `[slow]` nothing until `slow_s` has passed; `[pause]` answers as usual
after PAUSE_S. Every request is recorded (its headers and JSON body), and `most_at_once` is the
most requests it was answering at one time. Each reply reports `usage` of PROMPT_TOKENS and
COMPLETION_TOKENS.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

PROMPT_TOKENS = 1000
COMPLETION_TOKENS = 50
ANSWER_MARK = "The run's answer:\n"
PAUSE_S = 0.2


@dataclass(frozen=True)
class Recorded:
    """One request the judge received."""

    path: str
    headers: dict[str, str]
    body: dict[str, Any]

    def message(self, role: str) -> str:
        """The content of the request's message of `role`."""
        found = [m["content"] for m in self.body["messages"] if m["role"] == role]
        assert len(found) == 1, self.body
        content: str = found[0]
        return content


class JudgeServer:
    """The server, listening on 127.0.0.1 at a free port (see the module docstring)."""

    def __init__(self, *, slow_s: float = 5.0) -> None:
        self.slow_s = slow_s
        self.requests: list[Recorded] = []
        self.most_at_once = 0
        self._at_once = 0
        self._lock = threading.Lock()
        self._release = threading.Event()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        # A short poll, so closing the server does not wait half a second.
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )

    @property
    def url(self) -> str:
        """The base URL a judge is configured with (`/chat/completions` is under it)."""
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}/v1"

    def start(self) -> None:
        self._thread.start()

    def close(self) -> None:
        self._release.set()
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()

    def answer(self, request: Recorded) -> tuple[int, Any]:
        """The status and JSON body the judge answers `request` with."""
        with self._lock:
            self.requests.append(request)
            self._at_once += 1
            self.most_at_once = max(self.most_at_once, self._at_once)
        try:
            return self._answer(request)
        finally:
            with self._lock:
                self._at_once -= 1

    def _answer(self, request: Recorded) -> tuple[int, Any]:
        answer = request.message("user").partition(ANSWER_MARK)[2]
        if "[http500]" in answer:
            return 500, {"error": {"message": "the judge broke"}}
        if "[slow]" in answer:
            self._release.wait(self.slow_s)
        if "[pause]" in answer:
            self._release.wait(PAUSE_S)
        if "[garbage]" in answer:
            content = "I think it is rather good"
        elif "[shape]" in answer:
            content = json.dumps({"grade": "A", "reason": "fine"})
        elif "[outside]" in answer:
            content = json.dumps({"score": 1.5, "reason": "better than perfect"})
        elif "refund" in answer.lower():
            content = json.dumps({"score": 0.9, "reason": "the answer says the refund was issued"})
        else:
            content = json.dumps({"score": 0.2, "reason": "the answer does not mention a refund"})
        return 200, _completion(request.body["model"], content)


def _completion(model: str, content: str) -> dict[str, Any]:
    return {
        "id": "chatcmpl-test",
        "object": "chat.completion",
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": content},
                "finish_reason": "stop",
            }
        ],
        "usage": {
            "prompt_tokens": PROMPT_TOKENS,
            "completion_tokens": COMPLETION_TOKENS,
            "total_tokens": PROMPT_TOKENS + COMPLETION_TOKENS,
        },
    }


def _handler(judge: JudgeServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("content-length", "0"))
            body = json.loads(self.rfile.read(length))
            headers = {name.lower(): value for name, value in self.headers.items()}
            recorded = Recorded(self.path, headers, body)
            status, reply = (
                judge.answer(recorded) if self.path == "/v1/chat/completions" else (404, {})
            )
            data = json.dumps(reply).encode()
            try:
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the caller stopped waiting: what a timeout is

        def log_message(self, format: str, *args: Any) -> None:
            pass

    return Handler


@contextmanager
def judge_server(*, slow_s: float = 5.0) -> Iterator[JudgeServer]:
    """A running JudgeServer, closed afterwards."""
    server = JudgeServer(slow_s=slow_s)
    server.start()
    try:
        yield server
    finally:
        server.close()
