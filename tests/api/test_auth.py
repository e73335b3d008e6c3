"""Identity: bearer tokens, the single local user on loopback, user isolation."""

from __future__ import annotations

import httpx
import pytest

from onthedot.api.auth import (
    LOCAL_USER,
    check_bind_allowed,
    hash_token,
    is_loopback,
    new_token,
    resolve_user,
)
from onthedot.config import Settings
from onthedot.domain.errors import AuthError, ConfigError
from onthedot.runtime import Runtime
from tests.api.conftest import add_token, assert_problem, job_body


async def test_without_tokens_on_loopback_everyone_is_local(client: httpx.AsyncClient,
                                                            rt: Runtime) -> None:
    job_id = (await client.post("/v1/jobs", json=job_body())).json()["job_id"]
    assert (await rt.store.job_get(LOCAL_USER, job_id)) is not None


async def test_without_tokens_a_rebound_host_or_foreign_origin_is_refused(
        client: httpx.AsyncClient) -> None:
    """A web page whose DNS name was rebound to 127.0.0.1 must not act as the local user."""
    assert_problem(await client.get("http://evil.example/v1/jobs"), 403, "untrusted_origin",
                   "Host")
    assert_problem(await client.get("/v1/jobs", headers={"Origin": "http://evil.example"}),
                   403, "untrusted_origin")
    ok = await client.get("/v1/jobs", headers={"Origin": "http://localhost:3000"})
    assert ok.status_code == 200


async def test_once_a_token_exists_a_token_is_required(client: httpx.AsyncClient,
                                                       rt: Runtime) -> None:
    alice = await add_token(rt, "alice", "secret-a")
    assert (await client.get("/v1/jobs", headers=alice)).status_code == 200
    response = await client.get("/v1/jobs")
    assert_problem(response, 401, "missing_token", "Authorization")
    assert response.headers["www-authenticate"].startswith("Bearer")
    assert_problem(await client.get("/v1/jobs", headers={"Authorization": "Bearer nope"}), 401,
                   "invalid_token")
    assert_problem(await client.get("/v1/jobs", headers={"Authorization": "Basic YTpi"}), 401,
                   "unauthorized")
    assert_problem(await client.post("/v1/jobs", json=job_body(),
                                     headers={"Authorization": "Bearer"}), 401, "unauthorized")


async def test_a_token_that_does_not_exist_is_refused_even_in_local_mode(
        client: httpx.AsyncClient) -> None:
    assert_problem(await client.get("/v1/jobs", headers={"Authorization": "Bearer x"}), 401,
                   "invalid_token")


async def test_users_never_see_each_others_jobs(client: httpx.AsyncClient, rt: Runtime) -> None:
    alice = await add_token(rt, "alice", "secret-a")
    bob = await add_token(rt, "bob", "secret-b")
    job_id = (await client.post("/v1/jobs", json=job_body(), headers=alice)).json()["job_id"]
    run_id = (await client.post(f"/v1/jobs/{job_id}:run", headers=alice)).json()["run_id"]
    await client.post("/v1/jobs", json=job_body(name="bob's"), headers=bob)

    for method, path in [("GET", f"/v1/jobs/{job_id}"), ("PATCH", f"/v1/jobs/{job_id}"),
                         ("DELETE", f"/v1/jobs/{job_id}"), ("POST", f"/v1/jobs/{job_id}:pause"),
                         ("POST", f"/v1/jobs/{job_id}:resume"),
                         ("POST", f"/v1/jobs/{job_id}:run"),
                         ("GET", f"/v1/jobs/{job_id}/runs"), ("GET", f"/v1/runs/{run_id}"),
                         ("POST", f"/v1/dead-letters/{run_id}:redrive")]:
        kwargs = {"json": {"name": "mine now"}} if method == "PATCH" else {}
        response = await client.request(method, path, headers=bob, **kwargs)
        assert_problem(response, 404, "not_found")

    bob_jobs = (await client.get("/v1/jobs?page_size=100", headers=bob)).json()["jobs"]
    assert [j["name"] for j in bob_jobs] == ["bob's"]
    alice_jobs = (await client.get("/v1/jobs", headers=alice)).json()["jobs"]
    assert [j["job_id"] for j in alice_jobs] == [job_id]
    assert (await client.get(f"/v1/jobs/{job_id}", headers=alice)).json()["name"] == "news"


async def test_idempotency_keys_are_per_user(client: httpx.AsyncClient, rt: Runtime) -> None:
    alice = await add_token(rt, "alice", "secret-a")
    bob = await add_token(rt, "bob", "secret-b")
    a = await client.post("/v1/jobs", json=job_body(), headers={**alice, "Idempotency-Key": "k"})
    b = await client.post("/v1/jobs", json=job_body(name="b"),
                          headers={**bob, "Idempotency-Key": "k"})
    assert (a.status_code, b.status_code) == (201, 201)
    assert a.json()["job_id"] != b.json()["job_id"]


async def test_resolve_user(rt: Runtime) -> None:
    token = new_token()
    assert token.startswith("otd_")
    assert len(token) > 40
    assert await resolve_user(rt.store, rt.settings, None) == LOCAL_USER
    await rt.store.token_add(hash_token(token), "carol", rt.clock.now())
    assert await resolve_user(rt.store, rt.settings, f"Bearer {token}") == "carol"
    assert await resolve_user(rt.store, rt.settings, f"bearer  {token} ") == "carol"
    with pytest.raises(AuthError):
        await resolve_user(rt.store, rt.settings, None)


async def test_no_local_user_off_loopback(rt: Runtime) -> None:
    public = Settings(database_url=rt.settings.database_url, host="0.0.0.0")
    with pytest.raises(AuthError):
        await resolve_user(rt.store, public, None)


@pytest.mark.parametrize(("host", "loopback"), [
    ("127.0.0.1", True), ("127.0.0.2", True), ("localhost", True), ("::1", True),
    ("[::1]", True), ("0.0.0.0", False), ("::", False), ("192.168.1.10", False),
    ("example.com", False),
])
def test_is_loopback(host: str, loopback: bool) -> None:
    assert is_loopback(host) is loopback


def test_bind_check() -> None:
    check_bind_allowed("127.0.0.1", tokens_exist=False)
    check_bind_allowed("0.0.0.0", tokens_exist=True)
    with pytest.raises(ConfigError, match="token create"):
        check_bind_allowed("0.0.0.0", tokens_exist=False)
