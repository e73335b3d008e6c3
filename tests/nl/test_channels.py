"""E-mail words in a task or a sentence ("… by email", 寄到我的信箱, 发邮件给我): found, taken out
of the task, their address kept; words that send something to someone else are the task; the
reading is bounded by the input."""

from __future__ import annotations

import time

import pytest

from onthedot.actions.choice import choose_action
from onthedot.nl.channels import asks_for_email, read_channels

QUICK = 2.0  # seconds; the work takes milliseconds, the rest is slack for a loaded machine
ADDRESS = "ann@example.com"


@pytest.mark.parametrize(("task", "rest", "address"), [
    ("summarize the financial news by email", "summarize the financial news", None),
    ("summarize the financial news via e-mail.", "summarize the financial news", None),
    (f"send me the tech headlines by email to {ADDRESS}", "send me the tech headlines",
     ADDRESS),
    ("write me a haiku and email it to me", "write me a haiku", None),
    ("tell me a joke and send it to my email", "tell me a joke", None),
    ("summarize the news and send it to me by email", "summarize the news", None),
    (f"summarize the news, email me at {ADDRESS}", "summarize the news", ADDRESS),
    (f"summarize the news and email it to {ADDRESS}", "summarize the news", ADDRESS),
    ("summarize the news and email me", "summarize the news", None),
    ("整理財經新聞寄到我的信箱", "整理財經新聞", None),
    ("整理財經新聞，用email寄給我", "整理財經新聞", None),
    (f"整理科技新聞寄到信箱 {ADDRESS}", "整理科技新聞", ADDRESS),
    ("整理财经新闻发邮件给我", "整理财经新闻", None),
    (f"总结科技新闻并发到邮箱：{ADDRESS}", "总结科技新闻", ADDRESS),
    ("写一首诗，发到我的邮箱", "写一首诗", None),
])
def test_email_words_are_where_not_what(task: str, rest: str, address: str | None) -> None:
    found = read_channels(task)
    assert (found.email, found.text, found.address) == (True, rest, address)
    assert asks_for_email(f"every day at 8am {task}").email


@pytest.mark.parametrize("task", [
    "email the news team",  # an errand: the e-mail is the task
    f"email {ADDRESS}",
    "read my email",
    "check email",
    "summarize the news and send it to me",  # to the person, but not said to be by e-mail
    "寄新聞給老闆",
    f"把合約寄到 {ADDRESS}",
    "回覆郵件",
    "by email",  # nothing left to do
])
def test_other_words_stay_the_task(task: str) -> None:
    found = read_channels(task)
    assert (found.email, found.text, found.address) == (False, task, None)


def test_an_address_the_e_mail_channel_would_refuse_is_not_read() -> None:
    found = asks_for_email("summarize the news by email to ann@-x.com")
    assert (found.email, found.address) == (True, None)  # the reply asks for an address


def test_the_words_may_come_before_the_time_in_a_sentence() -> None:
    found = asks_for_email(f"remind me to pay rent by email to {ADDRESS} tomorrow at 9am")
    assert (found.email, found.address) == (True, ADDRESS)
    assert not asks_for_email("tomorrow at 9am email the news team").email


@pytest.mark.parametrize("text", [
    "send" + " " * 3990 + "x",
    "a by" + " " * 3990 + "x",
    "and " * 1000,
    "寄到" + " " * 3990 + "x",
    "email " + "a" * 3990,
    "by email to " + "a." * 1990 + "!",
    "x" + " ," * 1990 + "by email",
    "what" + " " * 3990,
    "寫" * 4000,
])
def test_a_long_message_is_read_quickly(text: str) -> None:
    began = time.perf_counter()
    read_channels(text)
    asks_for_email(text)
    choose_action(text, model_configured=True, said=text)
    assert time.perf_counter() - began < QUICK
