"""From a task's words to its action: a news digest, a reminder, or (with a model) a prompt
when the words ask for something written or told. The sentence table of issue 20 runs through
the chat front door in tests/chat/test_choice_table.py."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from onthedot.actions import default_registry
from onthedot.actions.choice import (
    DEFAULT_TOPIC,
    Kind,
    action_of_kind,
    choose_action,
    read_news_request,
    topic_in,
)
from onthedot.config import Settings
from onthedot.domain.errors import ValidationError
from onthedot.nl import parse, render_confirmation
from onthedot.nl.parts import Language

NOW = datetime(2026, 6, 22, 2, 0, tzinfo=UTC)  # Monday 10:00 in Taipei

# text, expected kind, topic (news_digest), language
TABLE: list[tuple[str, Kind, str | None, Language]] = [
    # English: news requests
    ("summarize the financial news", "news_digest", "finance", "en"),
    ("remind me to read the news", "news_digest", DEFAULT_TOPIC, "en"),
    ("send me the tech headlines", "news_digest", "technology", "en"),
    ("world news", "news_digest", "world", "en"),
    ("headlines", "news_digest", DEFAULT_TOPIC, "en"),
    ("a digest of the business news", "news_digest", "finance", "en"),
    ("catch up on the latest technology news", "news_digest", "technology", "en"),
    ("summarize the news about the stock market", "news_digest", "finance", "en"),
    ("what's in the news today", "news_digest", DEFAULT_TOPIC, "en"),
    ("tell me the international headlines", "news_digest", "world", "en"),
    ("Finance and tech news, please", "news_digest", "finance", "en"),
    ("summarize today’s market news", "news_digest", "finance", "en"),
    # English: reminders, some mentioning news
    ("call mom", "message", None, "en"),
    ("email the news team", "message", None, "en"),
    ("write the newsletter", "message", None, "en"),
    ("read the newspaper", "message", None, "en"),
    ("tell John the news", "message", None, "en"),
    ("send the news to the team", "message", None, "en"),
    ("watch the news", "message", None, "en"),
    ("book the news conference room", "message", None, "en"),
    ("no news is good news", "message", None, "en"),
    ("summarize the news articles I saved", "message", None, "en"),
    ("read it", "message", None, "en"),
    ("check the stock prices", "message", None, "en"),
    # Traditional Chinese
    ("總結財經新聞", "news_digest", "finance", "zh-Hant"),
    ("幫我整理今天的國際新聞", "news_digest", "world", "zh-Hant"),
    ("國際新聞摘要", "news_digest", "world", "zh-Hant"),
    ("看新聞", "news_digest", DEFAULT_TOPIC, "zh-Hant"),
    ("科技資訊", "news_digest", "technology", "zh-Hant"),
    ("發財經新聞給我", "news_digest", "finance", "zh-Hant"),
    ("今天的頭條新聞", "news_digest", DEFAULT_TOPIC, "zh-Hant"),
    ("整理資訊科技新聞", "news_digest", "technology", "zh-Hant"),
    ("打電話給新聞部", "message", None, "zh-Hant"),
    ("寫新聞稿", "message", None, "zh-Hant"),
    ("看新聞聯播", "message", None, "zh-Hant"),
    ("回覆記者的消息", "message", None, "zh-Hant"),
    ("整理資訊", "message", None, "zh-Hant"),
    ("寄新聞給老闆", "message", None, "zh-Hant"),
    ("告訴媽媽這個新聞", "message", None, "zh-Hant"),
    ("繳電話費", "message", None, "zh-Hant"),
    # Simplified Chinese
    ("总结科技新闻", "news_digest", "technology", "zh-Hans"),
    ("帮我汇总财经和科技新闻", "news_digest", "finance", "zh-Hans"),
    ("给我国际新闻", "news_digest", "world", "zh-Hans"),
    ("财经资讯", "news_digest", "finance", "zh-Hans"),
    ("看一下最新的新闻", "news_digest", DEFAULT_TOPIC, "zh-Hans"),
    ("参加新闻发布会", "message", None, "zh-Hans"),
    ("给记者回个消息", "message", None, "zh-Hans"),
    ("去银行", "message", None, "zh-Hans"),
]


@pytest.mark.parametrize(("text", "kind", "topic", "language"), TABLE)
def test_without_a_model(text: str, kind: Kind, topic: str | None, language: Language) -> None:
    choice = choose_action(text, model_configured=False)
    assert (choice.kind, choice.topic, choice.language) == (kind, topic, language)
    if kind == "news_digest":
        assert choice.action == {"type": "news_digest", "topic": topic, "language": language}
    else:
        assert choice.action == {"type": "message", "text": text}


@pytest.mark.parametrize(("text", "kind", "topic", "language"), TABLE)
def test_with_a_model_the_choice_is_the_same(text: str, kind: Kind, topic: str | None,
                                             language: Language) -> None:
    """None of these asks for writing: a model changes nothing."""
    assert choose_action(text, model_configured=True) == choose_action(
        text, model_configured=False)


# task, the whole sentence (None: the task), kind without a model, kind with one
ONLY_A_MODEL: list[tuple[str, str | None, Kind, Kind]] = [
    ("write me a haiku", None, "message", "prompt"),
    ("tell me a joke", None, "message", "prompt"),
    ("suggest a recipe for dinner", None, "message", "prompt"),
    ("what should I cook tonight?", None, "message", "prompt"),
    ("寫一首詩", None, "message", "prompt"),
    ("給我一句名言", None, "message", "prompt"),
    ("一句名言", "每天早上八點給我一句名言", "message", "prompt"),  # 給我 taken off by the parser
    ("推荐一本书", None, "message", "prompt"),
    ("translate the top world news story into French", None, "news_digest", "prompt"),
    ("analyze this week's financial news", None, "news_digest", "prompt"),
    ("把國際新聞翻譯成法文", None, "news_digest", "prompt"),
    ("分析本周财经新闻", None, "news_digest", "prompt"),
    # Reminders stay reminders, even of writing: the sentence said "remind me".
    ("call mom", "remind me to call mom in 10 minutes", "message", "message"),
    ("write the weekly report", "every Friday at 4pm remind me to write the weekly report",
     "message", "message"),
    ("寫週報", "每週五下午四點提醒我寫週報", "message", "message"),
    ("叫我睡覺", None, "message", "message"),
    # An errand of the person's own is a reminder, with a model too.
    ("去健身房", None, "message", "message"),
    ("send the standup notes", None, "message", "message"),
    ("write the weekly report", None, "message", "message"),
]


@pytest.mark.parametrize(("text", "said", "without", "with_model"), ONLY_A_MODEL)
def test_what_only_a_model_can_do(text: str, said: str | None, without: Kind,
                                  with_model: Kind) -> None:
    assert choose_action(text, model_configured=False, said=said).kind == without
    chosen = choose_action(text, model_configured=True, said=said)
    assert chosen.kind == with_model
    if with_model == "prompt":
        assert chosen.action == {"type": "prompt", "prompt": text}


def test_offline_choices_are_valid_actions(tmp_path: Path) -> None:
    registry = default_registry(Settings(database_url=f"sqlite:///{tmp_path}/x.db"))
    for text, *_ in TABLE:
        registry.validate(choose_action(text, model_configured=False).action)


def test_language_given_and_timezone_tie() -> None:
    assert choose_action("財經新聞", model_configured=False, language="en").action == {
        "type": "news_digest", "topic": "finance", "language": "en"}
    # "新聞" alone is Traditional; "科技" is written alike in both scripts: the zone decides.
    assert choose_action("科技", model_configured=False, timezone="Asia/Taipei").language \
        == "zh-Hant"
    assert choose_action("科技", model_configured=False, timezone="Asia/Shanghai").language \
        == "zh-Hans"


def test_explicit_kind() -> None:
    assert action_of_kind("message", "總結財經新聞").action == {
        "type": "message", "text": "總結財經新聞"}
    assert action_of_kind("prompt", "call mom").action == {"type": "prompt",
                                                          "prompt": "call mom"}
    # A digest takes its topic from anywhere in the words, even without a news word ...
    assert action_of_kind("news_digest", "what happened on the stock market").topic == "finance"
    assert action_of_kind("news_digest", "headlines").topic == DEFAULT_TOPIC
    # ... and refuses words with neither a topic nor a news request.
    with pytest.raises(ValidationError) as refused:
        action_of_kind("news_digest", "call mom")
    assert refused.value.code == "unknown_topic"
    assert refused.value.field == "text"
    assert "finance" in (refused.value.expected or "")


def test_topic_and_request_readers() -> None:
    assert topic_in("read it to me") is None  # "it" is not information technology here
    assert topic_in("紀錄國際和財經") == "world"  # the first one in the text
    news = read_news_request("summarize the news about world affairs")
    assert news is not None
    assert news.topic == "world"
    assert read_news_request("newsletter") is None


# --- the confirmation says what each run does -------------------------------------------
@pytest.mark.parametrize(("sentence", "timezone", "model", "reply"), [
    ("每天早上八點幫我總結財經新聞", "Asia/Taipei", False,
     "好的，已排定：每天 08:00（Asia/Taipei）會為你整理財經新聞摘要，下次執行 2026-06-23 08:00。"),
    ("每天早上八点帮我总结科技新闻", "Asia/Shanghai", False,
     "好的，已安排：每天 08:00（Asia/Shanghai）会为你整理科技新闻摘要，"
     "下次执行 2026-06-23 08:00。"),
    ("every day at 8am summarize the financial news", "Asia/Taipei", False,
     "OK, scheduled a finance news digest every day at 08:00 (Asia/Taipei); "
     "next run 2026-06-23 08:00."),
    ("remind me to call mom at 5pm", "America/New_York", False,
     "OK, scheduled a reminder “call mom” for 2026-06-22 17:00 (America/New_York)."),
    ("明天下午三點提醒我打電話給新聞部", "Asia/Taipei", False,
     "好的，已排定：2026-06-23 15:00（Asia/Taipei）會提醒你「打電話給新聞部」。"),
    ("明天下午三点提醒我去银行", "Asia/Shanghai", False,
     "好的，已安排：2026-06-23 15:00（Asia/Shanghai）会提醒你「去银行」。"),
    ("every day at 8am write me a haiku", "Asia/Taipei", True,
     "OK, I will carry out “write me a haiku” every day at 08:00 (Asia/Taipei); "
     "next run 2026-06-23 08:00."),
    ("remind me to call mom at 5pm", "America/New_York", True,
     "OK, scheduled a reminder “call mom” for 2026-06-22 17:00 (America/New_York)."),
    ("每天早上八點幫我總結財經新聞", "Asia/Taipei", True,
     "好的，已排定：每天 08:00（Asia/Taipei）會為你整理財經新聞摘要，下次執行 2026-06-23 08:00。"),
    ("每天早上八点帮我写一首诗", "Asia/Shanghai", True,
     "好的，已安排：每天 08:00（Asia/Shanghai）会为你执行「写一首诗」，"
     "下次执行 2026-06-23 08:00。"),
    ("立刻幫我總結科技新聞", "Asia/Taipei", False, "好的，立即為你整理科技新聞摘要。"),
    ("立刻提醒我喝水", "Asia/Taipei", False, "好的，立即提醒你「喝水」。"),
    ("立刻帮我推荐一本书", "Asia/Shanghai", True, "好的，立即为你执行「推荐一本书」。"),
    ("now read the news", "UTC", False, "OK, preparing a world news digest now."),
    ("now stretch", "UTC", False, "OK, sending the reminder “stretch” now."),
    ("now tell me a joke", "UTC", True, "OK, carrying out “tell me a joke” now."),
])
def test_confirmation_says_what_runs_do(sentence: str, timezone: str, model: bool,
                                        reply: str) -> None:
    result = parse(sentence, now=NOW, timezone=timezone)
    choice = choose_action(result.task, model_configured=model, language=result.language,
                           said=sentence)
    assert render_confirmation(result, NOW, doing=choice.doing) == reply


@pytest.mark.parametrize(("sentence", "timezone", "notify", "reply"), [
    ("每天早上八點幫我總結財經新聞", "Asia/Taipei",
     [{"channel": "inbox"}, {"channel": "email", "to": "ann@example.com"}],
     "好的，已排定：每天 08:00（Asia/Taipei）會為你整理財經新聞摘要，寄到收件匣和 "
     "e-mail（ann@example.com），下次執行 2026-06-23 08:00。"),
    ("明天下午三点提醒我去银行", "Asia/Shanghai", [{"channel": "inbox"}],
     "好的，已安排：2026-06-23 15:00（Asia/Shanghai）会提醒你「去银行」，发到收件箱。"),
    ("now stretch", "UTC",
     [{"channel": "inbox"}, {"channel": "email", "to": "a@example.com"},
      {"channel": "webhook", "url": "https://hooks.example.com/x"}],
     "OK, sending the reminder “stretch” now, delivered to your inbox, e-mail to "
     "a@example.com and the webhook at hooks.example.com."),
    ("remind me to call mom at 5pm", "America/New_York", [],
     "OK, scheduled a reminder “call mom” for 2026-06-22 17:00 (America/New_York), delivered "
     "nowhere (the result stays in the task's runs)."),
])
def test_confirmation_says_where_results_go(sentence: str, timezone: str,
                                            notify: list[dict[str, str]], reply: str) -> None:
    result = parse(sentence, now=NOW, timezone=timezone)
    choice = choose_action(result.task, model_configured=False, language=result.language,
                           said=sentence)
    assert render_confirmation(result, NOW, doing=choice.doing, notify=notify) == reply
