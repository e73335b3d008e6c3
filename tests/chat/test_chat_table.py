"""Issue 21 §2, as a table in English, Traditional and Simplified Chinese: chat does what people
ask about the tasks they have.

Each scenario runs in the three languages against a real runtime (fresh SQLite file, fake
clock at Monday 10:00 in Taipei): the README's own example (a task made by chat, then moved
by a name written differently), two tasks with the same name (a numbered question, then "the
second one"), a rename, skipping one occurrence without pausing, and "what's next?"."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.chat.test_manage import Chat, ok, open_chat, snapshot

LANGUAGES = ["en", "zh-Hant", "zh-Hans"]
# Where each speaker is: a Simplified Chinese speaker in Shanghai (the same offset as Taipei).
# The language is read from the sentence and, where the characters leave it open, the zone.
ZONES = {"en": "Asia/Taipei", "zh-Hant": "Asia/Taipei", "zh-Hans": "Asia/Shanghai"}
# language -> (sentence that makes the task, its name, the request that moves it to 7am)
README = {
    "en": ("every weekday at 9am remind me to stand up", "stand up",
           "move the standup reminder to 7am"),
    "zh-Hant": ("每個工作日早上九點提醒我站起來", "站起來", "把站起來提醒改到早上七點"),
    # The task is named in Simplified characters and asked about in both scripts.
    "zh-Hans": ("每个工作日早上九点提醒我站起来", "站起来", "把站起來的提醒改到早上七点"),
}
# language -> (name of two tasks, request about them, the pick, the pick's question head)
SAME_NAME = {
    "en": ("water", "pause the water reminder", "the second one",
           "2 tasks match “the water reminder”; which one? Answer with its number"),
    "zh-Hant": ("喝水", "暫停喝水提醒", "第二個",
                "有 2 個任務符合「喝水提醒」，是哪一個呢？請回答編號"),
    "zh-Hans": ("喝水", "暂停喝水提醒", "第二个",
                "有 2 个任务符合“喝水提醒”，是哪一个呢？请回答编号"),
}
# language -> (name, request, new name, reply)
RENAME = {
    "en": ("water", "rename the water reminder to hydrate", "hydrate",
           "OK, renamed “water” to “hydrate”."),
    "zh-Hant": ("吃藥", "把吃藥提醒改名為晚上吃藥", "晚上吃藥",
                "好的，已把「吃藥」改名為「晚上吃藥」。"),
    "zh-Hans": ("吃药", "把吃药提醒改名为晚上吃药", "晚上吃药",
                "好的，已把「吃药」改名为「晚上吃药」。"),
}
# language -> (name, skip tomorrow's, skip today's (not the next run), reply)
SKIP = {
    "en": ("news digest", "skip tomorrow's news digest", "skip today's news digest",
           "OK, skipped “news digest” at 2026-06-23 08:00; it runs again 2026-06-24 08:00."),
    "zh-Hant": ("健身", "跳過明天的健身", "跳過今天的健身",
                "好的，已跳過「健身」 2026-06-23 08:00 的那次執行，下次執行 2026-06-24 08:00。"),
    "zh-Hans": ("健身", "跳过明天的健身", "跳过今天的健身",
                "好的，已跳过「健身」 2026-06-23 08:00 的那次执行，下次执行 2026-06-24 08:00。"),
}
NEXT = {"en": ("what's next?", "Next runs:"), "zh-Hant": ("下一個提醒是什麼時候", "接下來的執行："),
        "zh-Hans": ("下一个提醒是什么时候", "接下来的执行：")}


@pytest.fixture(params=LANGUAGES)
def language(request: pytest.FixtureRequest) -> str:
    language: str = request.param
    return language


@pytest.fixture
async def chat(tmp_path: Path) -> Any:
    async with open_chat(tmp_path) as opened:
        yield opened


async def said(chat: Chat, language: str, message: str, **extra: Any) -> dict[str, Any]:
    """The answer to ``message`` said by a speaker of ``language``, checked to be in it."""
    answer = ok(await chat.say(message, timezone=ZONES[language], **extra))
    assert answer["language"] == language, answer
    return answer


async def test_the_readme_example_moves_the_task_chat_made(chat: Chat, language: str) -> None:
    made, name, move = README[language]
    created = await said(chat, language, made)
    [job] = created["jobs"]
    assert (job["name"], job["job_params"]["schedule"]) == (name, "0 9 * * 1-5")

    asked = await said(chat, language, move)

    assert asked["intent"] == "change_time", asked["reply"]
    assert asked["needs_confirmation"]
    assert [c["job_id"] for c in asked["candidates"]] == [job["job_id"]]
    assert "07:00" in asked["reply"]
    done = ok(await chat.say("yes", confirm=asked["confirmation_token"]))
    assert done["jobs"][0]["job_params"]["schedule"] == "0 7 * * 1-5"


async def test_two_tasks_with_one_name_are_numbered_and_picked(chat: Chat,
                                                               language: str) -> None:
    name, request, pick, head = SAME_NAME[language]
    first = await chat.create(name, name)
    second = await chat.create(name, name)
    before = await snapshot(chat)

    asked = await said(chat, language, request)

    assert asked["reply"].startswith(head), asked["reply"]
    lines = asked["reply"].splitlines()
    assert [line[:3] for line in lines[1:]] == ["1. ", "2. "]
    listed = [c["job_id"] for c in asked["candidates"]]
    assert set(listed) == {first, second}
    assert asked["needs_choice"]
    assert not asked["needs_confirmation"]
    assert await snapshot(chat) == before
    picked = ok(await chat.say(pick, confirm=asked["confirmation_token"]))
    assert [(j["job_id"], j["status"]) for j in picked["jobs"]] == [(listed[1], "paused")]
    assert (await chat.http.get(f"/v1/jobs/{listed[0]}")).json()["status"] == "scheduled"


async def test_rename_changes_the_name_only(chat: Chat, language: str) -> None:
    name, request, new, reply = RENAME[language]
    job_id = await chat.create(name, name, "0 21 * * *")

    renamed = await said(chat, language, request)

    assert (renamed["intent"], renamed["reply"]) == ("rename", reply)
    job = (await chat.http.get(f"/v1/jobs/{job_id}")).json()
    assert (job["name"], job["job_params"]["schedule"]) == (new, "0 21 * * *")
    assert len((await chat.http.get("/v1/jobs")).json()["jobs"]) == 1  # nothing created


async def test_skip_marks_one_occurrence_and_keeps_the_rest(chat: Chat, language: str) -> None:
    name, tomorrow, today, reply = SKIP[language]
    job_id = await chat.create(name, name, "0 8 * * *")  # next run: tomorrow 08:00 Taipei
    before = await snapshot(chat)

    # Today's 08:00 has passed: the next run is tomorrow's, and today's is not skipped.
    not_next = await said(chat, language, today)
    assert not_next["intent"] == "skip_next"
    assert not_next["jobs"] == []
    assert await snapshot(chat) == before
    skipped = await said(chat, language, tomorrow)

    assert (skipped["intent"], skipped["reply"]) == ("skip_next", reply)
    assert skipped["run"]["status"] == "SKIPPED"
    runs = (await chat.http.get(f"/v1/jobs/{job_id}/runs")).json()["runs"]
    assert [(r["status"], r["scheduled_at"]) for r in runs] == [
        ("PENDING", "2026-06-24T00:00:00Z"), ("SKIPPED", "2026-06-23T00:00:00Z")]
    job = (await chat.http.get(f"/v1/jobs/{job_id}")).json()
    assert (job["status"], job["next_run_at"]) == ("scheduled", "2026-06-24T00:00:00Z")
    assert len((await chat.http.get("/v1/jobs")).json()["jobs"]) == 1  # nothing created


async def test_whats_next_lists_the_next_runs_across_tasks(chat: Chat, language: str) -> None:
    message, head = NEXT[language]
    late = await chat.create("late", "late", "0 21 * * *")  # today 21:00 Taipei
    early = await chat.create("early", "early", "0 7 * * *")  # tomorrow 07:00
    paused = await chat.create("paused", "paused", "0 12 * * *")
    await chat.http.post(f"/v1/jobs/{paused}:pause")

    answer = await said(chat, language, message)

    assert answer["intent"] == "next"
    lines = answer["reply"].splitlines()
    assert lines[0] == head
    assert [c["job_id"] for c in answer["candidates"]] == [late, early]
    assert "2026-06-22 21:00" in lines[1]
    assert "2026-06-23 07:00" in lines[2]
    assert len(lines) == 3  # the paused task has no next run
