"""chat.intents: which sentences ask for a new task, and which ask about one the user has.

Each row: the sentence, the intent, the words that name the task and (change_time) the new
time. The rows that must stay ``create`` matter as much as the others: a reminder whose text
holds "刪除" or "cancel" is still a new reminder."""

from __future__ import annotations

from datetime import UTC, date, datetime

import pytest

from onthedot.chat.days import day_named
from onthedot.chat.intents import (
    INTENTS,
    LAST,
    Intent,
    mentions_time,
    names_a_day,
    recognise,
    which_one,
    yes_or_no,
)

TZ = "Asia/Taipei"

# (sentence, kind, target, when)
ENGLISH = [
    ("what tasks do I have?", "list", "", None),
    ("What reminders do I have scheduled", "list", "", None),
    ("list my tasks", "list", "", None),
    ("show me all my reminders", "list", "", None),
    ("what's scheduled?", "list", "", None),
    ("do I have any reminders", "list", "", None),
    ("pause the news digest", "pause", "the news digest", None),
    ("please pause the water reminder", "pause", "the water reminder", None),
    ("stop reminding me to drink water", "pause", "drink water", None),
    ("stop the standup reminder", "pause", "the standup reminder", None),
    ("put the backup task on hold", "pause", "the backup task", None),
    ("turn the news digest off", "pause", "the news digest", None),
    ("resume the water reminder", "resume", "the water reminder", None),
    ("turn the news digest back on", "resume", "the news digest", None),
    ("start the standup reminder again", "resume", "the standup reminder", None),
    ("can you unpause my backup job?", "resume", "my backup job", None),
    ("delete the daily water reminder", "delete", "the daily water reminder", None),
    ("cancel tomorrow's call reminder", "delete", "tomorrow's call reminder", None),
    ("Cancel tomorrow’s call reminder.", "delete", "tomorrow's call reminder", None),
    ("remove the call mom reminder", "delete", "the call mom reminder", None),
    ("get rid of the standup reminder please", "delete", "the standup reminder", None),
    ("don't remind me to stretch anymore", "delete", "stretch", None),
    ("delete it", "delete", "it", None),
    ("can you delete my 8am reminder", "delete", "my 8am reminder", None),
    ("I don't need the water reminder anymore", "delete", "the water reminder", None),
    ("pause the 喝水 reminder", "pause", "the 喝水 reminder", None),
    ("run the backup task now", "run_now", "the backup task", None),
    ("run it again", "run_now", "it", None),
    ("trigger the news digest", "run_now", "the news digest", None),
    ("move it to 7am", "change_time", "it", "7am"),
    ("move the standup reminder to 7am", "change_time", "the standup reminder", "7am"),
    ("reschedule the standup reminder to every weekday at 10am", "change_time",
     "the standup reminder", "every weekday at 10am"),
    ("change the time of my water reminder to 10pm", "change_time", "my water reminder",
     "10pm"),
    ("move the reminder to call mom to 5pm", "change_time", "the reminder to call mom", "5pm"),
    ("move the call reminder from 3pm to 5pm", "change_time", "the call reminder", "5pm"),
    ("change the water reminder", "change_time", "the water reminder", None),
    ("show me the last result of the backup task", "last_result", "the backup task", None),
    ("what did the news digest say", "last_result", "the news digest", None),
    ("what was the last output of the backup task?", "last_result", "the backup task", None),
    ("the news digest's last result", "last_result", "the news digest", None),
    ("what's next?", "next", "", None),
    ("What is next", "next", "", None),
    ("when is my next reminder", "next", "", None),
    ("show me my upcoming tasks", "next", "", None),
    ("when does the standup run next", "next", "the standup", None),
    ("skip tomorrow's news digest", "skip_next", "tomorrow's news digest", "tomorrow"),
    ("skip the standup this time", "skip_next", "the standup", None),
    ("please skip the water reminder on friday", "skip_next", "the water reminder on friday",
     "friday"),
    ("rename the water reminder to hydrate", "rename", "the water reminder", None),
]
TRADITIONAL = [
    ("我有哪些提醒", "list", "", None),
    ("我現在有哪些任務？", "list", "", None),
    ("列出我的所有提醒", "list", "", None),
    ("看看我的提醒", "list", "", None),
    ("暫停每天的喝水提醒", "pause", "每天的喝水提醒", None),
    ("請幫我暫停喝水提醒", "pause", "喝水提醒", None),
    ("喝水提醒先暫停一下", "pause", "喝水提醒", None),
    ("停止每天提醒我喝水", "pause", "每天提醒我喝水", None),
    ("把運動提醒關掉", "pause", "運動提醒", None),
    ("暫時不要提醒我喝水", "pause", "喝水", None),
    ("恢復喝水提醒", "resume", "喝水提醒", None),
    ("取消暫停喝水提醒", "resume", "喝水提醒", None),
    ("喝水提醒取消暫停", "resume", "喝水提醒", None),
    ("打開財經新聞摘要", "resume", "財經新聞摘要", None),
    ("刪除每週的運動提醒", "delete", "每週的運動提醒", None),
    ("把運動提醒刪掉", "delete", "運動提醒", None),
    ("取消明天的電話提醒", "delete", "明天的電話提醒", None),
    ("不要再提醒我喝水了", "delete", "喝水", None),
    ("喝水提醒不要了", "delete", "喝水提醒", None),
    ("我不需要喝水提醒了", "delete", "喝水提醒", None),
    ("那些提醒都刪掉", "delete", "那些提醒都", None),
    ("立刻執行備份任務", "run_now", "備份任務", None),
    ("把備份任務現在執行一次", "run_now", "備份任務", None),
    ("執行備份任務", "run_now", "備份任務", None),
    ("改到每天晚上十點", "change_time", "", "每天晚上十點"),
    ("把喝水提醒改到每天晚上十點", "change_time", "喝水提醒", "每天晚上十點"),
    ("喝水提醒的時間改成晚上十點", "change_time", "喝水提醒", "晚上十點"),
    ("那個喝水的提醒改成八點", "change_time", "那個喝水的提醒", "八點"),
    ("把運動提醒延到明天早上七點", "change_time", "運動提醒", "明天早上七點"),
    ("喝水提醒上次的結果是什麼", "last_result", "喝水提醒", None),
    ("看看財經新聞最新的摘要", "last_result", "財經新聞", None),
    ("最近一次備份任務的結果", "last_result", "備份任務", None),
    ("下一個提醒是什麼時候", "next", "", None),
    ("接下來有什麼提醒", "next", "", None),
    ("喝水提醒下次是什麼時候", "next", "喝水提醒", None),
    ("跳過明天的健身", "skip_next", "明天的健身", "明天"),
    ("把喝水提醒跳過一次", "skip_next", "喝水提醒", None),
    ("跳過下週五的週會", "skip_next", "下週五的週會", "下週五"),
    ("把吃藥提醒改名為晚上吃藥", "rename", "吃藥提醒", None),
]
SIMPLIFIED = [
    ("我有哪些任务", "list", "", None),
    ("看一下我的提醒", "list", "", None),
    ("暂停那个喝水提醒", "pause", "那个喝水提醒", None),
    ("继续那个运动提醒", "resume", "那个运动提醒", None),
    ("恢复喝水提醒", "resume", "喝水提醒", None),
    ("删除每周的运动提醒", "delete", "每周的运动提醒", None),
    ("帮我把喝水提醒删掉吧", "delete", "喝水提醒", None),
    ("取消明天的电话提醒", "delete", "明天的电话提醒", None),
    ("别再提醒我喝水了", "delete", "喝水", None),
    ("不用再提醒我喝水了", "delete", "喝水", None),
    ("马上执行备份任务", "run_now", "备份任务", None),
    ("把喝水提醒改到每天晚上十点", "change_time", "喝水提醒", "每天晚上十点"),
    ("运动提醒调到周六早上九点", "change_time", "运动提醒", "周六早上九点"),
    ("喝水提醒上次的结果是什么", "last_result", "喝水提醒", None),
    ("下一个提醒是什么时候", "next", "", None),
    ("跳过明天的健身", "skip_next", "明天的健身", "明天"),
    ("把吃药提醒改名为晚上吃药", "rename", "吃药提醒", None),
    ("喝水提醒的名字改成多喝水", "rename", "喝水提醒的", None),
]
# New tasks whose words hold a management verb, a "result" or a "now": they stay creates.
STAY_CREATE = [
    "每天提醒我刪除垃圾郵件",
    "每天提醒我删除垃圾邮件",
    "每天提醒我把垃圾郵件刪掉",
    "每天早上八點幫我總結財經新聞",
    "明天下午三點提醒我取消訂閱",
    "每週五下午提醒我暫停自動扣款",
    "每天晚上十點提醒我把鬧鐘改到七點",
    "每天凌晨三點執行備份",
    "現在提醒我喝水",
    "每天告訴我最新摘要",
    "每周一三五晚上九点半去健身房",
    "remind me to cancel the gym membership tomorrow at 9am",
    "every day at 8am cancel my unused subscriptions",
    "run the backup every day at 3am",
    "turn off the lights at 11pm",
    "set a reminder for 7am to call mom",
    "make a reminder to stretch in 20 minutes",
    "remind me to call mom tomorrow at 3pm",
    "tomorrow at 9am email the news team",
    "in 20 minutes remind me to stretch",
    "every weekday at 7am send me the tech headlines",
    "every Sunday at 8pm remind me to pause the sprinklers",
    "run a news digest now",
    "clear the cache every hour",
    "every day at 8 send me the latest output of the build",
    "stop by the store tomorrow at 5pm",
    "run 5km every morning at 6",
    "turn on the heater at 6am",
    "continue studying every day at 8pm",
    "every morning pause and breathe",
    "下午三點執行備份",
    "備份每天執行一次",
    "暫存檔每天早上九點刪除",
    "不要忘記明天開會",
    "skip rope every day at 7am",
    "remind me to skip lunch tomorrow at noon",
    "every day at 8 rename the log files to old",
    "每天提醒我跳繩",
    "每天晚上提醒我把檔案改名為備份",
]


