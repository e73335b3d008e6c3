"""Where a task made from a chat sentence sends its results.

Every task's results go to the person's inbox. "… by email" (寄到信箱, 发邮件给我) adds an
e-mail channel when this server can send e-mail (``ONTHEDOT_SMTP_URL`` and
``ONTHEDOT_SMTP_FROM``) and the sentence gives the address ("… by email to ann@example.com").
The server keeps no address book: an address typed for another task may be someone else's, so
it is never reused. When e-mail cannot be honoured, the task gets the inbox only and the reply
says so and why, instead of dropping the words silently.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from onthedot.config import Settings
from onthedot.delivery.channels import smtp_missing
from onthedot.domain.models import default_notify
from onthedot.nl.channels import AskedChannels
from onthedot.nl.parts import Language

_NO_SMTP: dict[Language, str] = {
    "en": " E-mail is not available on this server, so the result will be in your inbox.",
    "zh-Hant": "這台伺服器無法寄 e-mail，所以結果會在收件匣。",
    "zh-Hans": "这台服务器无法发送 e-mail，所以结果会在收件箱。",
}
_NO_ADDRESS: dict[Language, str] = {
    "en": " I do not know your e-mail address, so the result will be in your inbox; to have "
          "it e-mailed, give the address in the sentence (“… by email to you@example.com”).",
    "zh-Hant": "我不知道你的 e-mail 地址，所以結果會在收件匣；要寄 e-mail，請在句子裡寫上地址"
               "（例如「……寄到信箱 you@example.com」）。",
    "zh-Hans": "我不知道你的 e-mail 地址，所以结果会在收件箱；要发 e-mail，请在句子里写上地址"
               "（例如“……发到邮箱 you@example.com”）。",
}


@dataclass(frozen=True)
class Where:
    notify: list[dict[str, Any]]  # the task's channels
    note: str = ""  # said after the confirmation when e-mail was asked for and cannot be sent


def where_results_go(asked: AskedChannels, settings: Settings, language: Language) -> Where:
    """The channels for what the sentence asked (see the module docstring)."""
    if not asked.email:
        return Where(default_notify())
    if smtp_missing(settings) is not None:
        return Where(default_notify(), _NO_SMTP[language])
    if asked.address is None:
        return Where(default_notify(), _NO_ADDRESS[language])
    return Where([*default_notify(), {"channel": "email", "to": asked.address}])
