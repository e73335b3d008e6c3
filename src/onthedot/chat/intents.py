"""What a chat message asks for: a new task, or something done to one the user already has.

``recognise(message)`` is pure and offline, and reads English, Traditional and Simplified
Chinese. It answers an ``Intent``: its kind, the words that name the task (``target``) and, to
change a time, the words of the new time (``when``, read later by ``onthedot.nl``).

The rule that keeps "每天提醒我刪除垃圾郵件" a new reminder while "刪除每週的運動提醒" deletes
one: a request to manage a task **starts** with what to do (after "please", "請", "幫我" …), or, in
Chinese, puts the task first and the verb last ("把運動提醒刪掉", "喝水提醒暫停"). A sentence that
starts with a time, or says "remind me" (提醒我, 叫我 …) before the verb, is a new task whose text
happens to hold the verb. Verbs that are also everyday tasks ("turn off the lights", "打開窗戶",
"clear the cache") count only when the words name a task ("reminder", "提醒", "it", "那個" …).

Misreading a new task as a request to manage one costs a question; the reverse would change or
create something nobody asked for, so where the two are close this module leans to managing
(the front door then finds no such task, says so and changes nothing).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from onthedot.nl.lang import detect, has_cjk
from onthedot.nl.parts import Language
from onthedot.nl.scan import Tail

IntentKind = Literal["create", "list", "pause", "resume", "delete", "run_now", "change_time",
                     "last_result", "rename", "next", "skip_next"]
INTENTS: tuple[IntentKind, ...] = ("create", "list", "pause", "resume", "delete", "run_now",
                                   "change_time", "last_result", "rename", "next", "skip_next")
_QUOTES = " ,，、:：'\"「」“”『』"


@dataclass(frozen=True)
class Intent:
    kind: IntentKind
    target: str = ""  # the words naming the task, as said ("每週的運動提醒", "the backup task")
    # change_time: the new time, as said ("每天晚上十點", "7am"); skip_next: the day the
    # skipped run was named by, if any ("tomorrow", "明天")
    when: str | None = None
    language: Language = "en"
    name: str | None = None  # rename: the new name, as written


def recognise(message: str, timezone: str = "UTC") -> Intent:
    """The intent of one chat message; ``create`` when it asks for nothing else."""
    language = detect(message, timezone)
    text = _tidy(message)
    renamed = _rename(text)
    if renamed is not None:  # before a change of time: "改名為晚上吃藥" holds a time
        target, name = renamed
        return Intent(kind="rename", target=target.strip(_QUOTES), language=language,
                      name=name)
    found = _chinese(text) if has_cjk(text) else _CREATE
    if found == _CREATE and re.search(r"[A-Za-z]", text):  # also "pause the 喝水 reminder"
        found = _english(text.lower())
    kind, target, when = found
    return Intent(kind=kind, target=target.strip(_QUOTES), when=when, language=language)


# --- shared -------------------------------------------------------------------------------
_Found = tuple[IntentKind, str, str | None]
_CREATE: _Found = ("create", "", None)


def _tidy(message: str) -> str:
    text = message.replace("’", "'").replace("‘", "'")
    text = " ".join(text.split())
    return text.strip().rstrip("。.!！?？~～…")


def _full(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern, re.DOTALL)


# --- English ------------------------------------------------------------------------------
_EN_POLITE = re.compile(
    r"^(?:(?:please|pls|kindly|ok|okay|hey|hi|so|and|also|then|just|now|oh)\b[,\s]*"
    r"|(?:can|could|would|will) you(?: please)?\s+"
    r"|i(?:'d| would) like(?: you)? to\s+|i (?:want|need)(?: you)? to\s+"
    r"|let's\s+|go ahead and\s+|help me(?: to)?\s+)+")
# Polite words after the request, each after a comma or space. Stripped by walking back from
# the end (_strip_en_tail): the regex "(?:[,\s]+(?:please|...))+$" was tried at every position
# of a long run of commas or spaces, quadratic in it.
_EN_TAIL_WORDS = ("now please", "thank you", "for me", "please", "thanks", "thx")
_EN_TASK_NOUN = re.compile(
    r"\b(?:reminders?|tasks?|jobs?|digests?|alarms?|notifications?|schedules?|summary|"
    r"summaries|briefings?|it|that|this|them|those|these|one)\b")
_EN_NEW = re.compile(r"^(?:a|an|another|some|new|one more)\b")
_EN_NOW = r"(?:now|right now|right away|immediately|at once|again|one more time|once more)"
_EN_TIME = re.compile(
    r"\b(?:at \d|\d{1,2}(?::\d\d)?\s*(?:am|pm|a\.m\.|p\.m\.)|\d{1,2}:\d\d|noon|midnight|"
    r"every|each|daily|weekly|monthly|yearly|annually|hourly|weekdays?|weekends?|tomorrow|"
    r"tonight|today|morning|evening|afternoon|night|(?:mon|tues|wednes|thurs|fri|satur|sun)"
    r"days?|in (?:\d+|an?|half an|a few) (?:seconds?|minutes?|mins?|hours?|hrs?|days?|weeks?|"
    r"months?)|next (?:week|month|year|mon|tue|wed|thu|fri|sat|sun)|\d+(?:st|nd|rd|th)|"
    r"o'clock|half past|quarter (?:past|to))\b")

_EN_LIST = [_full(p) for p in (
    r"(?:what|which) (?:tasks|reminders|jobs|schedules|things)(?: do i have| have i got| are "
    r"there| are scheduled| are set up| are running| are active| did i set(?: up)?)?"
    r"(?: (?:scheduled|set up|running|now|right now|at the moment|so far))?",
    r"what(?:'s| is| do i have| have i got| did i) (?:scheduled|on my (?:schedule|list)|"
    r"planned|set up|coming up)",
    r"(?:list|show|display|give|tell|see)(?: me)?(?: all)?(?: of)?(?: my| the)? (?:tasks|"
    r"reminders|jobs|schedule|scheduled tasks|scheduled jobs)",
    r"(?:my|all my|all of my) (?:tasks|reminders|jobs)",
    r"do i have any (?:tasks|reminders|jobs)(?: scheduled| set up)?",
)]
_EN_LAST = [_full(p) for p in (
    r"(?:show|give|tell|get)(?: me)? (?:the )?(?:last|latest|most recent|previous) (?:result|"
    r"output|run|answer|summary)s? (?:of|from|for) (?P<t>.+)",
    r"(?:what was|what's|what is|what were) (?:the )?(?:last|latest|most recent|previous) "
    r"(?:result|output|run|answer)s? (?:of|from|for) (?P<t>.+)",
    r"(?:last|latest) (?:result|output)s? (?:of|from|for) (?P<t>.+)",
    r"what did (?P<t>.+?) (?:say|return|find|produce|send|output|give|write)(?: me)?"
    r"(?: (?:last time|the last time|last))?",
    r"how did (?:the )?(?:last run of )?(?P<t>.+?) (?:go|run|do)(?: (?:last time|today))?",
    r"(?:show|give|tell)(?: me)? (?P<t>.+?)(?:'s)? (?:last|latest|most recent) (?:result|"
    r"output|run)s?",
    r"(?P<t>.+?)(?:'s)? (?:last|latest|most recent) (?:result|output|run)s?",
)]
_EN_CHANGE_VERB = re.compile(
    r"^(?:move|change|reschedule|shift|switch|set|make|update|postpone|delay|push back|"
    r"bring forward|push)\s+(?!(?:off|on|back on)\b)(?P<rest>.+)$")
_EN_CHANGE_SPLIT = re.compile(r" (?:to|for|until|till) ")
_EN_PAUSE_STRONG = re.compile(
    r"^(?:pause|suspend|put on hold|hold off(?: on)?|stop reminding me(?: (?:to|about|of))?|"
    r"snooze)\b(?:\s+(?P<t>.*))?$")
_EN_PAUSE_WEAK = re.compile(
    r"^(?:stop|disable|turn off|switch off|mute|silence|deactivate|hold)\b\s*(?P<t>.+)$")
_EN_PAUSE_SPLIT = [_full(p) for p in (r"put (?P<t>.+) on hold", r"turn (?P<t>.+) off",
                                      r"switch (?P<t>.+) off")]
_EN_RESUME_STRONG = re.compile(
    r"^(?:resume|unpause|un-pause|reactivate|re-enable|reenable|reinstate|unsnooze)"
    r"\b(?:\s+(?P<t>.*))?$")
_EN_RESUME_WEAK = re.compile(
    r"^(?:restart|enable|continue|turn on|switch on|unmute|turn back on)\b\s*(?P<t>.+)$")
_EN_RESUME_SPLIT = [_full(p) for p in (r"(?:start|turn) (?P<t>.+) (?:back on|again)",
                                       r"turn (?P<t>.+) on")]
_EN_DELETE_STRONG = re.compile(
    r"^(?:delete|cancel|get rid of|(?:don't|do not|never) remind me(?: (?:to|about|of))?)"
    r"\b(?:\s+(?P<t>.*?))?(?: (?:anymore|any more|ever again|again))?$")
_EN_DELETE_WEAK = re.compile(
    r"^(?:remove|drop|erase|kill|trash|discard|scrap|clear|forget(?: about)?)\b\s*(?P<t>.+)$")
_EN_NO_MORE = re.compile(r"^no more (?P<t>.+)$")
_EN_NO_NEED = re.compile(
    r"^i (?:don't|do not) (?:need|want) (?P<t>.+?) (?:anymore|any more|any longer)$")
# Pause first: "stop" and "turn … off" are read as pause, never as anything else.
_EN_VERBS: tuple[tuple[IntentKind, re.Pattern[str], re.Pattern[str], list[re.Pattern[str]]],
                 ...] = (
    ("pause", _EN_PAUSE_STRONG, _EN_PAUSE_WEAK, _EN_PAUSE_SPLIT),
    ("resume", _EN_RESUME_STRONG, _EN_RESUME_WEAK, _EN_RESUME_SPLIT),
    ("delete", _EN_DELETE_STRONG, _EN_DELETE_WEAK, [_EN_NO_MORE, _EN_NO_NEED]),
)
_EN_RUN = re.compile(
    rf"^(?:run|execute|trigger|fire|kick off)\s+(?P<t>.+?)(?P<now>(?:\s+{_EN_NOW})*)$")


def _strip_en_tail(text: str) -> str:
    """Drop trailing polite words, each preceded by commas or whitespace; linear in what it
    drops."""
    while True:
        for word in _EN_TAIL_WORDS:
            if not text.endswith(word):
                continue
            start = end = len(text) - len(word)
            while start and (text[start - 1] == "," or text[start - 1].isspace()):
                start -= 1
            if start < end:
                text = text[:start]
                break
        else:
            return text


_EN_NEXT = [_full(p) for p in (
    r"what(?:'s| is| comes)(?: up)? next",
    r"(?:what|when)(?:'s| is| are)? (?:my |the )?next (?:tasks?|reminders?|jobs?|runs?)"
    r"(?: (?:due|scheduled|coming up))?",
    r"when (?:is|does|will) (?:my |the )?next (?:task|reminder|job|run)(?: (?:run|fire|go off|"
    r"happen|come|be due))?",
    r"(?:show|list|tell|give)(?: me)? (?:my |the )?(?:next|upcoming) (?:tasks|reminders|jobs|"
    r"runs)",
    r"what(?:'s| is| are) (?:my |the )?upcoming (?:tasks|reminders|jobs|runs)",
)]
_EN_NEXT_OF = [_full(p) for p in (
    r"when (?:is|does|will) (?P<t>.+?) (?:run|fire|go off|happen|come|be due)(?: next)?",
    r"when(?:'s| is) (?P<t>.+?) next",
    r"when(?:'s| is) the next (?:run|time) of (?P<t>.+)",
)]
_EN_SKIP = re.compile(r"^(?:skip|pass on|miss out|don't run|do not run)\s+(?P<t>.+?)"
                      r"(?:\s+(?:this time|just once|once|for once|this once))?$")
# "skip rope every day at 7" is a new task: a skip names one run, never a recurrence or clock
_EN_RECURRENCE = re.compile(r"\b(?:every|each|daily|weekly|monthly|yearly|hourly|at \d|"
                            r"\d{1,2}(?::\d\d)?\s*(?:am|pm)|\d{1,2}:\d\d)\b")
_EN_SKIP_DAY = re.compile(
    r"\b(?P<d>today|tonight|tomorrow|(?:this |next )?(?:mon|tues|wednes|thurs|fri|satur|sun)day)"
    r"(?:'s)?\b")


def _english_skip(text: str) -> _Found | None:
    m = _EN_SKIP.match(text)
    if m is None or _EN_RECURRENCE.search(m["t"]) or _EN_NEW.match(m["t"]):
        return None
    day = _EN_SKIP_DAY.search(m["t"])
    return ("skip_next", m["t"], None if day is None else day["d"])


def _english(text: str) -> _Found:
    text = _strip_en_tail(_EN_POLITE.sub("", text)).strip()
    if any(p.fullmatch(text) for p in _EN_NEXT):
        return ("next", "", None)
    for pattern in _EN_NEXT_OF:
        if (m := pattern.fullmatch(text)) and not _EN_RECURRENCE.search(m["t"]):
            return ("next", m["t"], None)
    if (skip := _english_skip(text)) is not None:
        return skip
    if any(p.fullmatch(text) for p in _EN_LIST):
        return ("list", "", None)
    for pattern in _EN_LAST:
        if (m := pattern.fullmatch(text)) and not _EN_TIME.search(m["t"]):
            return ("last_result", m["t"], None)
    if (m := _EN_CHANGE_VERB.match(text)) and not _EN_NEW.match(m["rest"]):
        return _english_change(m["rest"])
    for kind, strong, weak, split in _EN_VERBS:
        if m := strong.match(text):
            return (kind, m["t"] or "", None)
        for pattern in split:
            if (m := pattern.fullmatch(text)) and _EN_TASK_NOUN.search(m["t"]):
                return (kind, m["t"], None)
        if (m := weak.match(text)) and _EN_TASK_NOUN.search(m["t"]):
            return (kind, m["t"], None)
    # "run the backup now" runs a task; "run the backup every day at 3am" is a new one.
    if (m := _EN_RUN.match(text)) and not _EN_NEW.match(m["t"]) and (
            m["now"] or not _EN_TIME.search(m["t"])):
        return ("run_now", m["t"], None)
    return _CREATE


def _english_change(rest: str) -> _Found:
    """"the standup reminder to 7am": the last " to "/" for " followed by a time splits the task
    from its new time. Without one, a change is still asked for; the time is missing."""
    splits = [m for m in _EN_CHANGE_SPLIT.finditer(rest) if _EN_TIME.search(rest[m.end():])]
    if not splits:
        if _EN_TASK_NOUN.search(rest):
            return ("change_time", rest, None)
        return _CREATE
    cut = splits[-1]
    target = re.sub(r"^(?:the )?time of\s+", "", rest[:cut.start()])
    target = re.sub(r"\s+from\s+.*$", "", target)  # "from 8am to 9am": the old time
    return ("change_time", target, rest[cut.end():].strip())


# --- Chinese (both scripts) ---------------------------------------------------------------
_ZH_POLITE = re.compile(
    r"^(?:請|请|麻煩|麻烦|拜託|拜托|可以|可不可以|能不能|能否|幫我|帮我|替我|給我|给我|我想要|我想|"
    r"我要|想要|我需要|你|先|再|就|那就|那(?![個个些])|好的|好|嗯|喂|哈囉|哈啰|嗨|現在|现在|幫忙|帮忙|"
    r"告訴我|告诉我)+")
# Particles ending a request, stripped from the end (a "(...)+$" regex was quadratic in a long
# run of them).
_ZH_TAIL = Tail(chars="", words=("吧", "了", "啊", "呀", "喔", "哦", "嗎", "吗", "呢", "啦", "謝謝",
                                 "谢谢", "好嗎", "好吗", "可以嗎", "可以吗"), bounded=False)
_ZH_BA = r"(?:把|將|将)"
_ZH_TASK_NOUN = re.compile(
    r"提醒|任務|任务|排程|鬧鐘|闹钟|通知|摘要|定時|定时|它|那個|那个|這個|这个|那些|這些|这些|全部|"
    r"所有")
_ZH_CREATE = re.compile(r"提醒我|叫我|通知我|告訴我|告诉我|記得|记得|幫我|帮我|給我|给我")
_ZH_NOW = r"(?:現在|现在|立刻|立即|馬上|马上|即刻|趕快|赶快)"
_ZH_TIME = re.compile(
    r"每|明天|明早|明晚|今天|今晚|今早|後天|后天|早上|晚上|上午|下午|中午|凌晨|傍晚|半夜|夜裡|夜里|"
    r"[0-9０-９一二三四五六七八九十兩两]+\s*[點点時时]|[0-9]{1,2}:[0-9]{2}|[週周][一二三四五六日天末]|"
    r"星期|禮拜|礼拜|[0-9一二三四五六七八九十]+\s*[號号日]|[0-9一二三四五六七八九十]+\s*月|"
    r"分鐘後|分钟后|小時後|小时后|天後|天后|工作日")

_ZH_LIST = [_full(p) for p in (
    r"我?(?:現在|现在|目前)?(?:有|設了|设了|排了|安排了)(?:哪些|什麼|什么|幾個|几个|多少)(?:個|个)?"
    r"(?:提醒|任務|任务|排程|鬧鐘|闹钟|定時任務|定时任务|事情)",
    r"(?:列出|顯示|显示|看看|看一下|查看|查一下|列一下|給我看|给我看|看)?(?:我的|我)?(?:所有|全部)?(?:的)?"
    r"(?:提醒|任務|任务|排程|鬧鐘|闹钟)(?:清單|清单|列表|有哪些|有什麼|有什么)?",
)]
_ZH_RESULT = r"(?:結果|结果|輸出|输出|內容|内容|摘要|回覆|回复)"
_ZH_LAST = r"(?:上次|上一次|最近一次|最近|最新|最後一次|最后一次|剛才|刚才)"
_ZH_LAST_PATTERNS = [_full(p) for p in (
    rf"(?:看看|看一下|查看|顯示|显示)?(?P<t>.+?)(?:的)?{_ZH_LAST}(?:的)?(?:執行|执行|運行|运行)?"
    rf"(?:的)?{_ZH_RESULT}(?:是什麼|是什么|如何|怎樣|怎样|為何|为何)?",
    rf"(?:看看|看一下|查看|顯示|显示)?{_ZH_LAST}(?:的)?(?P<t>.+?)(?:的)?(?:執行|执行)?{_ZH_RESULT}"
    rf"(?:是什麼|是什么)?",
    r"(?P<t>.+?)(?:上次|最近)?(?:跑得|執行得|执行得|運行得|运行得)(?:怎麼樣|怎么样|如何)",
)]
_ZH_CHANGE = _full(
    rf"{_ZH_BA}?(?P<t>.*?)(?:的時間|的时间|的時間點|的时间点)?(?:改到|改成|改為|改为|改在|換到|换到|換成|"
    r"换成|調到|调到|調成|调成|調整到|调整到|調整為|调整为|挪到|移到|延到|延後到|延后到|推遲到|推迟到|"
    r"提前到|更改為|更改为|更改到|重新安排到|重新排到|重排到)(?P<w>.+)")
# Per kind: verbs that start a request whatever follows ("停止提醒我喝水" stops a reminder),
# verbs that start one only when a task is named ("打開喝水提醒", not "打開窗戶"), and verbs that
# end one ("(把)喝水提醒刪掉").
_ZH_VERBS: tuple[tuple[IntentKind, str, str, str], ...] = (
    ("resume", "取消暫停|取消暂停", "", "取消暫停|取消暂停"),
    ("pause", "暫停|暂停|暫時停止|暂时停止|停止|停掉|停用|先停", "關掉|关掉|關閉|关闭",
     "暫停|暂停|停止|停掉|停用|關掉|关掉|關閉|关闭|停一下|停"),
    ("resume", "恢復|恢复|重新開始|重新开始|重新啟用|重新启用|繼續|继续",
     "啟用|启用|重啟|重启|打開|打开|開啟|开启",
     "恢復|恢复|重新開始|重新开始|重新啟用|重新启用|繼續|继续|啟用|启用|重啟|重启|打開|打开|開啟|开启"),
    ("delete", "刪除|删除|刪掉|删掉|取消|移除|撤銷|撤销|不要再提醒我|別再提醒我|别再提醒我|"
     "不用再提醒我|不要提醒我|不要再|別再|别再|我不需要|不需要|我不用再|不用再",
     "去掉|拿掉|清除|清掉",
     "刪除|删除|刪掉|删掉|刪|删|取消|移除|去掉|拿掉|撤銷|撤销|不要|不用|不需要"),
)
_ZH_PAUSE_ME = _full(r"(?:暫時|暂时|先)(?:別|别|不要|不用)(?:再)?提醒我(?P<t>.*)")
_ZH_RUN = "執行|执行|運行|运行|觸發|触发|啟動|启动|跑"


_ZH_NEXT_WORD = r"(?:下一個|下一个|下個|下个|下一次|下次)"
_ZH_WHEN = r"(?:什麼時候|什么时候|幾點|几点|何時|何时|哪天|哪一天)"
_ZH_NEXT = [_full(p) for p in (
    rf"(?:我的)?{_ZH_NEXT_WORD}(?:的)?(?:提醒|任務|任务|排程|執行|执行)(?:是|在|會在|会在)?"
    rf"(?:{_ZH_WHEN}|什麼|什么|哪個|哪个)?(?:執行|执行|響|响)?",
    r"(?:接下來|接下来)(?:有|是|要)?(?:什麼|什么|哪些|哪個|哪个)(?:提醒|任務|任务|排程|事)?"
    r"(?:要執行|要执行)?",
    r"(?:接下來|接下来|即將|即将)(?:的)?(?:提醒|任務|任务|排程|執行|执行)",
)]
_ZH_NEXT_OF = _full(rf"(?P<t>.+?)(?:的)?{_ZH_NEXT_WORD}(?:執行|执行|提醒)?(?:是|在|會在|会在)?"
                    rf"{_ZH_WHEN}(?:執行|执行|響|响)?")
_ZH_SKIP_VERB = r"(?:跳過|跳过|略過|略过)"
_ZH_ONCE = r"(?:一次|這次|这次|一下)?"
_ZH_SKIP_DAY = re.compile(r"今天|今晚|明天|明早|明晚|後天|后天|"
                          r"(?:這|这|下)?(?:週|周|星期|禮拜|礼拜)[一二三四五六日天]")


def _zh_skip(text: str) -> _Found | None:
    m = re.fullmatch(rf"{_ZH_SKIP_VERB}{_ZH_ONCE}(?P<t>.+)", text) or re.fullmatch(
        rf"{_ZH_BA}?(?P<t>.+?)(?:先|就)?{_ZH_SKIP_VERB}{_ZH_ONCE}", text)
    if m is None or _ZH_CREATE.search(m["t"]) or re.search(r"每", m["t"]):
        return None
    day = _ZH_SKIP_DAY.search(m["t"])
    return ("skip_next", _strip_ba(m["t"]), None if day is None else day.group())


def _chinese(text: str) -> _Found:
    text = re.sub(r"\s+", "", text)
    text = _ZH_TAIL.strip(_ZH_POLITE.sub("", text))
    if any(p.fullmatch(text) for p in _ZH_NEXT):
        return ("next", "", None)
    if (m := _ZH_NEXT_OF.fullmatch(text)) and not _ZH_CREATE.search(m["t"]):
        return ("next", _strip_ba(m["t"]), None)
    if (skip := _zh_skip(text)) is not None:
        return skip
    if any(p.fullmatch(text) for p in _ZH_LIST):
        return ("list", "", None)
    for pattern in _ZH_LAST_PATTERNS:
        m = pattern.fullmatch(text)
        if m and not _ZH_CREATE.search(m["t"]) and not _ZH_TIME.search(m["t"]):
            return ("last_result", _strip_ba(m["t"]), None)
    # A new time, or a task named: "把喝水提醒改成喝茶" is a change too (of the wrong kind: the
    # time will not read, and the user is told so).
    if (m := _ZH_CHANGE.fullmatch(text)) and not _ZH_CREATE.search(m["t"]) and (
            _ZH_TIME.search(m["w"]) or _ZH_TASK_NOUN.search(m["t"])
            or text.startswith(("把", "將", "将"))):
        return ("change_time", m["t"], m["w"])
    if m := _ZH_PAUSE_ME.fullmatch(text):
        return ("pause", m["t"], None)
    for kind, strong, weak, last in _ZH_VERBS:
        found = _zh_verb(text, strong, weak, last)
        if found is not None:
            return (kind, found, None)
    return _zh_run(text)


def _zh_verb(text: str, strong: str, weak: str, last: str) -> str | None:
    """The target when ``text`` is "<verb><task>" or "(把)<task><verb>"; else None."""
    if m := re.fullmatch(rf"(?:{strong})(?:一下|掉)?(?P<t>.*)", text):
        return m["t"]
    if weak and (m := re.fullmatch(rf"(?:{weak})(?:一下|掉)?(?P<t>.+)", text)) and \
            _ZH_TASK_NOUN.search(m["t"]):
        return m["t"]
    m = re.fullmatch(rf"(?P<ba>{_ZH_BA})?(?P<t>.+?)(?:先|就|也)?(?:給我|给我)?(?:{last})"
                     r"(?:掉|一下)*", text)
    if m and not _ZH_CREATE.search(m["t"]) and (m["ba"] or _ZH_TASK_NOUN.search(m["t"])):
        return m["t"]
    return None


def _zh_run(text: str) -> _Found:
    # "立刻執行備份任務", "把備份任務立刻執行一次", "執行備份任務" (no time: a time would make it a
    # new task, "每天凌晨三點執行備份").
    now_first = re.fullmatch(rf"{_ZH_NOW}(?:就)?(?:{_ZH_RUN})(?:一下|一次|一遍)?(?P<t>.+)", text)
    if now_first and not _ZH_CREATE.search(now_first["t"]):
        return ("run_now", now_first["t"], None)
    m = re.fullmatch(rf"(?P<ba>{_ZH_BA})?(?P<t>.+?){_ZH_NOW}?(?:就)?(?:再)?(?:{_ZH_RUN})"
                     r"(?:一下|一次|一遍)", text) or re.fullmatch(
        rf"(?P<ba>{_ZH_BA})(?P<t>.+?){_ZH_NOW}?(?:就)?(?:{_ZH_RUN})", text) or re.fullmatch(
        rf"(?P<ba>)(?P<t>.+?){_ZH_NOW}(?:就)?(?:{_ZH_RUN})(?:一下|一次|一遍)?", text)
    if m and not _ZH_CREATE.search(m["t"]) and not _ZH_TIME.search(m["t"]):
        return ("run_now", m["t"], None)
    m = re.fullmatch(rf"(?:執行|执行|運行|运行|觸發|触发)(?:一下|一次|一遍)?(?P<t>.+?){_ZH_NOW}?",
                     text)
    if m and not _ZH_CREATE.search(m["t"]) and not _ZH_TIME.search(m["t"]):
        return ("run_now", m["t"], None)
    return _CREATE


# --- rename (both languages, on the text as written: the new name keeps its case) ---------
_EN_RENAME = [re.compile(p, re.IGNORECASE | re.DOTALL) for p in (
    r"(?:rename|retitle|re-name)\s+(?P<t>.+)\s+(?:to|as|into)\s+(?P<n>.+)",
    r"(?:change|set|update)\s+the\s+(?:name|title)\s+of\s+(?P<t>.+)\s+to\s+(?P<n>.+)",
    r"(?:change|set|update)\s+(?P<t>.+?)(?:'s)?\s+(?:name|title)\s+to\s+(?P<n>.+)",
)]
_ZH_RENAME = _full(
    rf"{_ZH_BA}?\s*(?P<t>.+?)\s*(?:的名字|的名稱|的名称|的標題|的标题)?\s*(?:改名為|改名为|改名成|改名叫|"
    r"改名|重新命名為|重新命名为|重新命名成|命名為|命名为|更名為|更名为|名字改成|名字改為|名字改为|"
    r"名稱改成|名称改成|名稱改為|名称改为|改叫)\s*(?P<n>.+)")
_EN_POLITE_ANY = re.compile(_EN_POLITE.pattern, re.IGNORECASE)


def _rename(text: str) -> tuple[str, str] | None:
    """(target, new name) of "rename the water reminder to hydrate", "把吃藥提醒改名為晚上吃藥"."""
    found: tuple[str, str] | None = None
    if has_cjk(text):
        m = _ZH_RENAME.fullmatch(_ZH_POLITE.sub("", text))
        if m and not _ZH_CREATE.search(m["t"]):
            found = (m["t"], _ZH_TAIL.strip(m["n"]))
    if found is None:
        plain = _EN_POLITE_ANY.sub("", text)
        m = next((m for p in _EN_RENAME if (m := p.fullmatch(plain))), None)
        if m is not None:
            name = m["n"]
            tail = _strip_en_tail(name.lower())  # "… to hydrate please": same length kept
            found = (m["t"], name[:len(tail)])
    if found is None:
        return None
    target, name = found
    name = name.strip(_QUOTES)
    return (target, name) if name else None


def _strip_ba(target: str) -> str:
    return re.sub(rf"^{_ZH_BA}", "", target)


def mentions_time(text: str) -> bool:
    """Whether the words say when ("every Sunday at 2am", "明天"): a target that does may have
    been meant as a new task, and the answer says how to ask for one."""
    return bool((_ZH_TIME if has_cjk(text) else _EN_TIME).search(text.lower()))


Answer = Literal["yes", "no"]
_YES = re.compile(
    r"y|yes|yeah|yep|yup|sure|ok|okay|confirm|confirmed|do it|go ahead|please do|delete it|"
    r"是|是的|對|对|好|好的|好啊|確認|确认|確定|确定|可以|嗯|要|沒錯|没错|刪吧|删吧|改吧|行")
_NO = re.compile(
    r"n|no|nope|nah|cancel|don't|do not|stop|never mind|nevermind|keep it|"
    r"不|不要|否|取消|算了|算|不用|不用了|先不要|別|别|不行|保留")


def yes_or_no(message: str) -> Answer | None:
    """The answer to a yes/no question ("yes", "好的", "不要"); None for anything else."""
    text = _ZH_TAIL.strip(_tidy(message).lower()).strip(" ,，。.!！")
    if _YES.fullmatch(text):
        return "yes"
    if _NO.fullmatch(text):
        return "no"
    return None


_EN_DAY = re.compile(
    r"\b(?:tomorrow|today|tonight|yesterday|every|each|daily|weekly|monthly|yearly|hourly|"
    r"weekdays?|weekends?|next|this|on|in|(?:mon|tues|wednes|thurs|fri|satur|sun)days?|"
    r"jan|feb|mar|apr|may|jun|jul|aug|sep|sept|oct|nov|dec|january|february|march|april|"
    r"june|july|august|september|october|november|december|\d+(?:st|nd|rd|th)|\d+/\d+|now)\b")
_ZH_DAY = re.compile(
    r"每|明|今|後天|后天|昨|[週周][一二三四五六日天末]|星期|禮拜|礼拜|[號号]|[0-9一二三四五六七八九十]+\s*[月日]|"
    r"後|后|工作日|下[週周个個]|這|这|現在|现在|立刻|馬上|马上")


def names_a_day(when: str) -> bool:
    """Whether a new time says which day or how often ("tomorrow at 7", "每天晚上十點"), rather
    than only a time of day ("7am", "晚上十點"): a recurring task moved to a time of day keeps
    its days."""
    return bool((_ZH_DAY if has_cjk(when) else _EN_DAY).search(when.lower()))


LAST = -1  # which_one: "the last one"
_EN_ORDINALS = ("first", "second", "third", "fourth", "fifth", "sixth", "seventh", "eighth",
                "ninth", "tenth")
_EN_NUMBERS = ("one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten")
_EN_PICK = re.compile(
    r"(?:the |number |no\.? ?|# ?|option |task )?(?:(?P<n>\d{1,2})(?:st|nd|rd|th)?|"
    rf"(?P<w>{'|'.join(_EN_ORDINALS)}|last)|(?P<c>{'|'.join(_EN_NUMBERS)}))"
    r"(?: one| task| reminder)?")
_ZH_DIGITS = {"一": 1, "二": 2, "兩": 2, "两": 2, "三": 3, "四": 4, "五": 5, "六": 6, "七": 7,
              "八": 8, "九": 9}
_ZH_PICK = re.compile(
    r"(?:我要|要|選|选|就)?(?:第(?P<a>[0-9]{1,2}|[一二兩两三四五六七八九十]{1,3})(?:個|个|項|项|條|条|號|号)?|"
    r"(?P<b>[0-9]{1,2})(?:號|号)?|(?P<c>[一二兩两三四五六七八九十]{1,3})(?:號|号)|"
    r"(?P<last>最後一個|最后一个|最後那個|最后那个))(?:任務|任务|提醒)?")


def which_one(message: str) -> int | None:
    """The number of the task picked from a numbered list ("2", "the second one", "第二個",
    "2號"); ``LAST`` for "the last one" (最後一個); None when the message is not a pick."""
    text = _tidy(message)
    if has_cjk(text):
        m = _ZH_PICK.fullmatch(_ZH_TAIL.strip(re.sub(r"\s+", "", _ZH_POLITE.sub("", text))))
        if m is None:
            return None
        if m["last"]:
            return LAST
        return _zh_number(m["a"] or m["b"] or m["c"])
    m = _EN_PICK.fullmatch(_strip_en_tail(_EN_POLITE.sub("", text.lower())).strip())
    if m is None:
        return None
    if m["n"]:
        return int(m["n"])
    if m["c"]:
        return _EN_NUMBERS.index(m["c"]) + 1
    return LAST if m["w"] == "last" else _EN_ORDINALS.index(m["w"]) + 1


def _zh_number(text: str) -> int | None:
    """1-99 written in digits or Chinese numerals (一, 十二, 二十)."""
    if text.isdigit():
        return int(text)
    tens, _, ones = text.rpartition("十")
    if "十" not in text:
        return _ZH_DIGITS.get(text)
    high = 1 if not tens else _ZH_DIGITS.get(tens)
    low = 0 if not ones else _ZH_DIGITS.get(ones)
    if high is None or low is None:
        return None
    return high * 10 + low