@pytest.mark.parametrize(("sentence", "kind", "target", "when"),
                         ENGLISH + TRADITIONAL + SIMPLIFIED)
def test_managing_sentences(sentence: str, kind: str, target: str, when: str | None) -> None:
    intent = recognise(sentence, TZ)
    assert (intent.kind, intent.target, intent.when) == (kind, target, when), intent


@pytest.mark.parametrize("sentence", STAY_CREATE)
def test_new_tasks_stay_creates(sentence: str) -> None:
    assert recognise(sentence, TZ) == Intent(kind="create", language=recognise(
        sentence, TZ).language)


@pytest.mark.parametrize(("sentence", "language"), [
    ("delete the water reminder", "en"),
    ("刪除每週的運動提醒", "zh-Hant"),
    ("删除每周的运动提醒", "zh-Hans"),
])
def test_language_follows_the_sentence(sentence: str, language: str) -> None:
    assert recognise(sentence, "UTC").language == language


def test_every_kind_is_reachable() -> None:
    table = ENGLISH + TRADITIONAL + SIMPLIFIED
    assert {kind for _, kind, _, _ in table} | {"create"} == set(INTENTS)


@pytest.mark.parametrize(("message", "answer"), [
    ("yes", "yes"), ("Yes!", "yes"), ("ok", "yes"), ("go ahead", "yes"), ("好", "yes"),
    ("好的", "yes"), ("是", "yes"), ("確認", "yes"), ("确定", "yes"), ("嗯", "yes"),
    ("no", "no"), ("No.", "no"), ("never mind", "no"), ("不要", "no"), ("算了", "no"),
    ("取消", "no"), ("不用了", "no"),
    ("delete the water reminder", None), ("好像不對", None), ("what tasks do I have", None),
])
def test_yes_or_no(message: str, answer: str | None) -> None:
    assert yes_or_no(message) == answer


