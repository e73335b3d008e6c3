"""Chat requests about tasks the user already has: list, what runs next, pause, resume, run
now, skip the next run, rename, show the last result, delete and change the time (these two
confirmed first). Offline, without a model.

Flow of one request (an ``Intent`` from ``chat.intents``)::

    list ─► the tasks, nothing changed
    next ─► the scheduled tasks (those the words name, if any), soonest first
    other ─► the user's tasks ─► best_matches(target)
               ├─ none    ─► "no such task", nothing changed
               ├─ several ─► "which one?", the candidates numbered and a choice token,
               │             nothing changed; the next call with ``confirm`` = that token and
               │             "2" / "the second one" / 第二個 goes on with the second one
               └─ one ─┬─ pause / resume / run now / skip next / rename / last result: done
                       │  at once
                       └─ delete / change time: a question and a confirmation token,
                          nothing changed
    next call with ``confirm`` = token (and "yes", or no message) ─► checked (still the task
    the question was about), then carried out as a compare-and-set on the version just read;
    "no" changes nothing.

Nothing here creates a task: a request to manage one that names nothing is answered, never
turned into a new task.
"""

from __future__ import annotations

from collections.abc import Awaitable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any, Literal, TypeVar
from zoneinfo import ZoneInfo

from onthedot import nl
from onthedot.chat.confirm import (
    CONFIRM_TTL_SECONDS,
    MAX_CHOICES,
    Confirmation,
    confirm_key,
    issue,
    job_fingerprint,
    verify,
)
from onthedot.chat.days import day_named
from onthedot.chat.intents import (
    INTENTS,
    LAST,
    Intent,
    IntentKind,
    mentions_time,
    names_a_day,
)
from onthedot.chat.match import best_matches, task_words, words
from onthedot.chat.replies import (
    local_time,
    next_line,
    quoted,
    say,
    status_word,
    task_line,
    when_words,
)
from onthedot.delivery.render import output_text
from onthedot.domain.errors import ConflictError, NotFoundError, ValidationError
from onthedot.domain.models import JobParams, JobRun, RunStatus
from onthedot.nl.parts import Language
from onthedot.nl.reply import channel_words
from onthedot.service import JobPatch, JobService, JobView

MAX_TASKS_SCANNED = 500  # tasks a request is matched against (newest first)
LIST_PAGE = 100  # the service's largest page
MAX_LISTED = MAX_CHOICES  # lines of a list answer; the rest is in GET /v1/jobs
MAX_NEXT = 5  # tasks a "what's next?" answer names
MAX_RESULT_CHARS = 500  # of a last result, said back in the reply
RECENT_RUNS = 20  # runs looked through for the last finished one

# Statuses in which an intent makes sense: among tasks named alike, these are preferred.
_FITS: dict[IntentKind, tuple[str, ...]] = {
    "pause": ("scheduled", "running"), "resume": ("paused",),
    "delete": ("scheduled", "running", "paused"),
    "change_time": ("scheduled", "running", "paused"), "run_now": ("scheduled", "paused"),
    "last_result": ("scheduled", "running", "paused", "completed", "failed"),
    "rename": ("scheduled", "running", "paused", "completed", "failed"),
    "skip_next": ("scheduled", "running"), "next": ("scheduled", "running"),
}
_FINISHED = (RunStatus.SUCCEEDED, RunStatus.FAILED)
T = TypeVar("T")


@dataclass(frozen=True)
class Managed:
    """The answer to a request about existing tasks (the front door makes it a ChatAnswer)."""

    reply: str
    intent: IntentKind
    language: Language
    changed: list[JobView] = field(default_factory=list)  # what this request changed
    candidates: list[JobView] = field(default_factory=list)  # what it is about, unchanged
    run: JobRun | None = None  # run now: the new run; last result: the run shown
    token: str | None = None  # delete / change time / which one: pass back as `confirm`
    expires_at: datetime | None = None
    understood: dict[str, Any] | None = None  # change time: the new time as parsed
    choice: bool = False  # the token answers "which one?" (a number), not yes or no


