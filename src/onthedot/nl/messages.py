"""Error messages in the user's language, and the forms the parser understands."""

from __future__ import annotations

from onthedot.domain.errors import ParseError
from onthedot.nl.parts import Language, Problem

EXAMPLES = (
    '"每天早上八點", "每週一三五晚上九點半", "明天下午三點", "20分鐘後", "every weekday at 9am", '
    '"tomorrow at 3pm", "in 20 minutes", "on the first Monday of every month at 10"'
)

# key: (English, Traditional Chinese, Simplified Chinese, expected)
_MESSAGES: dict[str, tuple[str, str, str, str]] = {
    "no_time": (
        "I couldn't find when to do this in “{field}”; say a time such as “tomorrow at 3pm”.",
        "看不出「{field}」要在什麼時候執行，請說明時間，例如「明天下午三點」。",
        "看不出“{field}”要在什么时候执行，请说明时间，例如“明天下午三点”。",
        f"a time expression such as {EXAMPLES}",
    ),
    "vague": (
        "“{field}” is too vague to schedule; say when, e.g. “in 20 minutes” or “tomorrow at 3pm”.",
        "「{field}」太模糊了，請說明具體時間，例如「20分鐘後」或「明天下午三點」。",
        "“{field}”太模糊了，请说明具体时间，例如“20分钟后”或“明天下午三点”。",
        f"a definite time such as {EXAMPLES}",
    ),
    "approximate": (
        "“{field}” is not an exact time; say when to run, e.g. “at 5pm”.",
        "「{field}」不是確切的時間，請說明幾點幾分，例如「八點半」。",
        "“{field}”不是确切的时间，请说明几点几分，例如“八点半”。",
        "an exact time such as 八點半, 17:00, at 5pm",
    ),
    "unparsed": (
        "I couldn't read the time “{field}”.",
        "看不懂時間「{field}」。",
        "看不懂时间“{field}”。",
        f"a time expression such as {EXAMPLES}",
    ),
    "bad_hour": (
        "“{field}” is not a valid time of day (hours are 0–23, or 1–12 with am/pm).",
        "「{field}」不是有效的時間（小時須為 0–23，或搭配上午/下午的 1–12）。",
        "“{field}”不是有效的时间（小时须为 0–23，或搭配上午/下午的 1–12）。",
        "an hour from 0 to 23, or 1 to 12 with am/pm or 上午/下午/晚上",
    ),
    "bad_minute": (
        "“{field}” is not a valid time of day (minutes are 0–59).",
        "「{field}」的分鐘看不懂（須為 0–59，例如八點零五分、八點半）。",
        "“{field}”的分钟看不懂（须为 0–59，例如八点零五分、八点半）。",
        "minutes from 0 to 59, e.g. 8:05, 八點零五分, 八點半, 八點一刻",
    ),
    "hour_daypart": (
        "The hour in “{field}” does not fit that part of the day.",
        "「{field}」的時段和鐘點對不上，請換個說法，例如凌晨一點、晚上九點。",
        "“{field}”的时段和钟点对不上，请换个说法，例如凌晨一点、晚上九点。",
        "an hour that fits the part of day: 凌晨 0–6, 早上/上午 0–12, 下午 1–7, 晚上 5–12",
    ),
    "bad_date": (
        "“{field}” is not a valid date.",
        "「{field}」不是有效的日期。",
        "“{field}”不是有效的日期。",
        "an existing date, e.g. 3月8日, March 8, the 15th",
    ),
    "bad_weekday": (
        "“{field}” is not a day of the week.",
        "「{field}」不是星期幾（只有週一到週六和週日）。",
        "“{field}”不是星期几（只有周一到周六和周日）。",
        "a weekday: 週一..週六, 週日/週天, Monday..Sunday",
    ),
    "need_hour": (
        "“{field}” needs an hour, e.g. 3am.",
        "「{field}」需要指定幾點，例如凌晨三點。",
        "“{field}”需要指定几点，例如凌晨三点。",
        "an hour with 凌晨/半夜, e.g. 凌晨三點",
    ),
    "need_day": (
        "“{field}” needs a day, e.g. “every Monday” or “every month on the 1st”.",
        "「{field}」需要指定哪一天，例如「每週一」或「每月1號」。",
        "“{field}”需要指定哪一天，例如“每周一”或“每月1号”。",
        "a day: 每週一 / every Monday, 每月1號 / every month on the 1st",
    ),
    "need_date": (
        "“{field}” needs a date, e.g. “every year on March 8”.",
        "「{field}」需要指定日期，例如「每年3月8日」。",
        "“{field}”需要指定日期，例如“每年3月8日”。",
        "a date: 每年3月8日 / every year on March 8",
    ),
    "need_time": (
        "“{field}” needs a time of day that is still ahead, e.g. “today at 5pm”.",
        "「{field}」需要指定一個還沒過的時間，例如「今天下午五點」。",
        "“{field}”需要指定一个还没过的时间，例如“今天下午五点”。",
        "a day with a time still in the future, e.g. 今天下午五點 / today at 5pm",
    ),
    "passed": (
        "“{field}” has already passed.",
        "「{field}」已經過了。",
        "“{field}”已经过了。",
        "a time in the future",
    ),
    "conflict": (
        "“{field}” contradicts the rest of the time expression.",
        "「{field}」和其他時間說法互相矛盾。",
        "“{field}”和其他时间说法互相矛盾。",
        "one consistent time expression",
    ),
    "every_other": (
        "“{field}” is ambiguous: say “every day” or “every 2 days”.",
        "「{field}」有歧義：請說「每天」或「每兩天」（週、月亦同）。",
        "“{field}”有歧义：请说“每天”或“每两天”（周、月亦同）。",
        "每天 / 每兩天, 每週 / 每兩週, every day / every other day",
    ),
    "interval_minutes": (
        "Every {n} minutes does not fit evenly into the clock; use a divisor of 60, "
        "e.g. every {lower} or every {upper} minutes.",
        "每 {n} 分鐘無法整齊對上時鐘，請改用能整除 60 的間隔，例如每 {lower} 或每 {upper} 分鐘。",
        "每 {n} 分钟无法整齐对上时钟，请改用能整除 60 的间隔，例如每 {lower} 或每 {upper} 分钟。",
        "every N minutes with N dividing 60 (1, 2, 3, 4, 5, 6, 10, 12, 15, 20, 30), or whole hours",
    ),
    "interval_hours": (
        "Every {n} hours does not fit evenly into a day; use a divisor of 24, "
        "e.g. every {lower} or every {upper} hours.",
        "每 {n} 小時無法整齊對上一天，請改用能整除 24 的間隔，例如每 {lower} 或每 {upper} 小時。",
        "每 {n} 小时无法整齐对上一天，请改用能整除 24 的间隔，例如每 {lower} 或每 {upper} 小时。",
        "every N hours with N dividing 24 (1, 2, 3, 4, 6, 8, 12)",
    ),
    "interval_long": (
        "“{field}” is longer than a day; say it in days, e.g. “every 2 days at 9am”.",
        "「{field}」超過一天，請用天數表示，例如「每兩天早上九點」。",
        "“{field}”超过一天，请用天数表示，例如“每两天早上九点”。",
        "every N days at a time, e.g. 每兩天早上九點 / every 2 days at 9am",
    ),
    "interval_time": (
        "“{field}”: an interval schedule runs on the clock (every 2 hours = 00:00, 02:00, ...) "
        "and cannot also take a time of day.",
        "「{field}」：固定間隔（例如每兩小時 = 0點、2點……）不能再指定時間。",
        "“{field}”：固定间隔（例如每两小时 = 0点、2点……）不能再指定时间。",
        "either an interval (every 2 hours) or a time of day (every day at 9am)",
    ),
    "midnight_day": (
        "“{field}” is midnight at the end of that day, which cannot be scheduled for days of "
        "the month; say 00:00 of the next day instead.",
        "「{field}」是那一天結束時的午夜，無法用於每月/每年的日期；請改說隔天的凌晨0點。",
        "“{field}”是那一天结束时的午夜，无法用于每月/每年的日期；请改说隔天的凌晨0点。",
        "00:00 of the following day, e.g. 每月2號凌晨0點",
    ),
}


def to_error(found: Problem, language: Language) -> ParseError:
    en, hant, hans, expected = _MESSAGES.get(found.key, _MESSAGES["unparsed"])
    template = {"en": en, "zh-Hant": hant, "zh-Hans": hans}[language]
    message = template.format(field=found.text, **dict(found.params))
    return ParseError(message, code="could_not_understand", field=found.text, expected=expected)