@pytest.mark.parametrize(("when", "day"), [
    ("7am", False), ("at 7:30", False), ("晚上十點", False), ("早上七点半", False),
    ("tomorrow at 7am", True), ("every weekday at 10am", True), ("每天晚上十點", True),
    ("明天早上七點", True), ("週六早上九點", True), ("周六早上九点", True), ("Monday 9am", True),
])
def test_names_a_day(when: str, day: bool) -> None:
    assert names_a_day(when) is day


@pytest.mark.parametrize(("words", "time"), [
    ("old logs every sunday at 2am", True), ("the water reminder", False),
    ("每天早上九點的垃圾郵件", True), ("垃圾郵件", False),
])
def test_mentions_time(words: str, time: bool) -> None:
    assert mentions_time(words) is time


@pytest.mark.parametrize(("sentence", "target", "name"), [
    ("rename the water reminder to Hydrate", "the water reminder", "Hydrate"),
    ("Rename “water” to “Drink Water” please", "water", "Drink Water"),
    ("change the name of the standup to Daily Standup", "the standup", "Daily Standup"),
    ("把吃藥提醒改名為晚上吃藥", "吃藥提醒", "晚上吃藥"),  # 晚上 is the name, not a time
    ("把吃药提醒改名为晚上吃药", "吃药提醒", "晚上吃药"),
    ("把 water 提醒改名為 drink water", "water 提醒", "drink water"),
])
def test_a_new_name_is_kept_as_written(sentence: str, target: str, name: str) -> None:
    intent = recognise(sentence, TZ)
    assert (intent.kind, intent.target, intent.name) == ("rename", target, name)


@pytest.mark.parametrize(("message", "number"), [
    ("2", 2), ("#2", 2), ("the second one", 2), ("second", 2), ("No. 3", 3), ("two", 2),
    ("the 2nd one please", 2), ("the last one", LAST), ("第二個", 2), ("第2个", 2), ("2號", 2),
    ("第十二個", 12), ("我要第三個", 3), ("第二個吧", 2), ("最後一個", LAST), ("最后一个", LAST),
    ("yes", None), ("喝水", None), ("delete the second reminder", None), ("第二", 2),
])
def test_which_one(message: str, number: int | None) -> None:
    assert which_one(message) == number


NOW = datetime(2026, 6, 22, 2, 0, tzinfo=UTC)  # Monday 10:00 in Taipei


@pytest.mark.parametrize(("words", "day"), [
    ("today", date(2026, 6, 22)), ("tonight", date(2026, 6, 22)),
    ("tomorrow", date(2026, 6, 23)), ("明天", date(2026, 6, 23)), ("後天", date(2026, 6, 24)),
    ("friday", date(2026, 6, 26)), ("this friday", date(2026, 6, 26)),
    ("monday", date(2026, 6, 22)), ("next monday", date(2026, 6, 29)),
    ("next friday", date(2026, 7, 3)), ("週五", date(2026, 6, 26)),
    ("下週五", date(2026, 7, 3)), ("星期日", date(2026, 6, 28)), ("the standup", None),
])
def test_day_named(words: str, day: date | None) -> None:
    assert day_named(words, NOW, TZ) == day
