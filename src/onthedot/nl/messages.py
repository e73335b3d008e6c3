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
    "too_long": (
        "That is too long to read as one request ({length} characters); say it in at most "
        "{limit}.",
        "這段話太長了（{length} 個字），請在 {limit} 個字以內說明。",
        "这段话太长了（{length} 个字），请在 {limit} 个字以内说明。",
        "one request of at most 4000 characters",
    ),
    "too_many_words": (
        "“{field}” is one time expression too many: a request says when in at most {limit} "
        "time words.",
        "「{field}」之前的時間說法太多了：一個請求最多 {limit} 個時間詞。",
        "“{field}”之前的时间说法太多了：一个请求最多 {limit} 个时间词。",
        "one time expression, such as " + EXAMPLES,
    ),
    "vague": (
        "“{field}” is too vague to schedule. When exactly: which day and time, e.g. “in 20 "
        "minutes” or “next Tuesday at 3pm”?",
        "「{field}」太模糊了，無法排程。請問具體是哪一天、幾點？例如「20分鐘後」或「下週二下午三點」？",
        "“{field}”太模糊了，无法安排。请问具体是哪一天、几点？例如“20分钟后”或“下周二下午三点”？",
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
    "interval_time": (
        "“{field}”: an interval schedule runs on the clock (every 2 hours = 00:00, 02:00, ...) "
        "and cannot also take a time of day.",
        "「{field}」：固定間隔（例如每兩小時 = 0點、2點……）不能再指定時間。",
        "“{field}”：固定间隔（例如每两小时 = 0点、2点……）不能再指定时间。",
        "either an interval (every 2 hours) or a time of day (every day at 9am)",
    ),
    "need_times": (
        "“{field}” needs the times of day, e.g. “three times a day at 8am, noon and 6pm”. "
        "Which times?",
        "「{field}」需要說明是哪幾個時間，例如「一天三次，早上八點、中午十二點、晚上六點」。請問是幾點？",
        "“{field}”需要说明是哪几个时间，例如“一天三次，早上八点、中午十二点、晚上六点”。请问是几点？",
        "the times of day, e.g. 早上八點、中午十二點和晚上六點 / at 8am, noon and 6pm",
    ),
    "count_mismatch": (
        "“{field}” says {n} times a day but {given} times are given.",
        "「{field}」說一天 {n} 次，但給了 {given} 個時間。",
        "“{field}”说一天 {n} 次，但给了 {given} 个时间。",
        "as many times of day as the count says",
    ),
    "several_times": (
        "“{field}”: one task runs once at one time; for several times on one day, create one "
        "task per time, or make it repeat (e.g. “every day at 9am and 3pm”).",
        "「{field}」：單次任務只能有一個時間；同一天要提醒幾次，請分別建立，或改成重複（例如「每天早上九點和下午三點」）。",
        "“{field}”：单次任务只能有一个时间；同一天要提醒几次，请分别创建，或改成重复（例如“每天早上九点和下午三点”）。",
        "one time for a one-time task, or a repeating one such as every day at 9am and 3pm",
    ),
    "several_dates": (
        "“{field}”: one task runs once, on one date; for several dates, create one task per "
        "date, or make it repeat (e.g. “every year on 1 January and 1 July at 9am”).",
        "「{field}」：單次任務只能有一個日期；要在幾個日期執行，請分別建立，或改成重複（例如「每年1月1日和7月1日早上九點」）。",
        "“{field}”：单次任务只能有一个日期；要在几个日期执行，请分别创建，或改成重复（例如“每年1月1日和7月1日早上九点”）。",
        "one date for a one-time task, or a repeating one such as every year on 1 January and "
        "1 July",
    ),
    "yearly_days": (
        "“{field}”: dates a year on different days of the month take one rule per date and "
        "group of times, and one schedule has at most {limit}; create one task per date.",
        "「{field}」：日子不同的每年日期，每個日期（和每組時間）要一條規則，"
        "一個排程最多 {limit} 條；請分成幾個任務建立。",
        "“{field}”：日子不同的每年日期，每个日期（和每组时间）要一条规则，"
        "一个安排最多 {limit} 条；请分成几个任务创建。",
        "at most 10 dates a year (times the groups of times of day) in one schedule",
    ),
    "leftover": (
        "I couldn't read “{field}” next to the time expression as part of it; say the whole "
        "date or time (e.g. “every year on 1 January and 1 July”), or leave it out.",
        "「{field}」緊接在時間說法旁邊，但看不懂它屬於哪個時間；請把日期或時間說完整（例如「每年1月1日和7月1日」），或把它拿掉。",
        "“{field}”紧接在时间说法旁边，但看不懂它属于哪个时间；请把日期或时间说完整（例如“每年1月1日和7月1日”），或把它去掉。",
        "every date and time said in full, such as every year on 1 January and 1 July",
    ),
    "need_step": (
        "“{field}” is a span of hours; how often within it, e.g. “every 30 minutes between 10 "
        "and 4”?",
        "「{field}」是一段時間；請問其中多久一次？例如「九點到五點每小時」？",
        "“{field}”是一段时间；请问其中多久一次？例如“九点到五点每小时”？",
        "a step inside the span: every 30 minutes between 10 and 4 / 九點到五點每小時",
    ),
    "need_hours": (
        "“{field}” differs from person to person; which hours, e.g. “every hour from 9am to 6pm”?",
        "每個人的「{field}」不同；請問是幾點到幾點？例如「九點到六點每小時」？",
        "每个人的“{field}”不同；请问是几点到几点？例如“九点到六点每小时”？",
        "the hours of the span: from 9am to 6pm / 九點到六點",
    ),
    "window_order": (
        "“{field}” ends before it starts.",
        "「{field}」的結束時間早於開始時間。",
        "“{field}”的结束时间早于开始时间。",
        "a span whose end is after its start, within one day: 9am to 5pm / 九點到五點",
    ),
    "wrong_weekday": (
        "“{field}” falls on {day}, which is not the weekday you said; which one did you mean?",
        "「{field}」是 {day}，和你說的星期幾不符；請問是哪一天？",
        "“{field}”是 {day}，和你说的星期几不符；请问是哪一天？",
        "a date and weekday that agree, or just one of them",
    ),
    "too_many_times": (
        "Too many different times of day ({n}); use a regular step, e.g. every 30 minutes.",
        "時間點太多（{n} 個）；請改用固定間隔，例如每 30 分鐘。",
        "时间点太多（{n} 个）；请改用固定间隔，例如每 30 分钟。",
        "a few times of day, or a regular step",
    ),
    "unknown_holiday": (
        "I don't know the date of “{field}”; say the date, e.g. “on November 8 at 9am”.",
        "我不知道「{field}」是哪一天；請直接說日期，例如「11月8日早上九點」。",
        "我不知道“{field}”是哪一天；请直接说日期，例如“11月8日早上九点”。",
        "a date (11月8日, November 8) or a known holiday: Christmas, 中秋節, 農曆八月十五 ...",
    ),
    "region_holiday": (
        "“{field}” falls on different dates in different places; say the date, e.g. “on "
        "October 10”.",
        "「{field}」在不同地方日期不同；請直接說日期，例如「10月10日」。",
        "“{field}”在不同地方日期不同；请直接说日期，例如“10月1日”。",
        "the date itself, e.g. 10月10日",
    ),
    "solar_term": (
        "“{field}” is a solar term, whose date is not computed here; say the date (e.g. April 5).",
        "「{field}」是節氣，這裡不計算節氣日期；請直接說日期（例如4月5日）。",
        "“{field}”是节气，这里不计算节气日期；请直接说日期（例如4月5日）。",
        "the Gregorian date, e.g. 4月5日",
    ),
    "lunar_leap": (
        "“{field}” is in a leap month, which only some years have; say the date of one year.",
        "「{field}」是閏月，只有某些年份才有；請說明是哪一年的哪一天。",
        "“{field}”是闰月，只有某些年份才有；请说明是哪一年的哪一天。",
        "a lunar date outside leap months, or a Gregorian date",
    ),
    "holiday_range": (
        "“{field}” is outside the years the lunar calendar table covers (1901-2099).",
        "「{field}」超出農曆表的範圍（1901–2099 年）。",
        "“{field}”超出农历表的范围（1901–2099 年）。",
        "a date between 1901 and 2099",
    ),
    "exception": (
        "I can't leave out “{field}”: only days of the week can be left out of a daily or "
        "weekly schedule (e.g. “every day at 7 except weekends”); holidays, dates and "
        "conditions are not read, so say the days to run instead.",
        "無法排除「{field}」：只能從每天或每週的排程中排除星期幾（例如「每天七點，週末除外」）；"
        "假日、日期和條件都讀不了，請直接說要在哪幾天執行。",
        "无法排除“{field}”：只能从每天或每周的安排中排除星期几（例如“每天七点，周末除外”）；"
        "假日、日期和条件都读不了，请直接说要在哪几天执行。",
        "an exception of weekdays from a daily or weekly schedule: every day except weekends, "
        "每天早上七點週六週日除外, weekdays except Monday",
    ),
    "contrast": (
        "“{field}” gives some days another time or rule, which is not read here; create one "
        "task for each schedule (e.g. “every weekday at 8” and “every weekend at 9”).",
        "「{field}」讓某些日子用另一個時間或規則，這裡讀不了；請分別建立（例如「每個工作日八點」和「每週末九點」）。",
        "“{field}”让某些日子用另一个时间或规则，这里读不了；请分别创建（例如“每个工作日八点”和“每周末九点”）。",
        "one schedule per task: every weekday at 8 / every weekend at 9",
    ),
    "exception_all": (
        "“{field}” leaves out every day the schedule has; which days should it run?",
        "「{field}」排除了所有的日子；請問要在哪幾天執行？",
        "“{field}”排除了所有的日子；请问要在哪几天执行？",
        "an exception that leaves some days to run on",
    ),
    "same_time_day": (
        "“{field}” needs a day, e.g. “this time tomorrow” or “same time next week”.",
        "「{field}」需要指定哪一天，例如「明天這個時候」或「下週同一時間」。",
        "“{field}”需要指定哪一天，例如“明天这个时候”或“下周同一时间”。",
        "a day with it: this time tomorrow, same time next week, 明天這個時候",
    ),
    "ambiguous_month_end": (
        "“{field}” is ambiguous; say “the last day of every month” or “the 3rd-to-last day "
        "of every month”.",
        "「{field}」有歧義；請說「每月最後一天」或「每月倒數第三天」。",
        "“{field}”有歧义；请说“每月最后一天”或“每月倒数第三天”。",
        "每月倒數第三天, the 3rd-to-last day of every month, 3 days before the end of every month",
    ),
    "midnight_day": (
        "“{field}” is midnight at the end of that day, which cannot be scheduled for days of "
        "the month; say 00:00 of the next day instead.",
        "「{field}」是那一天結束時的午夜，無法用於每月/每年的日期；請改說隔天的凌晨0點。",
        "“{field}”是那一天结束时的午夜，无法用于每月/每年的日期；请改说隔天的凌晨0点。",
        "00:00 of the following day, e.g. 每月2號凌晨0點",
    ),
}


