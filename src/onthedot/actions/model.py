"""The operator's model, as the actions reach it (``prompt``, the model-written news digest).

The model's API (``ONTHEDOT_LLM_BASE_URL``) is operator configuration, like the SMTP server: it
is trusted and reached even on loopback or a private network (a local Ollama or vLLM is the
common case). It is trusted through a guard of its own: that guard admits exactly the model's
host and port, and its client is used for nothing but the model's URL, so no user's webhook or
feed URL can reach the model's host because it is trusted. The client follows no redirects (a
chat-completions API does not send any), so the model cannot point the call anywhere else.

How a failed request counts for the run (the worker retries what is retryable)::

    no answer, timeout, 5xx, 429, a 200 that is no completion -> ActionError, retried
    any other 4xx (bad key, unknown model, prompt too long)    -> ActionError, not retried
"""

from __future__ import annotations

from urllib.parse import urlsplit

import httpx

from onthedot.actions.egress import EgressGuard, Resolver, guarded_client
from onthedot.config import Settings
from onthedot.domain.errors import ActionError, ConfigError
from onthedot.llm import LLM_TIMEOUT_SECONDS, ChatModel, ModelError
from onthedot.nl.parts import Language

BASE_URL_SETTING = "ONTHEDOT_LLM_BASE_URL"
TOO_MANY_REQUESTS = 429
# How the instructions name the language the model must answer in.
LANGUAGE_NAMES: dict[Language, str] = {
    "en": "English",
    "zh-Hant": "Traditional Chinese (繁體中文)",
    "zh-Hans": "Simplified Chinese (简体中文)",
}


class ModelEndpoint:
    """Where the model is, which model to ask by default, and the guard that reaches it."""

    def __init__(self, base_url: str, default_model: str, api_key: str | None,
                 guard: EgressGuard) -> None:
        self.base_url = base_url
        self.default_model = default_model
        self.api_key = api_key
        self.guard = guard

    @classmethod
    def from_settings(cls, settings: Settings,
                      resolve: Resolver | None = None) -> ModelEndpoint | None:
        """None when no model is configured. Raises ConfigError for a base URL that is not an
        http(s) URL with a host (the process refuses to start)."""
        if not settings.llm_base_url:
            return None
        endpoint = model_endpoint(settings.llm_base_url)
        guard = EgressGuard.from_settings(settings, resolve, trusted=[endpoint])
        return cls(settings.llm_base_url, settings.llm_model, settings.llm_api_key, guard)

    def model(self, name: str | None = None,
              timeout_seconds: float = LLM_TIMEOUT_SECONDS) -> ChatModel:
        return ChatModel(self.base_url, name or self.default_model, self.api_key,
                         timeout_seconds=timeout_seconds)

    def client(self) -> httpx.AsyncClient:
        """A client for one exchange with the model; the caller closes it (``async with``)."""
        return guarded_client(self.guard, follow_redirects=False)


def model_endpoint(base_url: str) -> tuple[str, int]:
    """The (host, port) that requests to ``base_url`` connect to, the host as the HTTP client
    sends it (IDNA-encoded, IPv6 without brackets)."""
    try:
        parts = urlsplit(base_url)
        port = parts.port
        host = httpx.URL(base_url).raw_host.decode("ascii")
    except (ValueError, httpx.InvalidURL):  # UnicodeDecodeError is a ValueError
        host = ""
    if not host or parts.scheme not in ("http", "https"):
        # The value is not repeated: it may hold credentials (user:password@, ?key=).
        raise ConfigError(f"{BASE_URL_SETTING} is not an http(s) URL with a host",
                          field="llm_base_url",
                          expected="the base URL of an OpenAI-compatible API, e.g. "
                                   "http://127.0.0.1:11434/v1 or https://api.openai.com/v1")
    return host, port or (443 if parts.scheme == "https" else 80)


def action_error(exc: ModelError) -> ActionError:
    """What a failed model request means for the run (see the module docstring)."""
    status = exc.status
    retryable = status is None or status == TOO_MANY_REQUESTS or status >= 500
    return ActionError(exc.message, code=exc.code, field=exc.field, expected=exc.expected,
                       retryable=retryable)
