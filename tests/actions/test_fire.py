"""At fire time: destinations only DNS shows to be refused fail the run at once, redirects are
checked hop by hop, the allowlist admits, and the connection goes to the address checked."""

from __future__ import annotations

import ssl

import httpx
import pytest
import trustme

from onthedot.actions.egress import MAX_REDIRECTS, EgressGuard, guarded_client
from onthedot.domain.models import JobRun, RunStatus
from tests.actions.conftest import LITERAL_REFUSALS, FakeDns, RigFactory, Servers
from tests.actions.servers import ScriptedServer, answer, redirect

OK = {"/hook": answer(200, b'{"ok": true}', "application/json")}


def _assert_refused_at_once(run: JobRun, reason: str) -> None:
    assert run.status is RunStatus.FAILED, run
    assert run.attempt == 1, "a refused destination must not be retried"
    assert run.dead_lettered
    assert f"({reason} address)" in (run.error or ""), run.error


async def test_allowlist_removed_after_creation_fails_the_run_without_retry(
        make_rig: RigFactory, serve: Servers) -> None:
    server = serve(OK)
    rig = await make_rig("127.0.0.1", worker_allow="")
    job_id = await rig.create(server.url("/hook"), max_attempts=3)
    _assert_refused_at_once(await rig.fire(job_id), "loopback")
    assert server.hits == [], "the refused server was called"
    letters = await rig.rt.service.list_dead_letters("alice")
    assert [r.job_id for r in letters.items] == [job_id]
    rig.clock.advance(3600)
    assert await rig.worker.run_once() == 0, "a refused run came back for another attempt"


async def test_a_name_resolving_to_loopback_is_refused_and_allowed_only_by_the_allowlist(
        make_rig: RigFactory, serve: Servers) -> None:
    server = serve(OK)
    dns = FakeDns({"hooks.example.test": ["127.0.0.1"]})
    url = server.url("/hook", host="hooks.example.test")

    refusing = await make_rig(http=guarded_client(EgressGuard([], resolve=dns)))
    job_id = await refusing.create(url)  # nothing in the URL shows where it leads
    _assert_refused_at_once(await refusing.fire(job_id), "loopback")
    assert server.hits == []

    allowing = await make_rig(http=guarded_client(EgressGuard(["127.0.0.1"], resolve=dns)))
    run = await allowing.fire(await allowing.create(url))
    assert run.status is RunStatus.SUCCEEDED, run.error
    assert run.output == {"status_code": 200, "body": {"ok": True}}
    assert [h.host for h in server.hits] == [f"hooks.example.test:{server.port}"]


async def test_the_connection_goes_to_the_checked_address(make_rig: RigFactory,
                                                          serve: Servers) -> None:
    """One lookup per connection, made by the guard: ``.test`` names do not resolve on this
    machine, so a second lookup by the HTTP stack would fail the run."""
    server = serve(OK, bind="127.0.0.2")
    dns = FakeDns({"pinned.example.test": ["127.0.0.2"]})
    rig = await make_rig(http=guarded_client(EgressGuard(["127.0.0.2"], resolve=dns)))
    run = await rig.fire(await rig.create(server.url("/hook", host="pinned.example.test")))
    assert run.status is RunStatus.SUCCEEDED, run.error
    assert dns.asked == ["pinned.example.test"]
    assert [h.host for h in server.hits] == [f"pinned.example.test:{server.port}"]


@pytest.fixture(scope="module")
def ca() -> trustme.CA:
    return trustme.CA()


@pytest.fixture
def tls_server(ca: trustme.CA, serve: Servers) -> ScriptedServer:
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("hooks.example.test").configure_cert(context)
    return serve(OK, bind="127.0.0.2", tls=context)


async def test_tls_checks_the_original_name_on_the_pinned_connection(
        make_rig: RigFactory, ca: trustme.CA, tls_server: ScriptedServer) -> None:
    server = tls_server
    trusted = ssl.create_default_context()
    ca.configure_trust(trusted)
    dns = FakeDns({"hooks.example.test": ["127.0.0.2"], "other.example.test": ["127.0.0.2"]})
    rig = await make_rig(http=guarded_client(EgressGuard(["127.0.0.2"], resolve=dns),
                                             verify=trusted))
    run = await rig.fire(await rig.create(server.url("/hook", host="hooks.example.test")))
    assert run.status is RunStatus.SUCCEEDED, run.error
    assert server.server_names == ["hooks.example.test"]

    # The same address under a name the certificate does not carry: verification fails.
    run = await rig.fire(await rig.create(server.url("/hook", host="other.example.test"),
                                          max_attempts=1))
    assert run.status is RunStatus.FAILED
    assert "CERTIFICATE_VERIFY_FAILED" in (run.error or ""), run.error
    assert [h.path for h in server.hits] == ["/hook"]


