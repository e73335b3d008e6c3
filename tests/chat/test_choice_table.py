"""Issue 20 §3: the action people meant, said back to them, through ``POST /v1/chat``.

One table of sentences in English, Traditional and Simplified Chinese, each run without a model
(the offline parser decides) and with one (a fake model speaking the OpenAI protocol splits the
sentence into `when` and `task` as a model would, and calls create_task). For each sentence:
the action's kind, the task's channels, and a reply that names the action and the channels.

A reminder is a reminder and a news request a digest either way; only what a model alone can
do (writing, more than a digest) differs: a prompt with a model, a reminder or a digest without.
"... by email" adds an e-mail channel when the server sends e-mail and the sentence gives the
address; otherwise the reply says where the result will be.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from onthedot import nl
from onthedot.actions.choice import Kind
from tests.chat.conftest import START, chat_client
from tests.support.fake_openai import fake_openai, say, tool_call, tool_results

ADDRESS = "ann@example.com"
SMTP = {"smtp_url": "smtp://127.0.0.1:2525", "smtp_from": "onthedot@example.com"}


@dataclass(frozen=True)
class Row:
    sentence: str
    timezone: str
    without: Kind  # the action's kind without a model
    with_model: Kind  # ... and with one
    topic: str | None = None  # news_digest: the topic's word in the reply
    email: bool = False  # asks for the result by e-mail
    address: bool = False  # ... and gives the address


TW, CN, NY = "Asia/Taipei", "Asia/Shanghai", "America/New_York"
TABLE: dict[str, list[Row]] = {
    "en": [
        # reminders (with a model too: the model is not asked to "carry out" "call mom")
        Row("remind me to call mom in 10 minutes", NY, "message", "message"),
        Row("every day at 9pm remind me to take my pills", NY, "message", "message"),
        Row("tomorrow at 3pm don't let me forget the dentist", NY, "message", "message"),
        Row("every Friday at 4pm remind me to write the weekly report", NY, "message",
            "message"),
        Row("every Monday at 9am send the standup notes", NY, "message", "message"),
        Row("tomorrow at 9am email the news team", NY, "message", "message"),
        # news requests
        Row("every day at 8am summarize the financial news", NY, "news_digest", "news_digest",
            "finance"),
        Row("every weekday at 7am send me the tech headlines", NY, "news_digest",
            "news_digest", "technology"),
        Row("every morning at 7 read the news", NY, "news_digest", "news_digest", "world"),
        Row("every day at 6pm give me the world headlines", NY, "news_digest", "news_digest",
            "world"),
        # news requests a digest cannot do
        Row("every day at 8am translate the top world news story into French", NY,
            "news_digest", "prompt", "world"),
        Row("every Friday at 5pm analyze this week's financial news", NY, "news_digest",
            "prompt", "finance"),
        # something written or told: only a model does it
        Row("every morning at 7 write me a haiku", NY, "message", "prompt"),
        Row("every day at noon tell me a joke", NY, "message", "prompt"),
        Row("every Sunday at 8pm suggest a recipe for the week", NY, "message", "prompt"),
        # by e-mail
        Row("every day at 8am summarize the financial news by email", NY, "news_digest",
            "news_digest", "finance", email=True),
        Row("every morning at 7 write me a haiku and email it to me", NY, "message", "prompt",
            email=True),
        Row(f"every day at 8am send me the tech headlines by email to {ADDRESS}", NY,
            "news_digest", "news_digest", "technology", email=True, address=True),
        Row("remind me to pay rent tomorrow at 9am by email", NY, "message", "message",
            email=True),
    ],
    "zh-Hant": [
        Row("10分鐘後提醒我打電話給媽媽", TW, "message", "message"),
        Row("每天晚上九點提醒我吃藥", TW, "message", "message"),
        Row("明天下午三點記得去看牙醫", TW, "message", "message"),
        Row("每天晚上十點叫我睡覺", TW, "message", "message"),
        Row("每週五下午四點提醒我寫週報", TW, "message", "message"),
        Row("每週一早上九點寄週報給老闆", TW, "message", "message"),
        Row("明天早上九點打電話給新聞部", TW, "message", "message"),
        Row("每天早上八點幫我總結財經新聞", TW, "news_digest", "news_digest", "財經"),
        Row("每個工作日早上七點給我科技新聞", TW, "news_digest", "news_digest", "科技"),
        Row("每天早上七點看新聞", TW, "news_digest", "news_digest", "國際"),
        Row("每天晚上六點整理國際頭條", TW, "news_digest", "news_digest", "國際"),
        Row("每天早上八點把國際新聞翻譯成法文", TW, "news_digest", "prompt", "國際"),
        Row("每週五下午五點分析本週財經新聞", TW, "news_digest", "prompt", "財經"),
        Row("每天早上七點寫一首俳句給我", TW, "message", "prompt"),
        Row("每天中午給我講個笑話", TW, "message", "prompt"),
        Row("每週日晚上八點推薦一道菜", TW, "message", "prompt"),
        Row("每天早上八點整理財經新聞寄到我的信箱", TW, "news_digest", "news_digest", "財經",
            email=True),
        Row("每天早上七點寫一首詩，用email寄給我", TW, "message", "prompt", email=True),
        Row(f"每天早上八點整理科技新聞寄到信箱 {ADDRESS}", TW, "news_digest", "news_digest",
            "科技", email=True, address=True),
    ],
    "zh-Hans": [
        Row("10分钟后提醒我给妈妈打电话", CN, "message", "message"),
        Row("每天晚上九点提醒我吃药", CN, "message", "message"),
        Row("明天下午三点记得去看牙医", CN, "message", "message"),
        Row("每天晚上十点叫我睡觉", CN, "message", "message"),
        Row("每周一早上九点把周报发给老板", CN, "message", "message"),
        Row("明天早上九点参加新闻发布会", CN, "message", "message"),
        Row("每天早上八点帮我总结财经新闻", CN, "news_digest", "news_digest", "财经"),
        Row("每个工作日早上七点给我科技新闻", CN, "news_digest", "news_digest", "科技"),
        Row("每天早上七点看新闻", CN, "news_digest", "news_digest", "国际"),
        Row("每天晚上六点整理国际头条", CN, "news_digest", "news_digest", "国际"),
        Row("每天早上八点把国际新闻翻译成英文", CN, "news_digest", "prompt", "国际"),
        Row("每周五下午五点分析本周财经新闻", CN, "news_digest", "prompt", "财经"),
        Row("每天早上七点写一首诗给我", CN, "message", "prompt"),
        Row("每天中午给我讲个笑话", CN, "message", "prompt"),
        Row("每周日晚上八点推荐一道菜", CN, "message", "prompt"),
        Row("每天早上八点整理财经新闻发邮件给我", CN, "news_digest", "news_digest", "财经",
            email=True),
        Row("每天早上七点写一首诗，发到我的邮箱", CN, "message", "prompt", email=True),
        Row(f"每天早上八点总结科技新闻发到邮箱 {ADDRESS}", CN, "news_digest", "news_digest",
            "科技", email=True, address=True),
    ],
}

# What the reply must say, per language: each kind of action, and where the results go.
DOING: dict[str, dict[str, str]] = {
    "en": {"news_digest": "{topic} news digest", "message": "a reminder “{text}”",
           "prompt": "I will carry out “{text}”"},
    "zh-Hant": {"news_digest": "{topic}新聞摘要", "message": "會提醒你「{text}」",
                "prompt": "會為你執行「{text}」"},
    "zh-Hans": {"news_digest": "{topic}新闻摘要", "message": "会提醒你「{text}」",
                "prompt": "会为你执行「{text}」"},
}
INBOX = {"en": ", delivered to your inbox", "zh-Hant": "，寄到收件匣", "zh-Hans": "，发到收件箱"}
WITH_EMAIL = {"en": f", delivered to your inbox and e-mail to {ADDRESS}",
              "zh-Hant": f"，寄到收件匣和 e-mail（{ADDRESS}）",
              "zh-Hans": f"，发到收件箱和 e-mail（{ADDRESS}）"}
NO_SMTP = {"en": "E-mail is not available on this server, so the result will be in your inbox.",
           "zh-Hant": "這台伺服器無法寄 e-mail，所以結果會在收件匣。",
           "zh-Hans": "这台服务器无法发送 e-mail，所以结果会在收件箱。"}
NO_ADDRESS = {"en": "I do not know your e-mail address", "zh-Hant": "我不知道你的 e-mail 地址",
              "zh-Hans": "我不知道你的 e-mail 地址"}


def splits_like_a_model(body: dict[str, Any]) -> dict[str, Any]:
    """Turn 1: create_task with the time words as `when` and the rest as `task` (read here by
    the offline parser, as a model would split it: "remind me to" dropped, "by email" kept).
    Turn 2: an answer of the model's own, which names neither action nor channels."""
    if tool_results(body):
        return say("Done!")
    sentence = body["messages"][1]["content"]
    parsed = nl.parse(sentence, now=START, timezone="UTC")
    return tool_call("call_1", "create_task", {"when": parsed.matched, "task": parsed.task})


