"""POST /v1/chat without a model, asked to manage tasks rather than create one: list, pause,
resume, delete (confirmed), run now, change the time (confirmed), show the last result.

A real runtime on a fresh SQLite file and a fake clock; runs are executed by a real watcher
and worker pass in this process when a test needs a result."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest

from onthedot.api.app import create_app
from onthedot.chat.confirm import CONFIRM_TTL_SECONDS
from onthedot.config import Settings
from onthedot.domain.clock import FakeClock
from onthedot.domain.errors import ConflictError
from onthedot.runtime import Runtime
from onthedot.service import JobPatch
from onthedot.watcher import RecurringWatcher, Watcher
from onthedot.worker import Worker
from tests.api.conftest import add_token, assert_problem
from tests.chat.conftest import START, TZ, jobs_of
from tests.support.fake_openai import fake_openai, say

# Sentences that ask to change, stop, remove or run a task, or to see tasks, in the three
# languages. None of them may ever create a job, whatever tasks exist.
MANAGE_SENTENCES = [
    "刪除每週的運動提醒",
    "暂停那个喝水提醒",
    "run the backup task now",
    "cancel tomorrow's call reminder",
    "delete the daily water reminder",
    "暫停每天的喝水提醒",
    "把喝水提醒改到每天晚上十點",
    "改到每天晚上十點",
    "move it to 7am",
    "move the standup reminder to 7am",
    "what tasks do I have?",
    "我有哪些提醒",
    "我有哪些任务",
    "pause the news digest",
    "resume the water reminder",
    "恢復喝水提醒",
    "继续那个运动提醒",
    "把運動提醒刪掉",
    "不要再提醒我喝水了",
    "stop reminding me to drink water",
    "立刻執行備份任務",
    "马上执行备份任务",
    "喝水提醒上次的結果是什麼",
    "show me the last result of the backup task",
    "remove the call mom reminder",
    "取消明天的電話提醒",
    "取消明天的电话提醒",
    "reschedule the standup reminder to every weekday at 10am",
]


@dataclass
class Chat:
    runtime: Runtime
    clock: FakeClock
    http: httpx.AsyncClient

    async def say(self, message: str, **extra: Any) -> httpx.Response:
        return await self.http.post("/v1/chat", json={"message": message, "timezone": TZ,
                                                      **extra})

    async def create(self, name: str, text: str, schedule: str = "0 9 * * *") -> str:
        response = await self.http.post("/v1/jobs", json={
            "name": name, "action": {"type": "message", "text": text},
            "job_params": {"type": "recurring", "schedule": schedule, "timezone": TZ}})
        assert response.status_code == 201, response.text
        job_id: str = response.json()["job_id"]
        return job_id


@contextlib.asynccontextmanager
async def open_chat(tmp_path: Path, **settings: Any) -> AsyncIterator[Chat]:
    clock = FakeClock(START)
    runtime = await Runtime.open(Settings(database_url=f"sqlite:///{tmp_path}/manage.db",
                                          **settings), clock)
    try:
        transport = httpx.ASGITransport(app=create_app(runtime))
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1",
                                     timeout=30) as http:
            yield Chat(runtime, clock, http)
    finally:
        await runtime.close()


@pytest.fixture
async def chat(tmp_path: Path) -> AsyncIterator[Chat]:
    async with open_chat(tmp_path) as opened:
        yield opened


async def seed(chat: Chat) -> dict[str, str]:
    """A few tasks a user might have, some of them sharing words."""
    return {
        "water": await chat.create("喝水", "記得喝水"),
        "sport": await chat.create("每週運動", "去運動", "0 7 * * 1"),
        "backup": await chat.create("backup task", "run the backup", "0 3 * * *"),
        "call": await chat.create("call mom", "call mom", "0 15 * * *"),
        "standup": await chat.create("standup", "standup reminder", "0 9 * * 1-5"),
    }


@pytest.mark.parametrize("message", MANAGE_SENTENCES)
async def test_a_request_to_manage_never_creates_a_job(chat: Chat, message: str) -> None:
    before = await seed(chat)
    response = await chat.say(message)
    assert response.status_code < 500, response.text
    after = {j["job_id"] for j in await jobs_of(chat.http)}
    assert after == set(before.values()), f"{message!r} created a job: {response.text}"
    if response.status_code == 200:
        assert response.json()["jobs"] == [] or response.json()["intent"] != "create"


@pytest.mark.parametrize("message", MANAGE_SENTENCES)
async def test_a_request_to_manage_creates_nothing_when_the_user_has_no_tasks(
        chat: Chat, message: str) -> None:
    response = await chat.say(message)
    assert response.status_code < 500, response.text
    assert await jobs_of(chat.http) == [], f"{message!r} created a job: {response.text}"


# --- helpers ----------------------------------------------------------------------------------
async def job(chat: Chat, job_id: str, headers: dict[str, str] | None = None) -> dict[str, Any]:
    response = await chat.http.get(f"/v1/jobs/{job_id}", headers=headers or {})
    assert response.status_code == 200, response.text
    found: dict[str, Any] = response.json()
    return found


async def snapshot(chat: Chat) -> list[tuple[str, str, str]]:
    """What a request that changes nothing must leave as it was."""
    return [(j["job_id"], j["status"], j["updated_at"]) for j in await jobs_of(chat.http)]


async def execute_due(runtime: Runtime) -> None:
    """One watcher tick and one worker pass, in this process."""
    dispatcher = Watcher(runtime.store, runtime.queue, runtime.clock, runtime.settings,
                            runtime.metrics, "w1")
    worker = Worker(runtime.store, runtime.queue, runtime.clock, runtime.settings,
                    runtime.actions, runtime.metrics)
    try:
        await dispatcher.refresh_shards()
        await dispatcher.run_once()
        await worker.run_once(100)
    finally:
        await worker.aclose()


def ok(response: httpx.Response) -> dict[str, Any]:
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


# --- delete, confirmed ------------------------------------------------------------------------
async def test_delete_asks_then_the_confirmation_deletes(chat: Chat) -> None:
    ids = await seed(chat)
    before = await snapshot(chat)
    asked = ok(await chat.say("刪除每週的運動提醒"))
    assert asked["intent"] == "delete"
    assert asked["needs_confirmation"] is True
    assert asked["reply"].startswith(
        "確定要刪除「每週運動」嗎？它的時間是每週一 07:00（Asia/Taipei）。")
    assert [c["job_id"] for c in asked["candidates"]] == [ids["sport"]]
    assert asked["jobs"] == []
    assert asked["confirmation_expires_at"] == "2026-06-22T02:10:00Z"
    assert await snapshot(chat) == before  # asking changed nothing

    done = ok(await chat.http.post("/v1/chat", json={"message": "好",
                                                     "confirm": asked["confirmation_token"]}))
    assert done["reply"] == "好的，已刪除「每週運動」。"
    assert done["intent"] == "delete"
    assert done["needs_confirmation"] is False
    assert [(j["job_id"], j["status"]) for j in done["jobs"]] == [(ids["sport"], "cancelled")]
    assert (await job(chat, ids["sport"]))["status"] == "cancelled"
    others = [j for j in await jobs_of(chat.http) if j["job_id"] != ids["sport"]]
    assert {j["status"] for j in others} == {"scheduled"}


async def test_an_api_client_confirms_without_a_message(chat: Chat) -> None:
    ids = await seed(chat)
    asked = ok(await chat.say("cancel tomorrow's call reminder"))
    assert asked["reply"] == ("Delete “call mom”, every day at 15:00 (Asia/Taipei)? It cannot "
                              "be undone. Answer yes within 10 minutes to confirm.")
    done = ok(await chat.http.post("/v1/chat", json={"confirm": asked["confirmation_token"]}))
    assert done["reply"] == "OK, deleted “call mom”."
    assert (await job(chat, ids["call"]))["status"] == "cancelled"


async def test_no_keeps_the_task(chat: Chat) -> None:
    ids = await seed(chat)
    asked = ok(await chat.say("删除每周的运动提醒"))
    before = await snapshot(chat)
    declined = ok(await chat.http.post("/v1/chat", json={
        "message": "不要", "confirm": asked["confirmation_token"]}))
    assert declined["reply"] == "好的，没有做任何更改。"
    assert declined["jobs"] == []
    assert await snapshot(chat) == before
    assert (await job(chat, ids["sport"]))["status"] == "scheduled"


async def test_another_sentence_leaves_the_question_open(chat: Chat) -> None:
    ids = await seed(chat)
    asked = ok(await chat.say("delete the standup reminder"))
    listed = ok(await chat.http.post("/v1/chat", json={
        "message": "what tasks do I have?", "confirm": asked["confirmation_token"]}))
    assert listed["intent"] == "list"
    assert (await job(chat, ids["standup"]))["status"] == "scheduled"
    done = ok(await chat.http.post("/v1/chat", json={
        "message": "yes", "confirm": asked["confirmation_token"]}))
    assert done["jobs"][0]["status"] == "cancelled"


# --- tokens that are refused --------------------------------------------------------------------
async def test_a_forged_token_is_refused(chat: Chat) -> None:
    await seed(chat)
    before = await snapshot(chat)
    asked = ok(await chat.say("delete the standup reminder"))
    token = asked["confirmation_token"]
    prefix, claims, mac = token.split(".")
    for forged in (token[:-3] + ("AAA" if not token.endswith("AAA") else "BBB"),
                   f"{prefix}.{claims}x.{mac}", "c1.e30.AAAA", "hello"):
        response = await chat.http.post("/v1/chat", json={"message": "yes", "confirm": forged})
        body = assert_problem(response, 422, "invalid_confirmation", "confirm")
        assert body["detail"] == "This is not a confirmation I gave you; nothing was done."
    chinese = await chat.http.post("/v1/chat", json={"message": "好", "confirm": "c1.x.y",
                                                     "timezone": TZ})
    assert assert_problem(chinese, 422, "invalid_confirmation", "confirm")["detail"] == (
        "這不是我給你的確認碼，沒有執行任何變更。")
    assert await snapshot(chat) == before


async def test_another_users_token_is_refused(chat: Chat) -> None:
    alice = await add_token(chat.runtime, "alice", "odt_alice_token_123")
    bob = await add_token(chat.runtime, "bob", "odt_bob_token_4567")
    created = await chat.http.post("/v1/jobs", headers=alice, json={
        "name": "喝水", "action": {"type": "message", "text": "記得喝水"},
        "job_params": {"type": "recurring", "schedule": "0 9 * * *", "timezone": TZ}})
    assert created.status_code == 201, created.text
    asked = ok(await chat.http.post("/v1/chat", headers=alice, json={
        "message": "刪除喝水提醒", "timezone": TZ}))
    assert asked["needs_confirmation"]
    stolen = await chat.http.post("/v1/chat", headers=bob, json={
        "message": "好", "confirm": asked["confirmation_token"], "timezone": TZ})
    assert_problem(stolen, 422, "invalid_confirmation", "confirm")
    # Bob's own words find none of Alice's tasks either.
    bobs = ok(await chat.http.post("/v1/chat", headers=bob, json={"message": "刪除喝水提醒",
                                                                  "timezone": TZ}))
    assert bobs["reply"] == "你目前沒有任何任務，所以沒有做任何變更。"
    assert (await job(chat, created.json()["job_id"], alice))["status"] == "scheduled"


async def test_an_expired_token_is_refused(chat: Chat) -> None:
    ids = await seed(chat)
    asked = ok(await chat.say("把運動提醒刪掉"))
    chat.clock.advance(CONFIRM_TTL_SECONDS - 1)
    still = ok(await chat.say("我有哪些提醒"))  # the clock moved; the token is still good
    assert still["intent"] == "list"
    chat.clock.advance(1)
    late = await chat.http.post("/v1/chat", json={"message": "好",
                                                  "confirm": asked["confirmation_token"]})
    body = assert_problem(late, 422, "confirmation_expired", "confirm")
    assert body["detail"] == "這個確認已經過期，沒有執行任何變更；請再說一次。"
    assert (await job(chat, ids["sport"]))["status"] == "scheduled"


async def test_a_token_is_used_once(chat: Chat) -> None:
    ids = await seed(chat)
    asked = ok(await chat.say("delete the backup task"))
    confirm = {"message": "yes", "confirm": asked["confirmation_token"]}
    ok(await chat.http.post("/v1/chat", json=confirm))
    again = await chat.http.post("/v1/chat", json=confirm)
    assert_problem(again, 409, "confirmation_stale", "confirm")
    assert (await job(chat, ids["backup"]))["status"] == "cancelled"


async def test_a_task_changed_after_the_question_is_not_deleted(chat: Chat) -> None:
    ids = await seed(chat)
    asked = ok(await chat.say("delete the standup reminder"))
    renamed = await chat.http.patch(f"/v1/jobs/{ids['standup']}", json={"name": "daily sync"})
    assert renamed.status_code == 200, renamed.text
    refused = await chat.http.post("/v1/chat", json={"message": "yes",
                                                     "confirm": asked["confirmation_token"]})
    body = assert_problem(refused, 409, "confirmation_stale", "confirm")
    assert body["detail"] == "“daily sync” changed after I asked, so nothing was done; ask again."
    assert (await job(chat, ids["standup"]))["status"] == "scheduled"


async def test_a_run_in_between_does_not_spoil_the_confirmation(chat: Chat) -> None:
    """The engine moves a task's version on its own (a finished run advances next_run_at);
    that is not a change the user would notice, so the question still stands."""
    every_minute = await chat.create("heartbeat", "heartbeat", "* * * * *")
    asked = ok(await chat.say("delete the heartbeat task"))
    seen = (await chat.runtime.service.get_job("local", every_minute)).job.version
    chat.clock.advance(60)
    await execute_due(chat.runtime)
    assert await RecurringWatcher(chat.runtime.store, chat.clock, chat.runtime.settings,
                                  "r1").run_once() == 1
    moved = (await chat.runtime.service.get_job("local", every_minute)).job
    assert moved.version > seen
    assert moved.next_run_at == START + timedelta(minutes=2)
    done = ok(await chat.http.post("/v1/chat", json={"confirm": asked["confirmation_token"]}))
    assert done["reply"] == "OK, deleted “heartbeat”."
    assert (await job(chat, every_minute))["status"] == "cancelled"


async def test_a_paused_task_is_a_changed_task(chat: Chat) -> None:
    ids = await seed(chat)
    asked = ok(await chat.say("移除喝水提醒"))
    ok(await chat.say("暫停喝水提醒"))
    refused = await chat.http.post("/v1/chat", json={"confirm": asked["confirmation_token"]})
    assert_problem(refused, 409, "confirmation_stale", "confirm")
    assert (await job(chat, ids["water"]))["status"] == "paused"


async def test_the_service_refuses_a_change_decided_from_an_old_version(chat: Chat) -> None:
    ids = await seed(chat)
    service = chat.runtime.service
    seen = (await service.get_job("local", ids["water"])).job.version
    await service.pause_job("local", ids["water"])
    with pytest.raises(ConflictError) as refused:
        await service.delete_job("local", ids["water"], expected_version=seen)
    assert refused.value.code == "version_mismatch"
    with pytest.raises(ConflictError):
        await service.update_job("local", ids["water"], JobPatch(name="x"),
                                 expected_version=seen)
    assert (await job(chat, ids["water"]))["status"] == "paused"
    assert (await job(chat, ids["water"]))["name"] == "喝水"


# --- change the time, confirmed -----------------------------------------------------------------
async def test_change_time_asks_then_moves(chat: Chat) -> None:
    ids = await seed(chat)
    asked = ok(await chat.say("把喝水提醒改到每天晚上十點"))
    assert asked["intent"] == "change_time"
    assert asked["reply"] == (
        "確定要把「喝水」從「每天 09:00（Asia/Taipei）」改成「每天 22:00（Asia/Taipei）」嗎？"
        "改後下次執行 2026-06-22 22:00。請在 10 分鐘內回答「是」確認。")
    assert asked["understood"]["job_params"]["schedule"] == "0 22 * * *"
    assert (await job(chat, ids["water"]))["job_params"]["schedule"] == "0 9 * * *"
    done = ok(await chat.http.post("/v1/chat", json={"message": "確認",
                                                     "confirm": asked["confirmation_token"]}))
    assert done["reply"] == (
        "好的，「喝水」已改為每天 22:00（Asia/Taipei），下次執行 2026-06-22 22:00。")
    moved = await job(chat, ids["water"])
    assert moved["job_params"]["schedule"] == "0 22 * * *"
    assert moved["next_run_at"] == "2026-06-22T14:00:00Z"
    replay = await chat.http.post("/v1/chat", json={"confirm": asked["confirmation_token"]})
    assert_problem(replay, 409, "confirmation_stale", "confirm")


async def test_a_time_of_day_keeps_a_recurring_tasks_days(chat: Chat) -> None:
    ids = await seed(chat)
    asked = ok(await chat.say("move the standup reminder to 7am"))
    assert asked["reply"].startswith("Change “standup” from every weekday at 09:00 (Asia/Taipei)"
                                     " to every weekday at 07:00 (Asia/Taipei)? Next run would "
                                     "be 2026-06-23 07:00.")
    ok(await chat.http.post("/v1/chat", json={"confirm": asked["confirmation_token"]}))
    assert (await job(chat, ids["standup"]))["job_params"]["schedule"] == "0 7 * * 1-5"


async def test_a_new_time_keeps_the_tasks_flexible_window(chat: Chat) -> None:
    response = await chat.http.post("/v1/jobs", json={
        "name": "standup", "action": {"type": "message", "text": "standup reminder"},
        "job_params": {"type": "recurring", "schedule": "0 9 * * 1-5", "timezone": TZ,
                       "flexible_window_seconds": 300}})
    job_id = response.json()["job_id"]
    asked = ok(await chat.say("move the standup reminder to 7am"))
    ok(await chat.http.post("/v1/chat", json={"confirm": asked["confirmation_token"]}))
    moved = await job(chat, job_id)
    assert moved["job_params"]["schedule"] == "0 7 * * 1-5"
    assert moved["job_params"]["flexible_window_seconds"] == 300


async def test_a_day_makes_a_recurring_task_one_time_and_says_so(chat: Chat) -> None:
    ids = await seed(chat)
    asked = ok(await chat.say("move the call reminder to tomorrow at 5pm"))
    assert "It would then run only once." in asked["reply"]
    ok(await chat.http.post("/v1/chat", json={"confirm": asked["confirmation_token"]}))
    moved = await job(chat, ids["call"])
    assert moved["job_params"]["type"] == "one-time"
    assert moved["next_run_at"] == "2026-06-23T09:00:00Z"


async def test_a_new_time_the_parser_cannot_read_changes_nothing(chat: Chat) -> None:
    await seed(chat)
    before = await snapshot(chat)
    response = await chat.say("把喝水提醒改到每週八")
    assert_problem(response, 422, "could_not_understand", "每週八")
    no_time = ok(await chat.say("change the water reminder"))
    assert no_time["intent"] == "change_time"
    assert no_time["reply"].startswith("To when?")
    assert no_time["needs_confirmation"] is False
    assert await snapshot(chat) == before


# --- pause, resume, run now, list, last result ---------------------------------------------------
async def test_pause_and_resume(chat: Chat) -> None:
    ids = await seed(chat)
    paused = ok(await chat.say("暂停那个喝水提醒"))
    assert paused["reply"] == "好的，已暂停「喝水」。要恢复时请说“恢复喝水”。"
    assert [(j["job_id"], j["status"]) for j in paused["jobs"]] == [(ids["water"], "paused")]
    assert (await job(chat, ids["water"]))["next_run_at"] is None
    again = ok(await chat.say("pause the 喝水 reminder"))
    assert again["jobs"] == []
    resumed = ok(await chat.say("恢復喝水提醒"))
    assert resumed["reply"] == "好的，已恢復「喝水」，下次執行 2026-06-23 09:00。"
    assert (await job(chat, ids["water"]))["status"] == "scheduled"
    not_paused = ok(await chat.say("resume the backup task"))
    assert not_paused["reply"] == "“backup task” is not paused; next run 2026-06-23 03:00."
    assert not_paused["jobs"] == []


async def test_of_two_alike_the_one_the_intent_fits(chat: Chat) -> None:
    first = await chat.create("water the plants", "water the plants")
    second = await chat.create("drink water", "drink water")
    await chat.http.post(f"/v1/jobs/{first}:pause")
    resumed = ok(await chat.say("resume the water reminder"))
    assert [j["job_id"] for j in resumed["jobs"]] == [first]
    assert (await job(chat, second))["status"] == "scheduled"


async def test_run_now_then_its_last_result(chat: Chat) -> None:
    ids = await seed(chat)
    none_yet = ok(await chat.say("show me the last result of the backup task"))
    assert none_yet["reply"] == ("“backup task” has not finished a run yet; next run "
                                 "2026-06-23 03:00.")
    ran = ok(await chat.say("run the backup task now"))
    assert ran["intent"] == "run_now"
    assert ran["run"]["kind"] == "manual"
    assert ran["run"]["job_id"] == ids["backup"]
    assert ran["reply"] == ("OK, running “backup task” now, delivered to your inbox; the result "
                            "will also be in its runs.")
    assert [j["job_id"] for j in await jobs_of(chat.http)] == list(reversed(ids.values()))
    await execute_due(chat.runtime)
    last = ok(await chat.say("what did the backup task say?"))
    assert last["intent"] == "last_result"
    assert last["reply"] == "The last result of “backup task” (2026-06-22 10:00): run the backup"
    assert last["run"]["status"] == "SUCCEEDED"
    assert last["run"]["run_id"] == ran["run"]["run_id"]
    zh = ok(await chat.say("備份任務上次的結果是什麼"))  # Chinese words, an English name
    assert zh["intent"] == "last_result"
    assert zh["candidates"] == []


async def test_list(chat: Chat) -> None:
    assert ok(await chat.say("what tasks do I have?"))["reply"] == "You have no tasks."
    ids = await seed(chat)
    await chat.http.post(f"/v1/jobs/{ids['sport']}:pause")
    await chat.http.delete(f"/v1/jobs/{ids['call']}")
    listed = ok(await chat.say("我有哪些提醒"))
    assert listed["intent"] == "list"
    assert listed["reply"].splitlines() == [
        "你有 4 個任務：",
        "1. 「standup」 每個工作日 09:00（Asia/Taipei），下次 2026-06-23 09:00",
        "2. 「backup task」 每天 03:00（Asia/Taipei），下次 2026-06-23 03:00",
        "3. 「每週運動」 每週一 07:00（Asia/Taipei），暫停",
        "4. 「喝水」 每天 09:00（Asia/Taipei），下次 2026-06-23 09:00",
    ]
    assert [c["job_id"] for c in listed["candidates"]] == [
        ids["standup"], ids["backup"], ids["sport"], ids["water"]]
    assert listed["jobs"] == []


async def test_two_matches_are_a_question_and_change_nothing(chat: Chat) -> None:
    plants = await chat.create("water the plants", "water the plants")
    drink = await chat.create("drink water", "drink water")
    before = await snapshot(chat)
    for sentence in ("delete the water reminder", "pause the water reminder",
                     "move the water reminder to 7am", "run the water reminder now"):
        asked = ok(await chat.say(sentence))
        assert asked["reply"].startswith("2 tasks match “the water reminder”; which one?"), \
            asked["reply"]
        assert {c["job_id"] for c in asked["candidates"]} == {plants, drink}
        assert asked["needs_confirmation"] is False
        assert asked["needs_choice"] is True  # "2" with this token goes on with the 2nd
        assert asked["confirmation_token"]
        assert asked["jobs"] == []
    assert await snapshot(chat) == before


async def test_a_numbered_pick_goes_on_with_that_task(chat: Chat) -> None:
    plants = await chat.create("water the plants", "water the plants")
    drink = await chat.create("drink water", "drink water")
    asked = ok(await chat.say("pause the water reminder"))
    listed = [c["job_id"] for c in asked["candidates"]]
    assert asked["reply"].splitlines()[1].startswith("1. “" + (
        "drink water" if listed[0] == drink else "water the plants"))
    before = await snapshot(chat)
    # Not a number: a new request; a number out of range: a 422; nothing changed.
    out_of_range = await chat.say("the fifth one", confirm=asked["confirmation_token"])
    assert_problem(out_of_range, 422, "invalid_choice", "message")
    assert await snapshot(chat) == before
    picked = ok(await chat.say("the second one", confirm=asked["confirmation_token"]))
    assert picked["intent"] == "pause"
    assert [j["job_id"] for j in picked["jobs"]] == [listed[1]]
    assert picked["jobs"][0]["status"] == "paused"
    other = listed[0]
    assert (await chat.http.get(f"/v1/jobs/{other}")).json()["status"] == "scheduled"
    assert {plants, drink} == set(listed)


async def test_a_pick_of_a_deletion_asks_before_deleting(chat: Chat) -> None:
    await chat.create("喝水", "記得喝水")
    await chat.create("喝水", "記得喝水")  # two tasks with the same name
    asked = ok(await chat.say("刪除喝水提醒"))
    assert asked["needs_choice"], asked["reply"]
    assert asked["reply"].startswith("有 2 個任務符合「喝水提醒」，是哪一個呢？請回答編號")
    before = await snapshot(chat)
    picked = ok(await chat.say("第二個", confirm=asked["confirmation_token"]))
    assert picked["needs_confirmation"]
    assert not picked["needs_choice"]
    assert picked["candidates"][0]["job_id"] == asked["candidates"][1]["job_id"]
    assert await snapshot(chat) == before
    done = ok(await chat.say("好", confirm=picked["confirmation_token"]))
    assert done["jobs"][0]["status"] == "cancelled"
    assert done["jobs"][0]["job_id"] == asked["candidates"][1]["job_id"]


async def test_it_with_several_tasks_asks_which(chat: Chat) -> None:
    await seed(chat)
    before = await snapshot(chat)
    asked = ok(await chat.say("move it to 7am"))
    assert asked["reply"].startswith("Which task? You have 5; answer with its number")
    assert asked["needs_choice"]
    assert len(asked["candidates"]) == 5
    assert await snapshot(chat) == before


async def test_it_with_one_task_is_that_task(chat: Chat) -> None:
    only = await chat.create("stretch", "stretch")
    asked = ok(await chat.say("delete it"))
    assert [c["job_id"] for c in asked["candidates"]] == [only]
    assert asked["needs_confirmation"]


async def test_no_match_says_so_and_hints_at_creating(chat: Chat) -> None:
    await seed(chat)
    before = await snapshot(chat)
    answer = ok(await chat.say("delete old logs every Sunday at 2am"))
    assert answer["reply"].startswith("I found no task matching “old logs every sunday at 2am”, "
                                      "so nothing was changed. To schedule a new task")
    zh = ok(await chat.say("暫停游泳提醒"))
    assert zh["reply"] == "找不到符合「游泳提醒」的任務，所以沒有做任何變更。"
    assert await snapshot(chat) == before


async def test_dry_run_changes_nothing(chat: Chat) -> None:
    ids = await seed(chat)
    before = await snapshot(chat)
    for sentence, reply in (
            ("pause the standup reminder",
             "Would pause “standup”. (dry run: nothing was changed)"),
            ("run the backup task now", "Would run “backup task” now. (dry run: nothing was "
                                        "changed)"),
            ("刪除每週的運動提醒",
             "將會請你確認是否刪除「每週運動」，它的時間是每週一 07:00（Asia/Taipei）。"
             "（試算：沒有做任何變更）")):
        answer = ok(await chat.say(sentence, dry_run=True))
        assert answer["reply"] == reply
        assert answer["dry_run"] is True
        assert answer["confirmation_token"] is None
    asked = ok(await chat.say("delete the standup reminder"))
    would = ok(await chat.http.post("/v1/chat", json={
        "confirm": asked["confirmation_token"], "dry_run": True}))
    assert would["reply"] == "Would delete “standup”. (dry run: nothing was changed)"
    assert await snapshot(chat) == before
    assert (await job(chat, ids["standup"]))["status"] == "scheduled"
    ok(await chat.http.post("/v1/chat", json={"confirm": asked["confirmation_token"]}))
    assert (await job(chat, ids["standup"]))["status"] == "cancelled"  # still good after


async def test_a_message_or_a_confirmation_is_required(chat: Chat) -> None:
    assert_problem(await chat.http.post("/v1/chat", json={}), 422, "missing_field", "message")
    assert_problem(await chat.http.post("/v1/chat", json={"confirm": ""}), 422,
                   "invalid_value", "confirm")


async def test_creates_still_create(chat: Chat) -> None:
    answer = ok(await chat.say("每天提醒我刪除垃圾郵件"))
    assert answer["intent"] == "create"
    [created] = answer["jobs"]
    assert created["action"] == {"type": "message", "text": "刪除垃圾郵件"}
    assert answer["needs_confirmation"] is False
    assert answer["candidates"] == []


async def test_the_model_is_told_not_to_create_when_asked_to_change(tmp_path: Path) -> None:
    def script(body: dict[str, Any]) -> dict[str, Any]:
        return say("你沒有叫做運動的提醒。")

    with fake_openai(script) as fake:
        async with open_chat(tmp_path, llm_base_url=fake.url, llm_model="m") as chat:
            answer = ok(await chat.say("刪除每週的運動提醒"))
            assert await jobs_of(chat.http) == []
    assert answer["decided_by"] == "model"
    assert answer["intent"] is None
    system = fake.requests[0]["messages"][0]["content"]
    assert "Never call create_task for such a request" in system
