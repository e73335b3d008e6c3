"""What the chat front door says when it manages tasks, in English, Traditional and Simplified
Chinese; and a task said back in one line: "1. 「喝水」每天 09:00（Asia/Taipei），下次 …"."""

from __future__ import annotations

from datetime import datetime
from zoneinfo import ZoneInfo

from onthedot.domain.models import JobParams
from onthedot.nl.describe import describe
from onthedot.nl.parts import Language
from onthedot.service import JobView

# key -> (English, Traditional Chinese, Simplified Chinese); {name} is already quoted.
_TEXTS: dict[str, tuple[str, str, str]] = {
    "list_none": ("You have no tasks.", "你目前沒有任何任務。", "你目前没有任何任务。"),
    "list": ("You have {n} task(s):", "你有 {n} 個任務：", "你有 {n} 个任务："),
    "list_more": (
        "… and more: see GET /v1/jobs.",
        "……還有更多，請見 GET /v1/jobs。",
        "……还有更多，请见 GET /v1/jobs。",
    ),
    "no_tasks": (
        "You have no tasks, so nothing was changed.",
        "你目前沒有任何任務，所以沒有做任何變更。",
        "你目前没有任何任务，所以没有做任何更改。",
    ),
    "no_match": (
        "I found no task matching “{words}”, so nothing was changed.",
        "找不到符合「{words}」的任務，所以沒有做任何變更。",
        "找不到符合“{words}”的任务，所以没有做任何更改。",
    ),
    "no_match_new": (
        " To schedule a new task, start with the time or “remind me”, e.g. “every Sunday at "
        "2am remind me to delete old logs”.",
        "如果想新增任務，請用時間或「提醒我」開頭，例如「每週日凌晨兩點提醒我刪除舊檔案」。",
        "如果想新增任务，请用时间或“提醒我”开头，例如“每周日凌晨两点提醒我删除旧文件”。",
    ),
    "which": (
        "{n} tasks match “{words}”; which one? Answer with its number (“2”, “the second "
        "one”) or say more of its name. Nothing was changed.",
        "有 {n} 個任務符合「{words}」，是哪一個呢？請回答編號（「2」、「第二個」），或說出更完整的"
        "名稱。沒有做任何變更。",
        "有 {n} 个任务符合“{words}”，是哪一个呢？请回答编号（“2”、“第二个”），或说出更完整的"
        "名称。没有做任何更改。",
    ),
    "which_any": (
        "Which task? You have {n}; answer with its number (“2”, “the second one”) or say "
        "its name. Nothing was changed.",
        "是哪一個任務呢？你有 {n} 個，請回答編號（「2」、「第二個」）或說出名稱。沒有做任何變更。",
        "是哪一个任务呢？你有 {n} 个，请回答编号（“2”、“第二个”）或说出名称。没有做任何更改。",
    ),
    "pick_range": (
        "Answer with a number from 1 to {n}; nothing was changed.",
        "請回答 1 到 {n} 之間的編號；沒有做任何變更。",
        "请回答 1 到 {n} 之间的编号；没有做任何更改。",
    ),
    "yes_or_no": (
        "Answer yes or no; nothing was changed.",
        "請回答「是」或「不要」；沒有做任何變更。",
        "请回答“是”或“不要”；没有做任何更改。",
    ),
    "renamed": (
        "OK, renamed {name} to {new}.",
        "好的，已把{name}改名為{new}。",
        "好的，已把{name}改名为{new}。",
    ),
    "same_name": (
        "{name} is already called that; nothing was changed.",
        "{name}已經是這個名稱，沒有做任何變更。",
        "{name}已经是这个名称，没有做任何更改。",
    ),
    "would_rename": ("Would rename {name} to {new}.", "將會把{name}改名為{new}。",
                     "将会把{name}改名为{new}。"),
    "next_none": (
        "Nothing is scheduled to run.",
        "目前沒有排定要執行的任務。",
        "目前没有排定要执行的任务。",
    ),
    "next_none_of": (
        "{name} has no next run ({status}).",
        "{name}沒有下一次執行（{status}）。",
        "{name}没有下一次执行（{status}）。",
    ),
    "next_list": (
        "Next runs:",
        "接下來的執行：",
        "接下来的执行：",
    ),
    "skipped": (
        "OK, skipped {name} at {at}; it runs again {next}.",
        "好的，已跳過{name} {at} 的那次執行，下次執行 {next}。",
        "好的，已跳过{name} {at} 的那次执行，下次执行 {next}。",
    ),
    "skipped_last": (
        "OK, skipped {name} at {at}; that was its last run.",
        "好的，已跳過{name} {at} 的那次執行；那是它最後一次。",
        "好的，已跳过{name} {at} 的那次执行；那是它最后一次。",
    ),
    "would_skip": ("Would skip {name} at {at}.", "將會跳過{name} {at} 的那次執行。",
                   "将会跳过{name} {at} 的那次执行。"),
    "skip_once": (
        "{name} runs only once, so there is no next run to skip; pause or delete it instead. "
        "Nothing was changed.",
        "{name}只會執行一次，沒有「下一次」可以跳過；請改用暫停或刪除。沒有做任何變更。",
        "{name}只会执行一次，没有“下一次”可以跳过；请改用暂停或删除。没有做任何更改。",
    ),
    "skip_not_scheduled": (
        "{name} is {status} and has no next run to skip; nothing was changed.",
        "{name}已經{status}，沒有下一次執行可以跳過；沒有做任何變更。",
        "{name}已经{status}，没有下一次执行可以跳过；没有做任何更改。",
    ),
    "skip_started": (
        "{name} has already started its run of {at}, so nothing was skipped.",
        "{name} {at} 的那次執行已經開始，所以沒有跳過任何執行。",
        "{name} {at} 的那次执行已经开始，所以没有跳过任何执行。",
    ),
    "skip_other_day": (
        "The next run of {name} is {next}, not {day}; only the next run can be skipped. "
        "Nothing was changed.",
        "{name}的下一次執行是 {next}，不是{day}；只能跳過下一次執行。沒有做任何變更。",
        "{name}的下一次执行是 {next}，不是{day}；只能跳过下一次执行。没有做任何更改。",
    ),
    "paused": (
        "OK, paused {name}. Say “resume {plain}” to start it again.",
        "好的，已暫停{name}。要恢復時請說「恢復{plain}」。",
        "好的，已暂停{name}。要恢复时请说“恢复{plain}”。",
    ),
    "already_paused": (
        "{name} is already paused.",
        "{name}已經是暫停狀態。",
        "{name}已经是暂停状态。",
    ),
    "not_pausable": (
        "{name} is {status} and has nothing left to pause.",
        "{name}已經{status}，沒有可以暫停的執行。",
        "{name}已经{status}，没有可以暂停的执行。",
    ),
    "resumed": (
        "OK, resumed {name}; next run {next}.",
        "好的，已恢復{name}，下次執行 {next}。",
        "好的，已恢复{name}，下次执行 {next}。",
    ),
    "resumed_done": (
        "OK, resumed {name}; its time has passed and it already ran, so it will not run again.",
        "好的，已恢復{name}；它的時間已過且已執行過，不會再執行。",
        "好的，已恢复{name}；它的时间已过且已执行过，不会再执行。",
    ),
    "not_paused": (
        "{name} is not paused; next run {next}.",
        "{name}沒有暫停，下次執行 {next}。",
        "{name}没有暂停，下次执行 {next}。",
    ),
    "not_resumable": (
        "{name} is {status} and cannot be resumed.",
        "{name}已經{status}，無法恢復。",
        "{name}已经{status}，无法恢复。",
    ),
    "running": (  # {where}: nl.reply.channel_words of the task's channels
        "OK, running {name} now{where}; the result will also be in its runs.",
        "好的，現在執行{name}{where}；結果也會出現在執行紀錄。",
        "好的，现在执行{name}{where}；结果也会出现在执行记录。",
    ),
    "last_ok": (
        "The last result of {name} ({at}): {text}",
        "{name}上次的結果（{at}）：{text}",
        "{name}上次的结果（{at}）：{text}",
    ),
    "last_failed": (
        "The last run of {name} ({at}) failed: {text}",
        "{name}上次執行（{at}）失敗：{text}",
        "{name}上次执行（{at}）失败：{text}",
    ),
    "last_none": (
        "{name} has not finished a run yet; next run {next}.",
        "{name}還沒有執行完成的紀錄，下次執行 {next}。",
        "{name}还没有执行完成的记录，下次执行 {next}。",
    ),
    "ask_delete": (
        "Delete {name}, {when}? It cannot be undone. Answer yes within {minutes} minutes to "
        "confirm.",
        "確定要刪除{name}嗎？它的時間是{when}。刪除後無法復原。"
        "請在 {minutes} 分鐘內回答「是」確認。",
        "确定要删除{name}吗？它的时间是{when}。删除后无法恢复。"
        "请在 {minutes} 分钟内回答“是”确认。",
    ),
    "ask_change": (
        "Change {name} from {old} to {new}? Next run would be {next}.{once} Answer yes within "
        "{minutes} minutes to confirm.",
        "確定要把{name}從「{old}」改成「{new}」嗎？改後下次執行 {next}。{once}"
        "請在 {minutes} 分鐘內回答「是」確認。",
        "确定要把{name}从“{old}”改成“{new}”吗？改后下次执行 {next}。{once}"
        "请在 {minutes} 分钟内回答“是”确认。",
    ),
    "once": (" It would then run only once.", "改後只會執行一次。", "改后只会执行一次。"),
    "no_when": (
        "To when? Say the new time too, e.g. “move the water reminder to 7am”. Nothing was "
        "changed.",
        "要改到什麼時間呢？請一起說出新時間，例如「把喝水提醒改到每天晚上十點」。沒有做任何變更。",
        "要改到什么时间呢？请一起说出新时间，例如“把喝水提醒改到每天晚上十点”。没有做任何更改。",
    ),
    "deleted": ("OK, deleted {name}.", "好的，已刪除{name}。", "好的，已删除{name}。"),
    "changed": (
        "OK, {name} now runs {when}; next run {next}.",
        "好的，{name}已改為{when}，下次執行 {next}。",
        "好的，{name}已改为{when}，下次执行 {next}。",
    ),
    "declined": ("OK, nothing was changed.", "好的，沒有做任何變更。", "好的，没有做任何更改。"),
    "would": (
        " (dry run: nothing was changed)",
        "（試算：沒有做任何變更）",
        "（试算：没有做任何更改）",
    ),
    "would_pause": ("Would pause {name}.", "將會暫停{name}。", "将会暂停{name}。"),
    "would_resume": ("Would resume {name}.", "將會恢復{name}。", "将会恢复{name}。"),
    "would_run": ("Would run {name} now.", "將會立即執行{name}。", "将会立即执行{name}。"),
    "would_ask_delete": (
        "Would ask you to confirm deleting {name}, {when}.",
        "將會請你確認是否刪除{name}，它的時間是{when}。",
        "将会请你确认是否删除{name}，它的时间是{when}。",
    ),
    "would_ask_change": (
        "Would ask you to confirm moving {name} from {old} to {new}.",
        "將會請你確認是否把{name}從「{old}」改成「{new}」。",
        "将会请你确认是否把{name}从“{old}”改成“{new}”。",
    ),
    "would_delete": ("Would delete {name}.", "將會刪除{name}。", "将会删除{name}。"),
    "would_change": (
        "Would move {name} to {when}.",
        "將會把{name}改為{when}。",
        "将会把{name}改为{when}。",
    ),
    "stale": (
        "{name} changed after I asked, so nothing was done; ask again.",
        "{name}在我詢問之後有變動，所以沒有執行；請再說一次。",
        "{name}在我询问之后有变动，所以没有执行；请再说一次。",
    ),
    "gone": (
        "That task no longer exists, so nothing was done.",
        "那個任務已經不存在，所以沒有執行。",
        "那个任务已经不存在，所以没有执行。",
    ),
    "invalid": (
        "This is not a confirmation I gave you; nothing was done.",
        "這不是我給你的確認碼，沒有執行任何變更。",
        "这不是我给你的确认码，没有执行任何更改。",
    ),
    "expired": (
        "This confirmation has expired; nothing was done. Ask again.",
        "這個確認已經過期，沒有執行任何變更；請再說一次。",
        "这个确认已经过期，没有执行任何更改；请再说一次。",
    ),
    "none": ("none", "無", "无"),
    "now": ("now", "立即", "立即"),
}
_STATUS: dict[str, tuple[str, str, str]] = {
    "scheduled": ("scheduled", "排定", "排定"), "running": ("running", "執行中", "执行中"),
    "paused": ("paused", "暫停", "暂停"), "completed": ("completed", "完成", "完成"),
    "failed": ("failed", "失敗", "失败"), "cancelled": ("deleted", "刪除", "删除"),
}
_INDEX = {"en": 0, "zh-Hant": 1, "zh-Hans": 2}