def expected_reply_parts(row: Row, language: str, kind: Kind, action: dict[str, Any],
                         smtp: bool) -> list[str]:
    text = action.get("text") or action.get("prompt") or ""
    parts = [DOING[language][kind].format(text=text, topic=row.topic)]
    if row.email and smtp and row.address:
        parts.append(WITH_EMAIL[language])
    else:
        parts.append(INBOX[language])
        if row.email:
            parts.append(NO_ADDRESS[language] if smtp else NO_SMTP[language])
    return parts


def expected_notify(row: Row, smtp: bool) -> list[dict[str, str]]:
    if row.email and smtp and row.address:
        return [{"channel": "inbox"}, {"channel": "email", "to": ADDRESS}]
    return [{"channel": "inbox"}]


@pytest.mark.parametrize("smtp", [False, True], ids=["no-smtp", "smtp"])
@pytest.mark.parametrize("model", [False, True], ids=["parser", "model"])
@pytest.mark.parametrize("language", list(TABLE))
async def test_sentence_table(db_url: str, language: str, model: bool, smtp: bool) -> None:
    # With e-mail configured, only the rows that ask for it read differently.
    rows = [row for row in TABLE[language] if row.email or not smtp]
    with fake_openai(splits_like_a_model) as fake:
        settings: dict[str, Any] = dict(SMTP) if smtp else {}
        if model:
            settings |= {"llm_base_url": fake.url, "llm_model": "test-model"}
        async with chat_client(db_url, **settings) as client:
            wrong: list[str] = []
            for row in rows:
                response = await client.post("/v1/chat", json={"message": row.sentence,
                                                               "timezone": row.timezone})
                assert response.status_code == 200, (row.sentence, response.text)
                body = response.json()
                wrong += check(row, language, model, smtp, body)
    assert wrong == []
    assert len(fake.requests) == (2 * len(rows) if model else 0)


def check(row: Row, language: str, model: bool, smtp: bool, body: dict[str, Any]) -> list[str]:
    """What is wrong with the answer to ``row``, as readable lines."""
    kind = row.with_model if model else row.without
    if len(body["jobs"]) != 1:
        return [f"{row.sentence}: {len(body['jobs'])} jobs created"]
    [job] = body["jobs"]
    wrong = []
    if job["action"]["type"] != kind:
        wrong.append(f"{row.sentence}: {job['action']['type']}, not {kind}")
    if job["notify"] != expected_notify(row, smtp):
        wrong.append(f"{row.sentence}: channels {job['notify']}")
    words = job["action"].get("text") or job["action"].get("prompt") or ""
    if row.email and any(w in words for w in ("email", "信箱", "邮箱", "邮件", "@")):
        wrong.append(f"{row.sentence}: the e-mail words stayed in the task")
    for part in expected_reply_parts(row, language, kind, job["action"], smtp):
        if part not in body["reply"]:
            wrong.append(f"{row.sentence}: reply {body['reply']!r} lacks {part!r}")
    return wrong
