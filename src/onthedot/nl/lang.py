"""Which language, and which Chinese script, a request was written in."""

from __future__ import annotations

import re

from onthedot.nl.parts import Language

# Characters that differ between the scripts, as (Traditional, Simplified) pairs.
_PAIRS = (
    "點点 週周 個个 號号 後后 時时 鐘钟 禮礼 幫帮 請请 們们 這这 間间 與与 會会 開开 報报 總总 "
    "結结 財财 經经 聞闻 讀读 發发 電电 話话 記记 來来 過过 還还 對对 說说 從从 頭头 傳传 給给 "
    "讓让 買买 賣卖 單单 歲岁 達达 運运 動动 氣气 溫温 環环 線线 車车 應应 資资 訊讯 議议 準准 "
    "備备 隊队 級级 檢检 錢钱 銀银 寫写 認认 體体 醫医 藥药 療疗 學学 習习 種种 藝艺 術术 東东 "
    "樂乐 聽听 寶宝 貝贝 據据 壓压 兩两 嗎吗 麼么 煩烦 幾几 價价 見见 覺觉 歷历 屆届 晝昼 鬧闹 "
    "際际 萬万 億亿 爲为 為为 嗎吗 隻只 數数 據据 郵邮 節节 曆历 鍛锻 煉炼 澆浇 補补 習习 喚唤"
)
_HANT = {pair[0] for pair in _PAIRS.split()}
_HANS = {pair[1] for pair in _PAIRS.split()}
_CJK = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]")
_TRADITIONAL_ZONES = {"Asia/Taipei", "Asia/Hong_Kong", "Asia/Macau", "Asia/Macao", "ROC"}


def has_cjk(text: str) -> bool:
    return bool(_CJK.search(text))


def detect(text: str, timezone: str = "UTC") -> Language:
    """English unless the text has CJK; then the script with more distinctive characters, the
    user's timezone breaking a tie (Taipei, Hong Kong, Macau write Traditional)."""
    if not has_cjk(text):
        return "en"
    hant = sum(ch in _HANT for ch in text)
    hans = sum(ch in _HANS for ch in text)
    if hant != hans:
        return "zh-Hant" if hant > hans else "zh-Hans"
    return "zh-Hant" if timezone in _TRADITIONAL_ZONES else "zh-Hans"


def normalise_language(language: str | None, fallback: Language) -> Language:
    """Accept en, zh, zh-TW, zh-HK, zh-Hant, zh-CN, zh-Hans ...; anything else is the fallback."""
    if not language:
        return fallback
    code = language.replace("_", "-").lower()
    if code.startswith("en"):
        return "en"
    if code in ("zh-hant", "zh-tw", "zh-hk", "zh-mo") or code.startswith("zh-hant"):
        return "zh-Hant"
    if code in ("zh-hans", "zh-cn", "zh-sg") or code.startswith("zh-hans"):
        return "zh-Hans"
    if code == "zh":
        return fallback if fallback != "en" else "zh-Hans"
    return fallback