async def test_a_redirect_to_a_refused_address_is_refused(make_rig: RigFactory,
                                                          serve: Servers) -> None:
    server = serve({"/hook": answer(200)})  # the target exists and would answer
    server.routes["/start"] = redirect(server.url("/hook"))  # http://127.0.0.1:port/hook
    # The first hop is admitted by name; the address it redirects to is not on the allowlist.
    rig = await make_rig("localhost")
    job_id = await rig.create(server.url("/start", host="localhost"))
    _assert_refused_at_once(await rig.fire(job_id), "loopback")
    assert server.paths() == ["/start"]


async def test_a_redirect_to_any_spelling_of_a_refused_address_is_refused(
        make_rig: RigFactory, serve: Servers) -> None:
    server = serve({"/landing": answer(200)})
    # The first hop is admitted by name only: no address, no spelling of one, is allowlisted.
    dns = FakeDns({"start.example.test": ["127.0.0.1"]})
    rig = await make_rig(http=guarded_client(EgressGuard(["start.example.test"], resolve=dns)))
    extra = ["http://2852039166/", "http://0x7f.0.0.1/", "http://[::ffff:7f00:1]/"]
    for i, url in enumerate([u for u, _ in LITERAL_REFUSALS] + extra):
        # Aimed at our own server where the spelling means 127.0.0.1: a slip would land there.
        target = httpx.URL(url).copy_with(port=server.port, path="/landing")
        server.routes[f"/start{i}"] = redirect(str(target), 307)
        run = await rig.fire(await rig.create(server.url(f"/start{i}", host="start.example.test"),
                                              max_attempts=3))
        assert run.status is RunStatus.FAILED, (url, run.error)
        assert run.attempt == 1, url
        assert "refused to connect" in (run.error or ""), (url, run.error)
    assert "/landing" not in server.paths()
    assert len(server.paths()) == len(LITERAL_REFUSALS) + len(extra)


async def test_redirects_within_the_allowlist_are_followed_up_to_a_limit(
        make_rig: RigFactory, serve: Servers) -> None:
    server = serve({"/hook": answer(200, b"landed")})
    server.routes["/start"] = redirect(server.url("/hook", host="localhost"), 308)
    server.routes["/loop"] = redirect("/loop")
    rig = await make_rig("localhost,127.0.0.1")
    run = await rig.fire(await rig.create(server.url("/start")))
    assert run.status is RunStatus.SUCCEEDED, run.error
    assert run.output == {"status_code": 200, "body": "landed"}
    assert server.paths() == ["/start", "/hook"]

    run = await rig.fire(await rig.create(server.url("/loop"), max_attempts=1))
    assert run.status is RunStatus.FAILED
    assert "TooManyRedirects" in (run.error or "")
    assert server.paths().count("/loop") == MAX_REDIRECTS + 1


async def test_the_allowlist_admits_a_cidr(make_rig: RigFactory, serve: Servers) -> None:
    server = serve(OK, bind="127.0.0.2")
    rig = await make_rig("127.0.0.0/30")
    run = await rig.fire(await rig.create(server.url("/hook")))
    assert run.status is RunStatus.SUCCEEDED, run.error
    assert server.paths() == ["/hook"]


async def test_a_cookie_one_run_receives_is_not_sent_with_another(make_rig: RigFactory,
                                                                 serve: Servers) -> None:
    """One client serves every user's runs; a cookie must not carry one user's session to
    another user's request."""
    server = serve({"/login": answer(200, headers={"Set-Cookie": "sid=secret; Path=/"}),
                    "/hook": answer(200)})
    rig = await make_rig("127.0.0.1")
    for path in ("/login", "/hook"):
        run = await rig.fire(await rig.create(server.url(path)))
        assert run.status is RunStatus.SUCCEEDED, run.error
    assert [(h.path, h.cookie) for h in server.hits] == [("/login", None), ("/hook", None)]
