"""Secret webhook headers are stored and sent but never shown (REST, MCP, chat), and a change
that sends the hidden value back keeps the secret. Model errors never show the model's URL or
key."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from onthedot.config import Settings
from onthedot.domain.errors import ActionError
from onthedot.llm import ChatModel, ModelError
from onthedot.runtime import Runtime
from tests.actions.conftest import closed_port
from tests.actions.servers import ScriptedServer, answer
from tests.api.conftest import assert_problem, job_body
from tests.api.test_quotas import api
from tests.api.test_token_scopes import mcp_call, mcp_client

SECRETS = {"Authorization": "Bearer hook-hush", "X-Api-Key": "key-hush",
           "X-Service-Token": "token-hush", "Cookie": "session=cookie-hush",
           "X-Signature": "listed-hush"}
HOOK = {"type": "webhook", "url": "http://127.0.0.1:9/hook",
        "headers": {**SECRETS, "X-Lang": "zh-TW"}, "secret_headers": ["x-signature"]}


def assert_hidden(action: dict[str, Any]) -> None:
    assert action["headers"] == {**dict.fromkeys(SECRETS, "***"), "X-Lang": "zh-TW"}
    assert "hush" not in json.dumps(action)


async def test_secret_headers_are_stored_but_never_shown(client: httpx.AsyncClient,
                                                         rt: Runtime) -> None:
    created = await client.post("/v1/jobs", json=job_body(action=HOOK))
    assert created.status_code == 201, created.text
    job_id = created.json()["job_id"]

    assert_hidden(created.json()["action"])
    assert_hidden((await client.get(f"/v1/jobs/{job_id}")).json()["action"])
    assert_hidden((await client.get("/v1/jobs")).json()["jobs"][0]["action"])
    stored = await rt.store.job_get_any(job_id)
    assert stored is not None
    assert stored.action["headers"] == HOOK["headers"]  # what the worker sends
    async with mcp_client(rt) as mcp:
        got = await mcp_call(mcp, {}, "get_task", {"task_id": job_id})
    assert got["isError"] is False
    assert "hush" not in json.dumps(got)


async def test_sending_the_hidden_value_back_keeps_the_secret(client: httpx.AsyncClient,
                                                              rt: Runtime) -> None:
    job_id = (await client.post("/v1/jobs", json=job_body(action=HOOK))).json()["job_id"]
    shown = (await client.get(f"/v1/jobs/{job_id}")).json()["action"]

    changed = {**shown, "url": "http://127.0.0.1:9/other",
               "headers": {**shown["headers"], "x-api-key": "***", "X-Lang": "en"}}
    patched = await client.patch(f"/v1/jobs/{job_id}", json={"action": changed})

    assert patched.status_code == 200, patched.text
    stored = await rt.store.job_get_any(job_id)
    assert stored is not None
    assert stored.action["url"] == "http://127.0.0.1:9/other"
    assert stored.action["headers"]["x-api-key"] == "key-hush"  # kept, under its new case
    assert stored.action["headers"]["Authorization"] == "Bearer hook-hush"
    assert stored.action["headers"]["X-Lang"] == "en"
    new_secret = {**changed, "headers": {**changed["headers"], "Authorization": "Bearer new"}}
    await client.patch(f"/v1/jobs/{job_id}", json={"action": new_secret})
    stored = await rt.store.job_get_any(job_id)
    assert stored is not None
    assert stored.action["headers"]["Authorization"] == "Bearer new"


async def test_a_hidden_value_without_a_stored_secret_is_refused(client: httpx.AsyncClient
                                                                 ) -> None:
    copied = {**HOOK, "headers": {"Authorization": "***"}}
    assert_problem(await client.post("/v1/jobs", json=job_body(action=copied)), 422,
                   "invalid_value", "action.headers.Authorization")
    job_id = (await client.post("/v1/jobs", json=job_body(action=HOOK))).json()["job_id"]
    unknown = {**HOOK, "headers": {"X-Other-Key": "***"}}
    assert_problem(await client.patch(f"/v1/jobs/{job_id}", json={"action": unknown}), 422,
                   "invalid_value", "action.headers.X-Other-Key")
    bad_list = {**HOOK, "secret_headers": "X-Signature"}
    assert_problem(await client.post("/v1/jobs", json=job_body(action=bad_list)), 422,
                   "invalid_value", "action.secret_headers")


# --- the model's URL and key ------------------------------------------------------------------
KEY = "sk-very-secret-key"


@pytest.fixture
def failing_model() -> Iterator[ScriptedServer]:
    """A chat-completions server that refuses, echoing what it was given (as some do)."""
    server = ScriptedServer({}).start()
    echo = json.dumps({"error": {"message": f"bad key {KEY} for http://admin:pw123@127.0.0.1:"
                                            f"{server.port}/v1"}}).encode()
    server.routes["/v1/chat/completions"] = answer(401, echo, "application/json")
    yield server
    server.stop()


async def model_error(base_url: str) -> ModelError:
    model = ChatModel(base_url, "m", KEY)
    async with httpx.AsyncClient() as http:
        with pytest.raises(ModelError) as raised:
            await model.complete(http, [{"role": "user", "content": "hi"}], ())
    return raised.value


async def test_a_refusing_model_error_shows_neither_url_nor_key(
        failing_model: ScriptedServer) -> None:
    base = f"http://admin:pw123@127.0.0.1:{failing_model.port}/v1"

    error = await model_error(base)

    assert error.status == 401
    assert error.message.startswith("the model (ONTHEDOT_LLM_BASE_URL) answered HTTP 401")
    assert "bad key *** for" in error.message  # the server's own words stay, scrubbed
    for leak in (KEY, "pw123", "admin:", f"127.0.0.1:{failing_model.port}"):
        assert leak not in error.message
        assert leak not in json.dumps(ActionError(error.message).to_dict())


async def test_an_unreachable_model_error_shows_neither_url_nor_key() -> None:
    error = await model_error(f"http://admin:pw123@127.0.0.1:{closed_port()}/v1")

    assert error.message == "the model (ONTHEDOT_LLM_BASE_URL) did not answer: ConnectError"


async def test_chat_with_a_failing_model_shows_neither_url_nor_key(
        failing_model: ScriptedServer, tmp_path: Path) -> None:
    settings = Settings(database_url=f"sqlite:///{tmp_path}/chat.db",
                        llm_base_url=f"http://admin:pw123@127.0.0.1:{failing_model.port}/v1",
                        llm_api_key=KEY)
    for base in (settings, settings.model_copy(
            update={"llm_base_url": f"http://admin:pw123@127.0.0.1:{closed_port()}/v1"})):
        async with api(base) as (_rt, client):
            answer = await client.post("/v1/chat", json={"message": "remind me to stretch "
                                                                    "every day at 9am"})

        assert answer.status_code >= 400
        for leak in (KEY, "pw123", "admin:"):
            assert leak not in answer.text
        assert "127.0.0.1:" not in answer.text
