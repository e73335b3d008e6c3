"""A local HTTP server (real socket, loopback) that speaks the OpenAI chat-completions
tool-calling protocol: a scripted stand-in for a remote model. A script answers each request
with an assistant message, or with ``Fail(status)`` for a model that is overloaded (5xx, 429)
or refuses the request (4xx)."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass(frozen=True)
class Fail:
    """An error answer, with an OpenAI-style error body."""

    status: int
    message: str = "the model is overloaded"


# request body -> the assistant message to answer with, or an error
Script = Callable[[dict[str, Any]], dict[str, Any] | Fail]


def tool_call(call_id: str, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {"role": "assistant", "content": None, "tool_calls": [{
        "id": call_id, "type": "function",
        "function": {"name": name, "arguments": json.dumps(arguments, ensure_ascii=False)}}]}


def say(text: str) -> dict[str, Any]:
    return {"role": "assistant", "content": text}


def tool_results(body: dict[str, Any]) -> list[dict[str, Any]]:
    """The tool messages of a request, their content decoded."""
    return [{**m, "content": json.loads(m["content"])} for m in body["messages"]
            if m["role"] == "tool"]


@dataclass
class FakeOpenAI:
    script: Script
    requests: list[dict[str, Any]] = field(default_factory=list)
    headers: list[dict[str, str]] = field(default_factory=list)
    url: str = ""


@contextmanager
def fake_openai(script: Script) -> Iterator[FakeOpenAI]:
    fake = FakeOpenAI(script)

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            fake.requests.append(body)
            fake.headers.append(dict(self.headers))
            if self.path != "/v1/chat/completions":
                self._send(404, {"error": {"message": "not found"}})
                return
            message = fake.script(body)
            if isinstance(message, Fail):
                self._send(message.status, {"error": {"message": message.message}})
                return
            reason = "tool_calls" if message.get("tool_calls") else "stop"
            self._send(200, {"id": f"chatcmpl-{len(fake.requests)}", "object": "chat.completion",
                             "model": body["model"], "choices": [{
                                 "index": 0, "message": message, "finish_reason": reason}]})

        def _send(self, status: int, payload: dict[str, Any]) -> None:
            raw = json.dumps(payload, ensure_ascii=False).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(raw)))
            self.end_headers()
            self.wfile.write(raw)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True, name="fake-openai")
    thread.start()
    fake.url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    try:
        yield fake
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)
