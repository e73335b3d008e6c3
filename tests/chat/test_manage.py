"""POST /v1/chat without a model, asked to manage tasks rather than create one: list, pause,
resume, delete (confirmed), run now, change the time (confirmed), show the last result.

A real runtime on a fresh SQLite file and a fake clock; runs are executed by a real watcher
and worker pass in this process when a test needs a result."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from onthedot.api.app import create_app
from onthedot.config import Settings
from onthedot.domain.clock import FakeClock
from onthedot.runtime import Runtime
from tests.chat.conftest import START, TZ, jobs_of

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
