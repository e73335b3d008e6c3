"""Where the person asked the result to go, said in the sentence: "… by email", "寄到我的信箱",
"发邮件给我", with an address or without ("… by email to ann@example.com").

``read_channels`` finds those words at the end of a task (or anywhere in a whole sentence) and
returns the task without them, so "summarize the financial news by email" is a digest of
financial news, not a reminder that ends in "by email". Only e-mail is read: the inbox is
always there, and a webhook has no words a person says. Words that send something to someone
else ("email the news team", "寄新聞給老闆") are the task itself and are left alone.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

# A plain address as the e-mail channel takes it (delivery.channels): one it would refuse is not
# read as an address, so the reply asks for one instead of failing the request.
_ADDRESS = (r"[A-Za-z0-9!#$%&'*+/=?^_`{|}~.-]+"
            r"@(?:[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?\.)+[A-Za-z]{2,63}\b")
_EN_MAIL = r"(?:e-?mail|mail)"
_EN_BOX = r"(?:e-?mail|mail(?:box)?)(?:\s+address)?"
# What is sent, then one space ("\s+(?:it)?\s*" was quadratic in a long run of spaces).
_EN_WHAT = r"(?:(?:it|them|this|that|the results?|the summary|the digest|everything)\s+)?"
_EN_CORE = (
    rf"(?:\b(?:and|then)\s+)?(?:"
    rf"\b(?:by|via|over|through|per|in an?)\s+{_EN_MAIL}(?:\s+(?:to|at)\s+(?:me\s+at\s+)?"
    rf"(?P<a1>{_ADDRESS}))?"
    rf"|\b(?:{_EN_MAIL}\s+{_EN_WHAT}to\s+(?:me|my\s+{_EN_BOX})"
    rf"|(?:send|forward|deliver)\s+{_EN_WHAT}to\s+(?:my\s+{_EN_BOX}|me\s+(?:by|via)\s+{_EN_MAIL}))"
    rf"(?:\s+(?:by|via)\s+{_EN_MAIL})?(?:\s+at\s+(?P<a2>{_ADDRESS}))?"
    # not "email bob@example.com" alone: that is an errand, the task itself
    rf"|\be-?mail\s+(?:me\s+at|(?:it|them)\s+to)\s+(?P<a3>{_ADDRESS})"
    rf"|\b(?:and|then)\s+e-?mail\s+me(?:\s+at\s+(?P<a4>{_ADDRESS}))?"
    rf")")
_ZH_MAIL = r"(?:電子郵件|电子邮件|電子信箱|电子信箱|電郵|电邮|郵件|邮件|信箱|郵箱|邮箱|e-?mail)"
_ZH_CORE = (
    rf"(?:並|并|然後|然后|再|和)?(?:"
    rf"(?:寄|發|发|傳|传|送)(?:到|至)(?:我的)?{_ZH_MAIL}(?:[\s:：]*(?P<a1>{_ADDRESS}))?"
    rf"|(?:用|透過|透过|通過|通过|以)?{_ZH_MAIL}(?:寄|發|发|傳|传|送)(?:給|给)我"
    rf"(?:[\s:：]*(?P<a2>{_ADDRESS}))?"
    rf"|(?:寄|發|发|傳|传|送)(?:一封)?{_ZH_MAIL}(?:給|给|到)我(?:的{_ZH_MAIL})?"
    rf"(?:[\s:：]*(?P<a3>{_ADDRESS}))?"
    rf")")
# At the end of a task (stripped from it), and anywhere in a sentence (only read).
_AT_END = (re.compile(_EN_CORE + r"[\s.!]*$", re.IGNORECASE),
           re.compile(_ZH_CORE + r"[\s。！!]*$", re.IGNORECASE))
_ANYWHERE = (re.compile(_EN_CORE, re.IGNORECASE), re.compile(_ZH_CORE, re.IGNORECASE))


_SEPARATORS = " \t\n,，、;；"


@dataclass(frozen=True)
class AskedChannels:
    email: bool  # the words ask for the result by e-mail
    address: str | None  # the address they give, if any
    text: str  # the words without the e-mail request


def read_channels(text: str) -> AskedChannels:
    """The e-mail request at the end of ``text`` (a task, or a sentence whose time comes
    first); the text unchanged and ``email`` false when there is none."""
    folded = unicodedata.normalize("NFKC", text)
    for pattern in _AT_END:
        found = pattern.search(folded)
        if found is not None and found.start() > 0:
            address = next((a for a in found.groups() if a), None)
            return AskedChannels(True, address, folded[:found.start()].rstrip(_SEPARATORS))
    return AskedChannels(False, None, text)


def asks_for_email(sentence: str) -> AskedChannels:
    """The e-mail request anywhere in a whole sentence ("summarize the news by email every day
    at 8am"); ``text`` is the sentence unchanged."""
    folded = unicodedata.normalize("NFKC", sentence)
    for pattern in _ANYWHERE:
        found = pattern.search(folded)
        if found is not None:
            return AskedChannels(True, next((a for a in found.groups() if a), None), sentence)
    return AskedChannels(False, None, sentence)