def say(key: str, language: Language, **values: object) -> str:
    return _TEXTS[key][_INDEX[language]].format(**values)


def status_word(status: str, language: Language) -> str:
    return _STATUS.get(status, (status,) * 3)[_INDEX[language]]


def quoted(name: str, language: Language) -> str:
    return f"“{name}”" if language == "en" else f"「{name}」"


def when_words(params: JobParams, language: Language) -> str:
    """"every day at 09:00 (Asia/Taipei)", "2026-06-23 15:00（Asia/Taipei）"."""
    if params.type == "immediate":
        return say("now", language)
    if params.type == "recurring" and params.schedule:
        what = describe(params.schedule, language)
    elif params.time:
        what = local_time(datetime.fromisoformat(params.time), params.timezone)
    else:
        what = "-"
    return f"{what} ({params.timezone})" if language == "en" else f"{what}（{params.timezone}）"


def local_time(instant: datetime | None, timezone: str, language: Language = "en") -> str:
    if instant is None:
        return say("none", language)
    if instant.tzinfo is None:  # a one-time job's local time without an offset
        instant = instant.replace(tzinfo=ZoneInfo(timezone))
    return instant.astimezone(ZoneInfo(timezone)).strftime("%Y-%m-%d %H:%M")


def task_line(index: int, view: JobView, language: Language) -> str:
    """One task of a list: number, name, when, and its next run or its status."""
    job = view.job
    line = f"{index}. {quoted(job.name, language)} {when_words(job.params, language)}"
    if view.status in ("scheduled", "running") and job.next_run_at is not None:
        nxt = local_time(job.next_run_at, job.params.timezone, language)
        return line + (f", next run {nxt}" if language == "en" else f"，下次 {nxt}")
    state = status_word(view.status, language)
    return line + (f", {state}" if language == "en" else f"，{state}")


def next_line(index: int, view: JobView, language: Language) -> str:
    """One task of a "what's next?" answer: number, name and its next run, local time."""
    job = view.job
    at = local_time(job.next_run_at, job.params.timezone, language)
    zone = f" ({job.params.timezone})" if language == "en" else f"（{job.params.timezone}）"
    return f"{index}. {quoted(job.name, language)} {at}{zone}"
