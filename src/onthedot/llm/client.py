"""An OpenAI-compatible chat-completions client that lets a model call tools.

Only the wire protocol lives here (``POST {base_url}/chat/completions`` with ``tools``; a reply
either carries ``tool_calls`` or is the final answer); which tools exist and what they do is the
caller's business. Plain httpx: any server that speaks the protocol works (OpenAI, Ollama,
vLLM, llama.cpp, LiteLLM ...). The caller may hand in its own HTTP client (the actions give the
egress guard's); without one a plain client is used for the exchange.

The loop::

    messages --complete--> tool_calls? --yes--> execute each, append results --> complete again
                                 |no                  (at most MAX_TOOL_ROUNDS rounds, then one
                                 v                     last call with tool_choice="none")
                           final text
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import httpx

from onthedot.domain.errors import BackendError, OnTheDotError

LLM_TIMEOUT_SECONDS = 60.0
MAX_TOOL_ROUNDS = 5  # model turns that may call tools before it must answer in words
MAX_ANSWER_BYTES = 4 * 1024 * 1024  # of one completion: far more than any answer in words
ERROR_PREVIEW_CHARS = 200  # of a non-200 answer, kept in the error message

# (tool name, raw JSON arguments) -> the tool message content
ExecuteTool = Callable[[str, str], Awaitable[str]]


class ModelError(BackendError):
    """The model did not give a chat completion. ``status`` is the HTTP status it answered
    (None: no answer at all: refused connection, timeout, or a 200 that was not a completion),
    so a caller can tell a refused request (4xx) from a model that is down (5xx, 429)."""

    def __init__(self, message: str, *, status: int | None, code: str = "llm_unavailable",
                 expected: str = "a reachable OpenAI-compatible API (ONTHEDOT_LLM_BASE_URL)"
                 ) -> None:
        super().__init__(message, code=code, field="llm_base_url", expected=expected)
        self.status = status


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


@dataclass(frozen=True)
class Sampling:
    """Request fields passed through as given; None leaves them to the server's default."""

    max_tokens: int | None = None
    temperature: float | None = None

    def fields(self) -> dict[str, Any]:
        return {k: v for k, v in (("max_tokens", self.max_tokens),
                                  ("temperature", self.temperature)) if v is not None}


class ChatModel:
    def __init__(self, base_url: str, model: str, api_key: str | None = None,
                 timeout_seconds: float = LLM_TIMEOUT_SECONDS) -> None:
        self.url = base_url.rstrip("/") + "/chat/completions"
        self.model = model
        self.headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self.timeout_seconds = timeout_seconds
        # Errors end up in run records, chat replies and tool results that users and models
        # read: they never name the endpoint or carry its credentials (not even echoed back
        # by the server in an error body).
        self._hidden = _hidden_parts(base_url, api_key)

    async def complete(self, http: httpx.AsyncClient, messages: Sequence[dict[str, Any]],
                       tools: Sequence[dict[str, Any]], *, tool_choice: str = "auto",
                       sampling: Sampling | None = None,
                       headers: Mapping[str, str] | None = None) -> Completion:
        """One request. ``headers`` are added to the request (an ``Idempotency-Key``, say).
        Raises ModelError."""
        body: dict[str, Any] = {"model": self.model, "messages": list(messages)}
        if tools:
            body |= {"tools": list(tools), "tool_choice": tool_choice}
        if sampling is not None:
            body |= sampling.fields()
        try:
            async with http.stream("POST", self.url, json=body,
                                   headers={**(headers or {}), **self.headers},
                                   timeout=self.timeout_seconds) as response:
                if response.status_code != 200:
                    detail = await _read(response, ERROR_PREVIEW_CHARS * 4)
                    raise _refused(response.status_code, detail, self._hidden)
                raw = await _read(response, MAX_ANSWER_BYTES)
        except httpx.HTTPError as exc:
            raise ModelError(f"the model ({MODEL_SETTING}) did not answer: "
                             f"{type(exc).__name__}", status=None) from exc
        except OnTheDotError as exc:  # the egress guard: e.g. the model's name did not resolve
            if isinstance(exc, ModelError):
                raise
            raise ModelError(f"the model ({MODEL_SETTING}) could not be reached: "
                             f"{scrub(exc.message, self._hidden)}", status=None) from exc
        try:
            return _completion(json.loads(raw))
        except (ValueError, LookupError, TypeError) as exc:
            raise ModelError(f"the model ({MODEL_SETTING}) sent an answer that is not a chat "
                             "completion", status=None, code="llm_bad_answer",
                             expected="an OpenAI-compatible chat-completions API") from exc