# Notes for the confirmation: key -> (English, Traditional Chinese, Simplified Chinese).
_NOTES: dict[str, tuple[str, str, str]] = {
    "bare_hour": (
        " “{said}” is read as {as} (24-hour clock); say {said}pm for {pm}.",
        "（未說上午或下午的鐘點按 24 小時制讀作 {as}；若是下午請加「下午」）",
        "（未说上午或下午的钟点按 24 小时制读作 {as}；若是下午请加“下午”）",
    ),
    "evening_hour": (
        " “{said}” after {after} is read as {as} (pm); say {said}am for {am}.",
        "（{after} 之後未說上午或下午的「{said}」點讀作下午或晚上的 {as}；若是早上請加「早上」）",
        "（{after} 之后未说上午或下午的“{said}”点读作下午或晚上的 {as}；若是早上请加“早上”）",
    ),
}


def render_notes(notes: tuple[Problem, ...], language: Language) -> str:
    """The notes of a parse, to append to its confirmation ("" when there are none)."""
    index = {"en": 0, "zh-Hant": 1, "zh-Hans": 2}[language]
    return "".join(_NOTES[n.key][index].format(**dict(n.params)) for n in notes if n.key in _NOTES)


def to_error(found: Problem, language: Language) -> ParseError:
    en, hant, hans, expected = _MESSAGES.get(found.key, _MESSAGES["unparsed"])
    template = {"en": en, "zh-Hant": hant, "zh-Hans": hans}[language]
    message = template.format(field=found.text, **dict(found.params))
    return ParseError(message, code="could_not_understand", field=found.text, expected=expected)
