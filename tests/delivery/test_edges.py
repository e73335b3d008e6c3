"""The job's channels and the inbox at every edge: REST (problem+json), MCP (isError results)
and the CLI (one line, exit 2)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from onthedot.api.app import create_app
from onthedot.config import Settings
from onthedot.delivery.render import linked
from onthedot.domain.clock import FakeClock
from onthedot.domain.models import JobParams
from onthedot.runtime import Runtime, build_store
from onthedot.service import JobSpec
from onthedot.store.base import InboxQuery
from onthedot.watcher import Watcher
from onthedot.worker import Worker
from tests.api.conftest import START, assert_problem, job_body
from tests.api.live import LiveServer, live_server
from tests.cli.test_cli import assert_one_line_error, run_cli
from tests.delivery.conftest import SENDER
from tests.mcp.conftest import error, memory_session, ok
from tests.support.smtp import Mailbox
from tests.support.waiting import async_wait_until, wait_until
from tests.support.webhook import LOOPBACK_ALLOW

NOW = {"type": "immediate"}
INBOX = {"channel": "inbox"}
EMAIL = {"channel": "email", "to": "me@example.com"}


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(START)


@pytest.fixture
async def rt(tmp_path: Path, clock: FakeClock, mailbox: Mailbox) -> AsyncIterator[Runtime]:
    settings = Settings(database_url=f"sqlite:///{tmp_path}/edges.db",
                        egress_allow=LOOPBACK_ALLOW, smtp_url=mailbox.url, smtp_from=SENDER)
    runtime = await Runtime.open(settings, clock)
    yield runtime
    await runtime.close()


@pytest.fixture
async def no_smtp(tmp_path: Path, clock: FakeClock) -> AsyncIterator[Runtime]:
    runtime = await Runtime.open(Settings(database_url=f"sqlite:///{tmp_path}/plain.db"), clock)
    yield runtime
    await runtime.close()


@pytest.fixture
async def client(rt: Runtime) -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.ASGITransport(app=create_app(rt))
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as c:
        yield c


async def execute_due(rt: Runtime) -> None:
    """One watcher tick and one worker pass, in this process."""
    dispatcher = Watcher(rt.store, rt.queue, rt.clock, rt.settings, rt.metrics, "w1")
    worker = Worker(rt.store, rt.queue, rt.clock, rt.settings, rt.actions, rt.metrics)
    try:
        await dispatcher.refresh_shards()
        await dispatcher.run_once()
        await worker.run_once(100)
    finally:
        await worker.aclose()


# --- REST ------------------------------------------------------------------------------------


async def test_rest_notify_on_the_job_and_deliveries_on_its_runs(
        client: httpx.AsyncClient, rt: Runtime, mailbox: Mailbox) -> None:
    created = await client.post("/v1/jobs", json=job_body(
        job_params=NOW, notify=[INBOX, EMAIL]))
    assert created.status_code == 201, created.text
    job = created.json()
    assert job["notify"] == [INBOX, EMAIL]
    await execute_due(rt)

    runs = (await client.get(f"/v1/jobs/{job['job_id']}/runs")).json()["runs"]
    assert runs[0]["status"] == "SUCCEEDED"
    shown = {(d["channel"], d["target"], d["status"], d["attempts"], d["error"])
             for d in runs[0]["deliveries"]}
    assert shown == {("inbox", "inbox", "delivered", 1, None),
                     ("email", "me@example.com", "delivered", 1, None)}
    assert all(d["sent_at"] for d in runs[0]["deliveries"])
    assert all(d["next_attempt_at"] is None for d in runs[0]["deliveries"])  # none pending
    one = (await client.get(f"/v1/runs/{runs[0]['run_id']}")).json()
    assert one["deliveries"] == runs[0]["deliveries"]
    assert mailbox.count() == 1
    default = (await client.post("/v1/jobs", json=job_body())).json()
    assert default["notify"] == [INBOX]


@pytest.mark.parametrize(("notify", "code", "field"), [
    ([{"channel": "pager"}], "invalid_value", "notify[0].channel"),
    ([{"channel": "inbox", "beep": True}], "unknown_field", "notify[0].beep"),
    ([{"channel": "inbox", "to": "me@example.com"}], "unknown_field", "notify[0].to"),
    ([INBOX, {"channel": "email", "to": "not an address"}], "invalid_email", "notify[1].to"),
    ([INBOX, {"channel": "email", "to": "me@example.com\r\nBcc: x@y.z"}], "invalid_email",
     "notify[1].to"),
    ([{"channel": "email"}], "missing_field", "notify[0].to"),
    ([{"channel": "webhook", "url": "http://169.254.169.254/latest"}], "egress_refused",
     "notify[0].url"),
    ([{"channel": "webhook", "url": "http://localhost:8080/x"}], "egress_refused",
     "notify[0].url"),
    ([{"channel": "webhook", "url": "ftp://files.example.com/x"}], "invalid_value",
     "notify[0].url"),
    ([{"channel": "webhook", "url": "https://a.example.com", "format": "teams"}],
     "invalid_value", "notify[0].format"),
    ([INBOX, INBOX], "duplicate_channel", "notify[1]"),
    ([INBOX, *({"channel": "email", "to": f"u{i}@example.com"} for i in range(5))],
     "invalid_value", "notify"),
    ({"channel": "inbox"}, "invalid_value", "notify"),
])
async def test_rest_refuses_bad_channels_naming_the_entry(
        client: httpx.AsyncClient, notify: Any, code: str, field: str) -> None:
    response = await client.post("/v1/jobs", json=job_body(notify=notify))
    assert_problem(response, 422, code, field)
    listed = (await client.get("/v1/jobs")).json()["jobs"]
    assert listed == []  # nothing half-written


@pytest.mark.parametrize("url", ["http://[", "http://[::1", "http://a b/x",
                                 "http://hooks.example.com:99999/x"])
async def test_a_url_that_cannot_be_parsed_is_a_422_not_a_500(client: httpx.AsyncClient,
                                                             url: str) -> None:
    as_action = await client.post("/v1/jobs", json=job_body(
        action={"type": "webhook", "url": url}))
    assert_problem(as_action, 422, "invalid_value", "action.url")
    as_channel = await client.post("/v1/jobs", json=job_body(
        notify=[{"channel": "webhook", "url": url}]))
    assert_problem(as_channel, 422, "invalid_value", "notify[0].url")


async def test_email_on_a_server_without_smtp_names_the_setting(no_smtp: Runtime) -> None:
    transport = httpx.ASGITransport(app=create_app(no_smtp))
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
        response = await client.post("/v1/jobs", json=job_body(notify=[INBOX, EMAIL]))
    body = assert_problem(response, 422, "email_not_configured", "notify[1].to")
    assert "ONTHEDOT_SMTP_URL" in body["detail"]
    assert "ONTHEDOT_SMTP_URL" in body["expected"]


async def test_rest_patch_replaces_the_channels_and_other_changes_keep_them(
        client: httpx.AsyncClient) -> None:
    job = (await client.post("/v1/jobs", json=job_body(notify=[INBOX, EMAIL]))).json()
    path = f"/v1/jobs/{job['job_id']}"
    renamed = (await client.patch(path, json={"name": "renamed"})).json()
    assert renamed["notify"] == [INBOX, EMAIL]
    hook = {"channel": "webhook", "url": "https://hooks.example.com/x", "format": "slack"}
    changed = (await client.patch(path, json={"notify": [hook]})).json()
    assert changed["notify"] == [hook]
    assert (await client.get(path)).json()["notify"] == [hook]
    assert_problem(await client.patch(path, json={"notify": [{"channel": "email", "to": "@"}]}),
                   422, "invalid_email", "notify[0].to")
    silent = (await client.patch(path, json={"notify": []})).json()
    assert silent["notify"] == []


async def test_rest_inbox_unread_first_pages_and_marking_read(
        client: httpx.AsyncClient, rt: Runtime, clock: FakeClock) -> None:
    for i in range(3):
        await client.post("/v1/jobs", json=job_body(name=f"news {i}", job_params=NOW))
        await execute_due(rt)
        clock.advance(seconds=1)
    await rt.service.create_job("bob", JobSpec(action={"type": "message", "text": "bob's"},
                                               params=JobParams("immediate")))
    await execute_due(rt)

    first = (await client.get("/v1/inbox", params={"page_size": 2})).json()
    assert [i["title"] for i in first["items"]] == ["news 2", "news 1"]
    assert all(not i["read"] and i["read_at"] is None for i in first["items"])
    assert first["items"][0]["text"] == "summarize the news"
    rest = (await client.get("/v1/inbox", params={"page_token": first["next_page_token"]}))
    assert [i["title"] for i in rest.json()["items"]] == ["news 0"]
    assert rest.json()["next_page_token"] is None

    newest = first["items"][0]
    marked = await client.post(f"/v1/inbox/{newest['item_id']}:read")
    assert marked.status_code == 200, marked.text
    assert marked.json()["read"] is True
    listed = (await client.get("/v1/inbox")).json()["items"]
    assert [(i["title"], i["read"]) for i in listed] == [
        ("news 1", False), ("news 0", False), ("news 2", True)]
    unread = (await client.get("/v1/inbox", params={"unread": "true"})).json()["items"]
    assert [i["title"] for i in unread] == ["news 1", "news 0"]

    bobs = await rt.store.inbox_list(InboxQuery(user_id="bob", limit=10))
    assert_problem(await client.post(f"/v1/inbox/{bobs[0].item_id}:read"), 404, "not_found",
                   "item_id")
    assert_problem(await client.get("/v1/inbox", params={"page_token": "bogus"}), 422,
                   "invalid_page_token", "page_token")
    assert_problem(await client.get("/v1/inbox", params={"page_size": 0}), 422,
                   "invalid_value", "page_size")


# --- MCP -------------------------------------------------------------------------------------


async def test_mcp_notify_arguments_become_channels(rt: Runtime) -> None:
    async with memory_session(rt) as session:
        both = ok(await session.call_tool("create_task", {
            "task": "news", "when": "now", "notify_email": "me@example.com",
            "notify_webhook": "https://hooks.example.com/x",
            "notify_webhook_format": "slack"}))["task"]
        quiet = ok(await session.call_tool("create_task", {
            "task": "news", "when": "now", "notify_inbox": False}))["task"]
        plain = ok(await session.call_tool("create_task", {"task": "news", "when": "now"}))
        changed = ok(await session.call_tool("update_task", {
            "task_id": both["job_id"], "notify_email": "", "notify_inbox": False}))["task"]
        bad = error(await session.call_tool("create_task", {
            "task": "news", "when": "now", "notify_email": "me at example"}),
            "invalid_email", "notify_email")
        refused = error(await session.call_tool("update_task", {
            "task_id": both["job_id"], "notify_webhook": "http://169.254.169.254/"}),
            "egress_refused", "notify_webhook")
    assert both["notify"] == [INBOX, EMAIL, {"channel": "webhook",
                                             "url": "https://hooks.example.com/x",
                                             "format": "slack"}]
    assert quiet["notify"] == []
    assert plain["task"]["notify"] == [INBOX]
    assert changed["notify"] == [{"channel": "webhook", "url": "https://hooks.example.com/x",
                                  "format": "slack"}]
    assert "me at example" in bad["message"]
    assert refused["expected"]


async def test_mcp_email_without_smtp_is_a_correctable_error(no_smtp: Runtime) -> None:
    async with memory_session(no_smtp) as session:
        err = error(await session.call_tool("create_task", {
            "task": "news", "when": "now", "notify_email": "me@example.com"}),
            "email_not_configured", "notify_email")
    assert "ONTHEDOT_SMTP_URL" in err["message"]


async def test_mcp_shows_deliveries_and_the_inbox(rt: Runtime, mailbox: Mailbox) -> None:
    async with memory_session(rt) as session:
        task = ok(await session.call_tool("create_task", {
            "task": "總結財經新聞", "when": "now", "kind": "message",
            "notify_email": "me@example.com"}))["task"]
        await execute_due(rt)
        shown = ok(await session.call_tool("get_task", {"task_id": task["job_id"]}))
        inbox = ok(await session.call_tool("list_inbox", {}))
        item = inbox["items"][0]
        marked = ok(await session.call_tool("mark_inbox_read", {"item_id": item["item_id"]}))
        unread = ok(await session.call_tool("list_inbox", {"unread_only": True}))
        missing = error(await session.call_tool("mark_inbox_read", {"item_id": "nope"}),
                        "not_found", "item_id")
    deliveries = shown["recent_runs"][0]["deliveries"]
    assert {(d["channel"], d["status"]) for d in deliveries} == {
        ("inbox", "delivered"), ("email", "delivered")}
    assert (item["title"], item["text"], item["read"]) == ("總結財經新聞", "總結財經新聞", False)
    assert marked["item"]["read"] is True
    assert unread["items"] == []
    assert missing["message"]
    assert mailbox.count() == 1


# --- CLI -------------------------------------------------------------------------------------


@pytest.fixture
def served(tmp_path: Path) -> Iterator[LiveServer]:
    settings = Settings(database_url=f"sqlite:///{tmp_path}/cli.db", tick_seconds=0.2)
    with live_server(settings, roles=("watcher", "worker")) as live:
        yield live


def test_cli_notify_flags_and_the_inbox(capsys: pytest.CaptureFixture[str],
                                        served: LiveServer) -> None:
    url = ["--url", served.url]
    code, _out, err = run_cli(capsys, "jobs", "create", "--now", "--message", "hi",
                              "--notify-email", "me@example.com", *url)
    assert_one_line_error(code, err, "ONTHEDOT_SMTP_URL", "notify[1].to")
    code, _out, err = run_cli(capsys, "jobs", "create", "--now", "--message", "hi",
                              "--notify-slack", "http://10.0.0.1/hook", *url)
    assert_one_line_error(code, err, "egress_refused", "notify[1].url")

    code, out, err = run_cli(capsys, "jobs", "create", "--now", "--name", "早報",
                             "--message", "台股收高", "-q", *url)
    assert code == 0, err
    job_id = out.strip()
    code, out, _err = run_cli(capsys, "jobs", "create", "--now", "--message", "x", "--no-inbox",
                              "--notify-webhook", "https://hooks.example.com/a",
                              "--notify-slack", "https://hooks.example.com/b", *url)
    assert code == 0
    assert [c["channel"] for c in json.loads(out)["notify"]] == [
        "webhook", "webhook"]

    def delivered() -> bool:
        runs = httpx.get(f"{served.url}/v1/jobs/{job_id}/runs").json()["runs"]
        return bool(runs and runs[0]["deliveries"])

    wait_until(delivered, 15, "the inbox delivery")
    code, out, err = run_cli(capsys, "inbox", *url)
    assert code == 0, err
    lines = out.strip().splitlines()
    assert lines[0].split() == ["ITEM_ID", "NEW", "DELIVERED_AT", "TITLE", "TEXT"]
    assert len(lines) == 2
    item_id = lines[1].split()[0]
    assert "早報" in lines[1]
    assert "台股收高" in lines[1]

    code, out, err = run_cli(capsys, "inbox", "read", item_id, *url)
    assert code == 0, err
    assert "早報" in out
    assert "台股收高" in out
    code, out, _err = run_cli(capsys, "inbox", "--unread", "--json", *url)
    assert json.loads(out)["items"] == []
    code, _out, err = run_cli(capsys, "inbox", "read", "no-such-item", *url)
    assert_one_line_error(code, err, "404", "not_found")


def test_cli_webhook_secret_create(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path}/secrets.db"
    code, out, err = run_cli(capsys, "webhook-secret", "create", "--user", "alice",
                             "--database-url", db)
    assert code == 0, err
    secret = out.strip()
    assert secret.startswith("whsec_")
    assert len(secret) > 40
    assert "cannot be shown again" in err
    assert asyncio.run(_secrets(db, "alice")) == [secret]
    code, _out, err = run_cli(capsys, "webhook-secret", "create", "--user", "bad name!",
                              "--database-url", db)
    assert_one_line_error(code, err, "invalid user name")


async def _secrets(database_url: str, user: str) -> list[str]:
    store = build_store(Settings(database_url=database_url))
    try:
        return [s.secret for s in await store.webhook_secrets_recent(user, 5)]
    finally:
        await store.close()


async def test_delivery_survives_a_real_server_round_trip(served: LiveServer) -> None:
    """The default channel of a job created over HTTP, run by the server's own worker."""
    async with httpx.AsyncClient(base_url=served.url) as http:
        job = (await http.post("/v1/jobs", json=job_body(job_params=NOW))).json()

        async def item() -> list[Any]:
            return list((await http.get("/v1/inbox")).json()["items"])

        [got] = await async_wait_until(item, 15, "an inbox item")
    assert got["job_id"] == job["job_id"]


@pytest.mark.parametrize(("text", "html"), [
    ("see https://x.example/a.", 'see <a href="https://x.example/a">https://x.example/a</a>.'),
    ("(https://en.wikipedia.org/wiki/Tea_(drink))",
     '(<a href="https://en.wikipedia.org/wiki/Tea_(drink)">'
     'https://en.wikipedia.org/wiki/Tea_(drink)</a>)'),
    ("新聞：https://news.example.tw/a，下一則",
     '新聞：<a href="https://news.example.tw/a">https://news.example.tw/a</a>，下一則'),
    ("'https://q.example/?a=1&b=2' & <i>",
     '&#x27;<a href="https://q.example/?a=1&amp;b=2">https://q.example/?a=1&amp;b=2</a>'
     '&#x27; &amp; &lt;i&gt;'),
    ('https://q.example/"onmouseover="x', '<a href="https://q.example/">https://q.example/</a>'
     '&quot;onmouseover=&quot;x'),
    ("http:// and javascript:alert(1) and ftp://f.example",
     "http:// and javascript:alert(1) and ftp://f.example"),
])
def test_the_html_part_links_http_urls_and_escapes_the_rest(text: str, html: str) -> None:
    assert linked(text) == html