class Manager:
    def __init__(self, service: JobService) -> None:
        self.service = service

    # --- a request ----------------------------------------------------------------------
    async def handle(self, intent: Intent, user_id: str, *, timezone: str,
                     timezone_given: bool, dry_run: bool) -> Managed:
        lang = intent.language
        tasks = await self._tasks(user_id)
        if intent.kind == "list":
            return self._list(tasks, lang)
        if intent.kind == "next" and not words(intent.target):
            return self._next(tasks, lang)
        if not tasks:
            return Managed(say("no_tasks", lang), intent.kind, lang)
        if intent.kind == "change_time" and not intent.when:
            return Managed(say("no_when", lang), intent.kind, lang)
        found = _find(intent, tasks)
        if not found:
            text = say("no_match", lang, words=intent.target)
            if mentions_time(intent.target):
                text += say("no_match_new", lang)
            return Managed(text, intent.kind, lang)
        if intent.kind == "next":
            return self._next(found, lang)
        if len(found) > 1:
            return await self._which(intent, user_id, found,
                                     timezone if timezone_given else None)
        return await self._act(intent, user_id, found[0], timezone=timezone,
                               timezone_given=timezone_given, dry_run=dry_run)

    async def _act(self, intent: Intent, user_id: str, view: JobView, *, timezone: str,
                   timezone_given: bool, dry_run: bool) -> Managed:
        """Carry out ``intent`` on the one task it names."""
        lang = intent.language
        if intent.kind == "rename":
            return await self._rename(intent, user_id, view, dry_run)
        if intent.kind == "skip_next":
            return await self._skip(intent, user_id, view, timezone, dry_run)
        if intent.kind == "pause":
            return await self._pause(user_id, view, lang, dry_run)
        if intent.kind == "resume":
            return await self._resume(user_id, view, lang, dry_run)
        if intent.kind == "run_now":
            return await self._run_now(user_id, view, lang, dry_run)
        if intent.kind == "last_result":
            return await self._last_result(user_id, view, lang)
        if intent.kind == "delete":
            return await self._ask_delete(user_id, view, lang, dry_run)
        return await self._ask_change(intent, user_id, view, timezone if timezone_given
                                      else view.job.params.timezone, dry_run)

    async def _tasks(self, user_id: str) -> list[JobView]:
        """The user's tasks that are not deleted, newest first, up to MAX_TASKS_SCANNED."""
        views: list[JobView] = []
        token = None
        while len(views) < MAX_TASKS_SCANNED:
            page = await self.service.list_jobs(user_id, page_size=LIST_PAGE, page_token=token)
            views.extend(v for v in page.items if v.status != "cancelled")
            token = page.next_page_token
            if token is None:
                break
        return views[:MAX_TASKS_SCANNED]

    async def _which(self, intent: Intent, user_id: str, found: list[JobView],
                     timezone: str | None) -> Managed:
        """Several tasks match: list them numbered, with a token that lets the next message
        pick one by its number."""
        lang = intent.language
        key = "which" if words(intent.target) else "which_any"
        head = say(key, lang, n=len(found), words=intent.target)
        listed = found[:MAX_CHOICES]
        text = _with_lines(head, listed, lang)
        if len(found) > MAX_CHOICES:
            text += "\n" + say("list_more", lang)
        now = self.service.clock.now()
        expires = int(now.timestamp()) + CONFIRM_TTL_SECONDS
        token = issue(Confirmation(
            user_id=user_id, intent="choose", job_id="", version=0, expires_at=expires,
            language=lang, choices=tuple(v.job.job_id for v in listed), asked=intent.kind,
            when=intent.when, name=intent.name, timezone=timezone),
            await confirm_key(self.service.store))
        return Managed(text, intent.kind, lang, candidates=found, token=token,
                       expires_at=datetime.fromtimestamp(expires, UTC), choice=True)

    async def chosen(self, found: Confirmation, pick: int, user_id: str, *,
                     dry_run: bool) -> Managed:
        """The answer to "which one?": the request the token carries, on the task picked."""
        lang = found.language
        if pick == LAST:
            pick = len(found.choices)
        if not 1 <= pick <= len(found.choices):
            raise ValidationError(say("pick_range", lang, n=len(found.choices)),
                                  code="invalid_choice", field="message",
                                  expected=f"a number from 1 to {len(found.choices)}")
        try:
            view = await self.service.get_job(user_id, found.choices[pick - 1])
        except NotFoundError:
            raise _stale(say("gone", lang)) from None
        if view.status == "cancelled":
            raise _stale(say("gone", lang))
        intent = Intent(kind=_asked(found), when=found.when, language=lang, name=found.name)
        timezone = found.timezone or view.job.params.timezone
        return await self._act(intent, user_id, view, timezone=timezone,
                               timezone_given=found.timezone is not None, dry_run=dry_run)

    def _next(self, tasks: list[JobView], lang: Language) -> Managed:
        """The scheduled tasks among ``tasks``, soonest next run first."""
        upcoming = sorted((v for v in tasks if v.status in ("scheduled", "running")
                           and v.job.next_run_at is not None),
                          key=lambda v: (v.job.next_run_at, v.job.job_id))
        if not upcoming:
            if len(tasks) == 1:  # the one task the words named
                view = tasks[0]
                return Managed(say("next_none_of", lang, name=quoted(view.job.name, lang),
                                   status=status_word(view.status, lang)), "next", lang,
                               candidates=tasks)
            return Managed(say("next_none", lang), "next", lang)
        shown = upcoming[:MAX_NEXT]
        lines = [say("next_list", lang), *(next_line(i, v, lang) for i, v in
                                           enumerate(shown, 1))]
        return Managed("\n".join(lines), "next", lang, candidates=shown)

    async def _rename(self, intent: Intent, user_id: str, view: JobView,
                      dry_run: bool) -> Managed:
        lang = intent.language
        assert intent.name  # recognise() finds a rename only with its new name
        name, new = quoted(view.job.name, lang), quoted(intent.name, lang)
        if intent.name == view.job.name:
            return Managed(say("same_name", lang, name=name), "rename", lang,
                           candidates=[view])
        if dry_run:
            return Managed(say("would_rename", lang, name=name, new=new) + say("would", lang),
                           "rename", lang, candidates=[view])
        renamed = await self.service.update_job(user_id, view.job.job_id,
                                                JobPatch(name=intent.name))
        return Managed(say("renamed", lang, name=name, new=new), "rename", lang,
                       changed=[renamed])

    async def _skip(self, intent: Intent, user_id: str, view: JobView, timezone: str,
                    dry_run: bool) -> Managed:
        lang = intent.language
        job = view.job
        name = quoted(job.name, lang)
        if job.params.type != "recurring":
            return Managed(say("skip_once", lang, name=name), "skip_next", lang,
                           candidates=[view])
        if view.status not in ("scheduled", "running") or job.next_run_at is None:
            return Managed(say("skip_not_scheduled", lang, name=name,
                               status=status_word(view.status, lang)), "skip_next", lang,
                           candidates=[view])
        at = local_time(job.next_run_at, job.params.timezone, lang)
        if intent.when:
            day = day_named(intent.when, self.service.clock.now(), timezone)
            if day is not None and job.next_run_at.astimezone(
                    ZoneInfo(timezone)).date() != day:
                return Managed(say("skip_other_day", lang, name=name, next=at,
                                   day=intent.when), "skip_next", lang, candidates=[view])
        if dry_run:
            return Managed(say("would_skip", lang, name=name, at=at) + say("would", lang),
                           "skip_next", lang, candidates=[view])
        try:
            skipped = await self.service.skip_next(user_id, job.job_id)
        except ConflictError as exc:
            if exc.code != "run_started":
                raise
            return Managed(say("skip_started", lang, name=name, at=at), "skip_next", lang,
                           candidates=[view])
        after = skipped.view.job.next_run_at
        at = local_time(skipped.run.scheduled_at, job.params.timezone, lang)
        text = (say("skipped_last", lang, name=name, at=at) if after is None else
                say("skipped", lang, name=name, at=at,
                    next=local_time(after, job.params.timezone, lang)))
        return Managed(text, "skip_next", lang, changed=[skipped.view], run=skipped.run)

    def _list(self, tasks: list[JobView], lang: Language) -> Managed:
        if not tasks:
            return Managed(say("list_none", lang), "list", lang)
        text = _with_lines(say("list", lang, n=len(tasks)), tasks[:MAX_LISTED], lang)
        if len(tasks) > MAX_LISTED:
            text += "\n" + say("list_more", lang)
        return Managed(text, "list", lang, candidates=tasks)

    async def _pause(self, user_id: str, view: JobView, lang: Language,
                     dry_run: bool) -> Managed:
        name = quoted(view.job.name, lang)
        if view.status == "paused":
            return Managed(say("already_paused", lang, name=name), "pause", lang,
                           candidates=[view])
        if view.status not in ("scheduled", "running"):
            return Managed(say("not_pausable", lang, name=name,
                               status=status_word(view.status, lang)), "pause", lang,
                           candidates=[view])
        if dry_run:
            return Managed(say("would_pause", lang, name=name) + say("would", lang), "pause",
                           lang, candidates=[view])
        paused = await self.service.pause_job(user_id, view.job.job_id)
        return Managed(say("paused", lang, name=name, plain=view.job.name), "pause", lang,
                       changed=[paused])

    async def _resume(self, user_id: str, view: JobView, lang: Language,
                      dry_run: bool) -> Managed:
        job = view.job
        name = quoted(job.name, lang)
        if view.status in ("scheduled", "running"):
            return Managed(say("not_paused", lang, name=name, next=local_time(
                job.next_run_at, job.params.timezone, lang)), "resume", lang, candidates=[view])
        if view.status != "paused":
            return Managed(say("not_resumable", lang, name=name,
                               status=status_word(view.status, lang)), "resume", lang,
                           candidates=[view])
        if dry_run:
            return Managed(say("would_resume", lang, name=name) + say("would", lang), "resume",
                           lang, candidates=[view])
        resumed = await self.service.resume_job(user_id, job.job_id)
        if resumed.job.next_run_at is None:
            return Managed(say("resumed_done", lang, name=name), "resume", lang,
                           changed=[resumed])
        return Managed(say("resumed", lang, name=name, next=local_time(
            resumed.job.next_run_at, job.params.timezone, lang)), "resume", lang,
            changed=[resumed])

    async def _run_now(self, user_id: str, view: JobView, lang: Language,
                       dry_run: bool) -> Managed:
        name = quoted(view.job.name, lang)
        if dry_run:
            return Managed(say("would_run", lang, name=name) + say("would", lang), "run_now",
                           lang, candidates=[view])
        run = await self.service.run_job_now(user_id, view.job.job_id)
        after = await self.service.get_job(user_id, view.job.job_id)
        return Managed(say("running", lang, name=name,
                           where=channel_words(after.job.notify, lang)), "run_now", lang,
                       changed=[after],
                       run=run)

    async def _last_result(self, user_id: str, view: JobView, lang: Language) -> Managed:
        job = view.job
        name = quoted(job.name, lang)
        runs = await self.service.list_runs(user_id, job.job_id, page_size=RECENT_RUNS)
        last = next((r for r in runs.items if r.status in _FINISHED), None)
        if last is None:
            return Managed(say("last_none", lang, name=name, next=local_time(
                job.next_run_at, job.params.timezone, lang)), "last_result", lang,
                candidates=[view])
        at = local_time(last.finished_at or last.scheduled_at, job.params.timezone, lang)
        if last.status is RunStatus.SUCCEEDED:
            text = say("last_ok", lang, name=name, at=at,
                       text=output_text(last.output, MAX_RESULT_CHARS))
        else:
            text = say("last_failed", lang, name=name, at=at,
                       text=(last.error or "")[:MAX_RESULT_CHARS])
        return Managed(text, "last_result", lang, candidates=[view], run=last)

    async def _ask_delete(self, user_id: str, view: JobView, lang: Language,
                          dry_run: bool) -> Managed:
        name = quoted(view.job.name, lang)
        when = when_words(view.job.params, lang)
        if dry_run:
            return Managed(say("would_ask_delete", lang, name=name, when=when)
                           + say("would", lang), "delete", lang, candidates=[view])
        text = say("ask_delete", lang, name=name, when=when,
                   minutes=CONFIRM_TTL_SECONDS // 60)
        return await self._question(text, "delete", user_id, view, lang, None)

    async def _ask_change(self, intent: Intent, user_id: str, view: JobView, timezone: str,
                          dry_run: bool) -> Managed:
        lang = intent.language
        name = quoted(view.job.name, lang)
        assert intent.when  # handle() answered a change without a time
        # What the parser cannot read exactly is a ParseError naming the fragment (HTTP 422).
        parsed = await nl.parse_async(intent.when, now=self.service.clock.now(),
                                      timezone=timezone)
        params = parsed.job_params
        if not names_a_day(intent.when):
            params = at_time_of_day(view.job.params, params) or params
        if params.type != "immediate":  # a new time keeps the task's flexible window
            params = replace(params,
                             flexible_window_seconds=view.job.params.flexible_window_seconds)
        old, new = when_words(view.job.params, lang), when_words(params, lang)
        if dry_run:
            return Managed(say("would_ask_change", lang, name=name, old=old, new=new)
                           + say("would", lang), "change_time", lang, candidates=[view],
                           understood=replace(parsed, job_params=params).to_dict())
        upcoming = replace(parsed, job_params=params).next_runs(1)
        once = (say("once", lang) if view.job.params.type == "recurring"
                and params.type != "recurring" else "")
        text = say("ask_change", lang, name=name, old=old, new=new, once=once,
                   next=local_time(upcoming[0] if upcoming else None, params.timezone, lang),
                   minutes=CONFIRM_TTL_SECONDS // 60)
        managed = await self._question(text, "change_time", user_id, view, lang, params)
        return replace(managed, understood=replace(parsed, job_params=params).to_dict())

    async def _question(self, text: str, intent: Literal["delete", "change_time"], user_id: str,
                        view: JobView,
                        lang: Language, params: JobParams | None) -> Managed:
        now = self.service.clock.now()
        expires = int(now.timestamp()) + CONFIRM_TTL_SECONDS
        token = issue(Confirmation(user_id=user_id, intent=intent, job_id=view.job.job_id,
                                   version=view.job.version, expires_at=expires,
                                   language=lang, fingerprint=job_fingerprint(view.job),
                                   params=params),
                      await confirm_key(self.service.store))
        return Managed(text, intent, lang, candidates=[view], token=token,
                       expires_at=datetime.fromtimestamp(expires, UTC))

    # --- the answer to a question -------------------------------------------------------
    async def confirm(self, token: str, user_id: str, *, agreed: bool | None,
                      pick: int | None = None, dry_run: bool, language: Language) -> Managed:
        """Carry out (``agreed``) or drop what ``token`` asked about; for a "which one?" token,
        carry its request out on the task numbered ``pick``. A token this server did not give
        this user, an expired one, or one whose task changed since (a replay included:
        carrying it out changed the task) is refused and changes nothing."""
        found = verify(token, await confirm_key(self.service.store), user_id=user_id)
        if found is None:
            raise ValidationError(say("invalid", language), code="invalid_confirmation",
                                  field="confirm", expected="the confirmation_token of the "
                                  "previous answer, unchanged")
        lang = found.language
        if found.expired(self.service.clock.now()):
            raise ValidationError(say("expired", lang), code="confirmation_expired",
                                  field="confirm", expected="a confirmation_token less than "
                                  f"{CONFIRM_TTL_SECONDS // 60} minutes old; ask again")
        if found.intent == "choose":
            if pick is not None:
                return await self.chosen(found, pick, user_id, dry_run=dry_run)
            if agreed is False:
                return Managed(say("declined", lang), _asked(found), lang)
            raise ValidationError(say("pick_range", lang, n=len(found.choices)),
                                  code="invalid_choice", field="message",
                                  expected=f"a number from 1 to {len(found.choices)}")
        if agreed is None:
            raise ValidationError(say("yes_or_no", lang), code="invalid_choice",
                                  field="message", expected="yes or no")
        view = await self._as_confirmed(user_id, found)
        name = quoted(view.job.name, lang)
        if not agreed:
            asked: IntentKind = "delete" if found.intent == "delete" else "change_time"
            return Managed(say("declined", lang), asked, lang, candidates=[view])
        if found.intent == "delete":
            if dry_run:
                return Managed(say("would_delete", lang, name=name) + say("would", lang),
                               "delete", lang, candidates=[view])
            await self._guarded(lang, view, self.service.delete_job(
                user_id, found.job_id, expected_version=view.job.version))
            deleted = await self.service.get_job(user_id, found.job_id)
            return Managed(say("deleted", lang, name=name), "delete", lang, changed=[deleted])
        assert found.params is not None  # a change_time token always carries the new time
        when = when_words(found.params, lang)
        if dry_run:
            return Managed(say("would_change", lang, name=name, when=when) + say("would", lang),
                           "change_time", lang, candidates=[view])
        changed = await self._guarded(lang, view, self.service.update_job(
            user_id, found.job_id, JobPatch(params=found.params),
            expected_version=view.job.version))
        return Managed(say("changed", lang, name=name, when=when, next=local_time(
            changed.job.next_run_at, found.params.timezone, lang)), "change_time", lang,
            changed=[changed])

    async def _as_confirmed(self, user_id: str, found: Confirmation) -> JobView:
        """The task as it is now, if it is still the task the question was about: the same
        version, or a later one that only the engine moved (see chat.confirm). The change is
        then a compare-and-set on the version read here."""
        try:
            view = await self.service.get_job(user_id, found.job_id)
        except NotFoundError:
            raise _stale(say("gone", found.language)) from None
        same = view.job.version == found.version or job_fingerprint(view.job) == \
            found.fingerprint
        if not same or view.status == "cancelled":
            raise _stale(say("stale", found.language, name=quoted(view.job.name,
                                                                   found.language)))
        return view

    async def _guarded(self, lang: Language, view: JobView,
                       change: Awaitable[T]) -> T:
        """Await the service's change; losing the compare-and-set on the token's version to
        another change is the same refusal as finding the task changed."""
        try:
            return await change
        except ConflictError as exc:
            if exc.code != "version_mismatch":
                raise
            raise _stale(say("stale", lang, name=quoted(view.job.name, lang))) from None


def at_time_of_day(current: JobParams, new: JobParams) -> JobParams | None:
    """``current``'s recurrence at the time of day of the one-time ``new`` ("move the standup
    to 7am": still every weekday, now at 07:00), in ``new``'s timezone. None when ``current``
    does not fire once a day at one time (every 30 minutes, at 7 and 19) or ``new`` is not a
    time of day: then the change is what was said, and the question says it runs only once."""
    if current.type != "recurring" or not current.schedule or new.type != "one-time" or \
            not new.time:
        return None
    at = datetime.fromisoformat(new.time)
    fields = current.schedule.split()
    if len(fields) == 5 and fields[0].isdigit() and fields[1].isdigit():
        schedule = " ".join([str(at.minute), str(at.hour), *fields[2:]])
    elif current.schedule.upper().startswith("RRULE:") and "\n" not in current.schedule:
        parts = dict(p.split("=", 1) for p in current.schedule[6:].split(";") if "=" in p)
        if parts.get("FREQ", "").upper() not in ("DAILY", "WEEKLY", "MONTHLY", "YEARLY") or \
                not parts.get("BYHOUR", "").isdigit() or not parts.get("BYMINUTE", "0").isdigit():
            return None
        parts.update(BYHOUR=str(at.hour), BYMINUTE=str(at.minute))
        if "BYSECOND" in parts:
            parts["BYSECOND"] = "0"
        schedule = "RRULE:" + ";".join(f"{k}={v}" for k, v in parts.items())
    else:
        return None
    return JobParams("recurring", schedule=schedule, timezone=new.timezone)


def _asked(found: Confirmation) -> IntentKind:
    """The request a "which one?" token carries (signed by us: always a known kind)."""
    return next((k for k in INTENTS if k == found.asked), "list")


def _find(intent: Intent, tasks: list[JobView]) -> list[JobView]:
    found = best_matches(intent.target,
                         [(v, task_words(v.job.name, v.job.action)) for v in tasks])
    if len(found) > 1:
        # "pause the water reminder" where one of two is paused already: the other one.
        fitting = [v for v in found if v.status in _FITS[intent.kind]]
        if len(fitting) == 1:
            return fitting
    return found


def _with_lines(head: str, tasks: list[JobView], lang: Language) -> str:
    return "\n".join([head, *(task_line(i, v, lang) for i, v in enumerate(tasks, 1))])


def _stale(detail: str) -> ConflictError:
    return ConflictError(detail, code="confirmation_stale", field="confirm",
                         expected="ask again: the task changed (or was deleted) after the "
                                  "question, or this confirmation was used already")


__all__ = ["Managed", "Manager"]