async def run_with_tools(model: ChatModel, messages: list[dict[str, Any]],
                         tools: Sequence[dict[str, Any]], execute: ExecuteTool, *,
                         http: httpx.AsyncClient | None = None,
                         sampling: Sampling | None = None,
                         idempotency_key: str | None = None,
                         max_rounds: int = MAX_TOOL_ROUNDS) -> str:
    """Let the model call tools until it answers in words; returns that answer. ``messages``
    grows by every assistant and tool message of the exchange. Raises ModelError.

    With ``idempotency_key``, request n of the exchange carries ``Idempotency-Key: <key>-<n>``:
    a retried exchange sends the same keys in the same order, while the rounds of one exchange
    never share a key (a gateway that replays answers by key would otherwise answer every round
    with the first round's tool call)."""
    def headers(n: int) -> dict[str, str] | None:
        return None if idempotency_key is None else {"Idempotency-Key": f"{idempotency_key}-{n}"}

    async with _client(http) as client:
        for n in range(max_rounds):
            completion = await model.complete(client, messages, tools, sampling=sampling,
                                              headers=headers(n))
            messages.append(completion.message)
            if not completion.tool_calls:
                return completion.content
            for call in completion.tool_calls:
                content = await execute(call.name, call.arguments)
                messages.append({"role": "tool", "tool_call_id": call.id, "content": content})
        completion = await model.complete(client, messages, tools, tool_choice="none",
                                          sampling=sampling, headers=headers(max_rounds))
        messages.append(completion.message)
        return completion.content


@asynccontextmanager
async def _client(given: httpx.AsyncClient | None) -> AsyncIterator[httpx.AsyncClient]:
    if given is not None:  # the caller's: it closes it
        yield given
        return
    async with httpx.AsyncClient() as client:
        yield client


async def _read(response: httpx.Response, max_bytes: int) -> bytes:
    """At most ``max_bytes`` of the answer; past that it is no chat completion we can use."""
    data = bytearray()
    async for chunk in response.aiter_bytes():
        data += chunk
        if len(data) > max_bytes:
            break
    return bytes(data[:max_bytes + 1])


def _refused(status: int, detail: bytes, hidden: Sequence[str]) -> ModelError:
    text = scrub(" ".join(detail.decode("utf-8", "replace").split()), hidden)
    text = text[:ERROR_PREVIEW_CHARS]
    return ModelError(f"the model ({MODEL_SETTING}) answered HTTP {status}"
                      + (f": {text}" if text else ""), status=status)


MODEL_SETTING = "ONTHEDOT_LLM_BASE_URL"
HIDDEN = "***"


def _hidden_parts(base_url: str, api_key: str | None) -> tuple[str, ...]:
    """What an error must not show: the key, the URL and each of its parts that could be a
    credential or locate the endpoint; longest first, so a part inside another goes with it."""
    parts = urlsplit(base_url)
    found = {api_key, base_url, base_url.rstrip("/"), parts.netloc, parts.hostname,
             parts.username, parts.password, parts.query}
    return tuple(sorted((p for p in found if p and len(p) >= MIN_HIDDEN_CHARS),
                        key=len, reverse=True))


MIN_HIDDEN_CHARS = 4  # a shorter fragment (a port, "v1") would blank out ordinary words


def scrub(text: str, hidden: Sequence[str]) -> str:
    for part in hidden:
        text = text.replace(part, HIDDEN)
    return text


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
