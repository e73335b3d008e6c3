"""An OpenAI-compatible chat-completions client that lets a model call tools.

Only the wire protocol lives here (``POST {base_url}/chat/completions`` with ``tools``; a reply
either carries ``tool_calls`` or is the final answer); which tools exist and what they do is the
caller's business. Plain httpx: any server that speaks the protocol works (OpenAI, Ollama,
vLLM, llama.cpp, LiteLLM ...).

The loop::

    messages --complete--> tool_calls? --yes--> execute each, append results --> complete again
                                 |no                  (at most MAX_TOOL_ROUNDS rounds, then one
                                 v                     last call with tool_choice="none")
                           final text
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

import httpx

from onthedot.domain.errors import BackendError

LLM_TIMEOUT_SECONDS = 60.0
MAX_TOOL_ROUNDS = 5  # model turns that may call tools before it must answer in words

# (tool name, raw JSON arguments) -> the tool message content
ExecuteTool = Callable[[str, str], Awaitable[str]]


@dataclass(frozen=True)
class ToolCall:
    id: str
    name: str
    arguments: str  # JSON text, as the model wrote it


@dataclass(frozen=True)
class Completion:
    message: dict[str, Any]  # the assistant message, to be sent back in the next request
    content: str
    tool_calls: list[ToolCall]


class ChatModel:
    def __init__(self, base_url: str, model: str, api_key: str | None = None,
                 timeout_seconds: float = LLM_TIMEOUT_SECONDS) -> None:
        self.url = base_url.rstrip("/") + "/chat/completions"
        self.model = model
        self.headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self.timeout_seconds = timeout_seconds

    async def complete(self, http: httpx.AsyncClient, messages: Sequence[dict[str, Any]],
                       tools: Sequence[dict[str, Any]], *,
                       tool_choice: str = "auto") -> Completion:
        body: dict[str, Any] = {"model": self.model, "messages": list(messages)}
        if tools:
            body |= {"tools": list(tools), "tool_choice": tool_choice}
        try:
            response = await http.post(self.url, json=body, headers=self.headers,
                                       timeout=self.timeout_seconds)
        except httpx.HTTPError as exc:
            raise _unavailable(f"the model at {self.url} did not answer: "
                               f"{type(exc).__name__}") from exc
        if response.status_code != 200:
            raise _unavailable(f"the model at {self.url} answered HTTP {response.status_code}")
        try:
            return _completion(response.json())
        except (ValueError, LookupError, TypeError) as exc:
            raise BackendError(f"the model at {self.url} sent an answer that is not a chat "
                               "completion", code="llm_bad_answer", field="llm_base_url",
                               expected="an OpenAI-compatible chat-completions API") from exc


async def run_with_tools(model: ChatModel, messages: list[dict[str, Any]],
                         tools: Sequence[dict[str, Any]], execute: ExecuteTool) -> str:
    """Let the model call tools until it answers in words; returns that answer. ``messages``
    grows by every assistant and tool message of the exchange."""
    async with httpx.AsyncClient() as http:
        for _ in range(MAX_TOOL_ROUNDS):
            completion = await model.complete(http, messages, tools)
            messages.append(completion.message)
            if not completion.tool_calls:
                return completion.content
            for call in completion.tool_calls:
                content = await execute(call.name, call.arguments)
                messages.append({"role": "tool", "tool_call_id": call.id, "content": content})
        completion = await model.complete(http, messages, tools, tool_choice="none")
        messages.append(completion.message)
        return completion.content


def _completion(body: Any) -> Completion:
    message = body["choices"][0]["message"]
    if not isinstance(message, dict):
        raise TypeError("message is not an object")
    calls = [ToolCall(id=str(c["id"]), name=str(c["function"]["name"]),
                      arguments=_arguments_text(c["function"].get("arguments")))
             for c in message.get("tool_calls") or [] if c.get("type", "function") == "function"]
    content = message.get("content")
    text = content if isinstance(content, str) else ""
    # Sent back as the model wrote it, minus nulls some servers refuse to read back.
    echoed = {k: v for k, v in message.items() if v is not None}
    echoed.setdefault("role", "assistant")
    return Completion(message=echoed, content=text.strip(), tool_calls=calls)


def _arguments_text(arguments: Any) -> str:
    # The protocol sends a JSON string; a few servers send the object itself.
    if arguments is None:
        return "{}"
    return arguments if isinstance(arguments, str) else json.dumps(arguments)


def _unavailable(message: str) -> BackendError:
    return BackendError(message, code="llm_unavailable", field="llm_base_url",
                        expected="a reachable OpenAI-compatible API (ONTHEDOT_LLM_BASE_URL)")
