"""``build_stories``: the same news from two outlets (different headlines, different words) is one
story naming both, in English, Traditional and Simplified Chinese; stories carried by more
sources come first; each is summarised in a few of its articles' own sentences, within the
budget, keeping the key facts of the opening; and without any text a story is its title."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from onthedot.actions.feeds import NewsItem
from onthedot.actions.stories import MAX_SENTENCES, SUMMARY_WIDTH, _width, build_stories

NOW = datetime(2026, 6, 22, 8, 0, tzinfo=UTC)
HOUR = timedelta(hours=1)

# (title, source, article text) for: the story in one outlet, the same in another, an unrelated
# story; and the facts the summary must keep.
CASES = {
    "en": (
        ("Fed leaves rates unchanged, signals patience", "The Daily Ledger",
         "Share on X  Copy link\n"
         "The Federal Reserve held its benchmark interest rate at 4.25% on Monday, the third "
         "meeting in a row without a change.\n"
         "Fed Chair Maria Delgado said the committee saw no urgency to cut rates, but did not "
         "rule out a move in September.\n"
         "Stocks rose after the decision, with the S&P 500 closing up 0.7%."),
        ("Central bank holds at 4.25% as two officials dissent", "Market Wire",
         "The Federal Reserve kept rates at 4.25%, but two policymakers voted for an immediate "
         "cut.\nChair Maria Delgado said a reduction in September remains possible."),
        ("Coastal Air agrees to buy Summit Airways", "Market Wire",
         "Coastal Air has agreed to buy rival Summit Airways for $2.3 billion in cash.\n"
         "The deal is expected to close in 2027."),
        ["4.25%", "Maria Delgado", "September"],
    ),
    "zh-Hant": (
        ("晶準半導體上調全年展望 第二季營收創新高", "台灣財經時報",
         "分享到 Facebook　分享到 LINE\n"
         "晶準半導體今天公布第二季財報，單季營收達新台幣 1,280 億元，較去年同期成長 31%。\n"
         "董事長陳志遠表示，人工智慧伺服器晶片需求強勁，全年營收成長目標上調至 25%。\n"
         "晶準半導體股價今天收在 845 元，上漲 2.4%。"),
        ("AI 需求帶動 晶準第二季營收年增三成", "中央快訊網",
         "受惠人工智慧晶片需求，晶準半導體第二季營收新台幣 1,280 億元，年增 31%。\n"
         "晶準並計畫在高雄設立新的先進封裝廠，預計 2028 年開始量產。"),
        ("央行理監事會決議利率維持不變", "台灣財經時報",
         "中央銀行今天召開理監事會，決議重貼現率維持在 2% 不變。"),
        ["1,280 億元", "31%"],
    ),
    "zh-Hans": (
        ("人民银行宣布降准0.5个百分点", "华夏财经日报",
         "人民银行今天宣布，自6月28日起下调金融机构存款准备金率0.5个百分点，预计释放长期资金约1万亿元。\n"
         "副行长周立明表示，此次降准旨在保持流动性合理充裕。"),
        ("央行降准落地 6月28日起实施", "新科技快讯",
         "人民银行宣布将于6月28日下调存款准备金率0.5个百分点，此次降准将释放长期资金约1万亿元。\n"
         "分析人士称，降准有望缓解季末资金面压力。"),
        ("星耀科技发布新旗舰手机", "新科技快讯",
         "星耀科技今天在深圳发布新一代旗舰手机X9，起售价4999元，将于7月1日正式开售。"),
        ["0.5个百分点", "1万亿元", "6月28日"],
    ),
}


def item(title: str, source: str, published: datetime | None, summary: str = "") -> NewsItem:
    link = f"https://{abs(hash(title))}.example/a"
    return NewsItem(title=title, link=link, source=source, published=published,
                    feed_url=f"https://{source}.example/feed", key=link, summary=summary)


@pytest.mark.parametrize("language", list(CASES))
def test_the_same_story_from_two_outlets_is_one_story_naming_both(language: str) -> None:
    one, two, other, facts = CASES[language]
    # The unrelated story is the newest: being carried by two outlets still ranks first.
    items = [item(other[0], other[1], NOW - HOUR), item(two[0], two[1], NOW - 2 * HOUR),
             item(one[0], one[1], NOW - 3 * HOUR)]
    texts = {items[0].link: other[2], items[1].link: two[2], items[2].link: one[2]}

    stories = build_stories(items, texts)

    assert [s.sources for s in stories] == [[two[1], one[1]], [other[1]]]
    top = stories[0]
    assert top.title == two[0]  # the newest sighting's headline
    summary = "".join(top.sentences)
    for fact in facts:
        assert fact in summary, (fact, summary)
    assert 1 <= len(top.sentences) <= MAX_SENTENCES
    assert sum(_width(s) for s in top.sentences) <= SUMMARY_WIDTH
    every_line = (one[2] + "\n" + two[2]).splitlines()
    for sentence in top.sentences:
        # The articles' own words, never a share button or a caption.
        assert any(sentence in line for line in every_line)
        assert "分享" not in sentence
        assert "Share on" not in sentence


def test_a_repeated_sentence_is_told_once() -> None:
    lead = "The Federal Reserve held its benchmark interest rate at 4.25% on Monday."
    items = [item("Fed holds rates", "A", NOW - HOUR), item("Fed keeps rates at 4.25%", "B",
                                                             NOW - 2 * HOUR)]
    texts = {items[0].link: lead + "\nOfficials meet again in September.",
             items[1].link: lead + "\nTwo members dissented."}
    [story] = build_stories(items, texts)
    assert story.sources == ["A", "B"]
    assert sum(s == lead for s in story.sentences) == 1


def test_without_a_page_the_feed_description_is_used_and_without_either_the_title() -> None:
    described = item("Rates unchanged", "A", NOW - HOUR,
                     summary="The central bank left its rate at 2% for a third meeting.")
    bare = item("Markets close higher", "B", NOW - 2 * HOUR)
    undated = item("Undated story from a broken feed", "C", None)
    stories = build_stories([described, bare, undated], {})
    assert [(s.title, s.sentences) for s in stories] == [
        ("Rates unchanged", ("The central bank left its rate at 2% for a third meeting.",)),
        ("Markets close higher", ()),
        ("Undated story from a broken feed", ())]


def test_short_titles_alone_are_not_merged() -> None:
    stories = build_stories([item("biz 0", "A", NOW), item("tech 0", "B", NOW - HOUR)], {})
    assert [s.sources for s in stories] == [["A"], ["B"]]
