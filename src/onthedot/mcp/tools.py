"""The MCP tools: verbs over the service layer, with hand-written flat schemas.

``create_task``, ``list_tasks``, ``get_task``, ``update_task``, ``pause_task``, ``resume_task``,
``delete_task``, ``run_task_now``, ``skip_next_run``, ``backfill_task``, and for delivered
results ``list_inbox`` and ``mark_inbox_read``. A task is a job of the REST API (``task_id``
is its ``job_id``) and is rendered exactly as ``GET /v1/jobs/{job_id}`` renders it.

Where results go is given flat too: ``notify_inbox`` (default true), ``notify_email``,
``notify_webhook`` and ``notify_webhook_format`` become the job's ``notify`` list; on
``update_task`` each one changes only its own channel ("" removes an address or URL).

What a task does is chosen from its text unless ``kind`` says (``actions.choice``): a
``news_digest`` when the text asks for news ("總結財經新聞" -> finance), a ``message`` reminder
for a reminder or an errand, and, only with a model configured, a ``prompt`` when the text asks
for something written or told ("write me a haiku") or for more than a digest does ("translate
the top story into French"). The same words choose the same action with and without a model,
except those two. ``update_task`` with new text keeps the task's kind; a ``kind`` switches it.
``create_task`` answers with a ``confirmation`` that says when, what each run does and where
the results go.

The time of a task is given as exactly one of ``when`` (natural language, read by
``onthedot.nl`` in the task's timezone), ``schedule`` (cron, RRULE or VEVENT), ``time`` (ISO 8601)
or ``in`` (an offset from now). There is no implicit "now": a forgotten time is an error, and
``when: "now"`` runs a task immediately. Errors name the tool argument to fix (``schedule``,
``timezone`` ...), not the REST field it became.

Two guards against a model's likely slips: a ``timezone`` argument must name a place, not an
abbreviation such as "EST" (``zones``), and ``update_task`` does not turn a recurring task into
a one-time one unless ``confirm_type_change`` is true ("run it now" is usually run_task_now).
"""

from __future__ import annotations

from collections.abc import Awaitable, Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar, cast
from urllib.parse import urlsplit

from mcp.types import ToolAnnotations

from onthedot import nl
from onthedot.actions.choice import KINDS, Choice, Kind, action_of_kind, choose_action
from onthedot.domain.errors import OnTheDotError, ParseError, ValidationError
from onthedot.domain.ids import MAX_FLEXIBLE_WINDOW_SECONDS
from onthedot.domain.models import JobParams, default_notify
from onthedot.mcp import results
from onthedot.mcp.registry import Caller, ToolDef, ToolError, ToolRegistry
from onthedot.mcp.zones import check_region
from onthedot.nl.channels import read_channels
from onthedot.nl.lang import detect
from onthedot.nl.parts import Language
from onthedot.nl.reply import Doing
from onthedot.schedule import compile_schedule, run_bounded
from onthedot.schedule.local import load_timezone
from onthedot.service import MAX_BACKFILL_RUNS, JobPatch, JobSpec, JobView
from onthedot.views import InboxItemOut, JobOut, RunOut

T = TypeVar("T")
TIME_ARGS = ("when", "schedule", "time", "in")
TIME_EXPECTED = ('exactly one of: when (the user\'s words, e.g. "every day at 8am", '
                 '"每天早上八點", "now"), schedule (cron or RRULE), time (ISO 8601) or in '
                 '({"minutes": 15})')
RECENT_RUNS = 5  # runs get_task shows
MAX_TEXT_CHARS = 10_000  # the message action's limit
MAX_OFFSET = {"days": 3660, "hours": 87_840, "minutes": 5_270_400, "seconds": 316_224_000}

# Annotations (docs/mcp.md#tools). destructive: the call overwrites or removes something that no
# other call brings back (update_task replaces the time or the text, delete_task cancels for
# good); pause and resume undo each other. idempotent: the same call again changes nothing more;
# update_task is not, because "in 20 minutes" or "tomorrow" is read anew at every call.
READ_ONLY = ToolAnnotations(readOnlyHint=True, openWorldHint=False)


def _changes(*, idempotent: bool, destructive: bool = False) -> ToolAnnotations:
    return ToolAnnotations(readOnlyHint=False, destructiveHint=destructive,
                           idempotentHint=idempotent, openWorldHint=False)


# --- schemas -----------------------------------------------------------------------------
def _text(description: str, **extra: Any) -> dict[str, Any]:
    return {"type": "string", "description": description, **extra}


def _object(properties: dict[str, Any], required: tuple[str, ...] = ()) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "object", "properties": properties,
                              "additionalProperties": False}
    if required:
        schema["required"] = list(required)
    return schema


TASK_ID = _text("The task's job_id, as returned by create_task or list_tasks.", minLength=1)
CONFIRM_TYPE_CHANGE = {
    "type": "boolean",
    "description": "true only after the user agreed that a recurring task stops repeating: "
                   "needed when the new time (when \"now\", \"tomorrow at 9\", time, in) "
                   "makes a recurring task one-time or immediate. To run it once now and keep "
                   "its schedule, use run_task_now instead."}


def _time_properties(timezone_default: str | None) -> dict[str, Any]:
    zone = (f"Default: {timezone_default}." if timezone_default
            else "Default: the task's current timezone.")
    return {
        "when": _text('When, in the user\'s own words (English or Chinese), parsed by the server: '
                      '"every weekday at 9am", "tomorrow at 3pm", "in 20 minutes", '
                      '"每天早上八點", "下週二早上十點", "now" (runs it immediately).',
                      minLength=1, maxLength=500),
        "schedule": _text('Recurring: 5-field cron ("0 8 * * *" = 08:00 every day), RFC 5545 '
                          'RRULE ("FREQ=WEEKLY;BYDAY=MO,WE;BYHOUR=9;BYMINUTE=0") or a VEVENT, '
                          'read in timezone.', minLength=1, maxLength=4000),
        "time": _text('Once, at an ISO 8601 time: "2026-06-22T08:00:00" (wall time in timezone) '
                      'or with an offset ("2026-06-22T08:00:00+08:00").', minLength=1,
                      maxLength=64),
        "in": {"type": "object", "description": 'Once, this long from now, e.g. {"minutes": 15} '
               'or {"days": 1, "hours": 2}; units left out or null count as 0.',
               "additionalProperties": False,
               "properties": {unit: {"type": "integer", "minimum": 0, "maximum": limit,
                                     "description": f"whole {unit}, 0 or more"}
                              for unit, limit in MAX_OFFSET.items()}},
        "timezone": _text(f"IANA region timezone the time is read in, e.g. Asia/Taipei or "
                          f"America/New_York (not an abbreviation such as EST or GMT+8). {zone}",
                          minLength=1, maxLength=64),
    }


def _what_properties(*, on_update: bool) -> dict[str, Any]:
    auto = ("Omitted: the task keeps its kind (new task text changes its text)." if on_update
            else "Default auto: news_digest when the task asks for news, message for a "
                 "reminder or an errand, prompt (only with a model on the server) when it asks "
                 "for something written or told, or for more than a digest does. Leave it out "
                 "unless the user named the kind.")
    title = "Omitted: unchanged." if on_update else "Default: the start of the task text."
    task = ("New words for what the task does; its kind is kept. Omitted: unchanged."
            if on_update else "What to do when it fires: the prompt or message, e.g. "
            "\"summarize the financial news\". Default with when: the rest of that sentence.")
    return {
        "title": _text(f"A short name for the task, at most 200 characters. {title}",
                       maxLength=200),
        "task": _text(task, minLength=1, maxLength=MAX_TEXT_CHARS),
        "kind": _text("What each run does: prompt (a model carries out the task; needs a "
                      "model on the server), news_digest (a digest of news on the task's "
                      "topic: finance, technology or world), message (a reminder with the "
                      f"task text), auto. {auto}", enum=["auto", *KINDS]),
    }


def _option_properties(*, on_update: bool) -> dict[str, Any]:
    policy = "Omitted: unchanged." if on_update else "Default: run_late."
    return {
        "webhook_url": _text("Instead of a message, POST {\"task\": <task>} to this http(s) URL "
                             "when it fires.", maxLength=2000),
        "misfire_policy": _text("If a run is late (server down): run_late runs it anyway, skip "
                                f"drops it. {policy}", enum=["run_late", "skip"]),
        "overlap_policy": _text(
            "A repeating task whose previous run is still running when the next time comes: "
            "skip that time, buffer_one (run the latest such time as soon as the previous run "
            "ends) or allow_all (run each at its time, side by side). "
            + ("Omitted: unchanged." if on_update else "Default: skip."),
            enum=["skip", "buffer_one", "allow_all"]),
        "flexible_window_seconds": {
            "type": "integer", "minimum": 0, "maximum": MAX_FLEXIBLE_WINDOW_SECONDS,
            "description": "Let each run start up to this many seconds late (0-3600), at the "
                           "task's own fixed point in the window, so many tasks due at the "
                           "same minute spread out. Only when the user accepts a flexible "
                           "time; not for a task run now. "
                           + ("Omitted: unchanged." if on_update else "Default: 0 (on time).")},
        **NOTIFY_PROPERTIES,
    }


NOTIFY_ARGS = ("notify_inbox", "notify_email", "notify_webhook", "notify_webhook_format")
NOTIFY_PROPERTIES: dict[str, Any] = {
    "notify_inbox": {"type": "boolean", "description": "Put each result in the user's inbox "
                     "(see list_inbox). Default: true (update_task: unchanged)."},
    "notify_email": _text("Also e-mail each result to this address. \"\" removes the e-mail "
                          "(update_task).", maxLength=254),
    "notify_webhook": _text("Also POST each result to this http(s) URL (signed). \"\" removes "
                            "it (update_task).", maxLength=2000),
    "notify_webhook_format": _text("Payload of notify_webhook: json (default) or slack (a Slack "
                                   "incoming-webhook message).", enum=["json", "slack"]),
}


# --- time and action from arguments ------------------------------------------------------
@dataclass(frozen=True)
class TimePlan:
    arg: str  # the argument the time came from
    params: JobParams
    parsed: nl.ParseResult | None = None


async def _plan_time(args: Mapping[str, Any], timezone: str, now: datetime,
                     caller: Caller) -> TimePlan | None:
    given = [name for name in TIME_ARGS if name in args]
    if len(given) > 1:
        raise ToolError(f"give the time only once (got {', '.join(given)})",
                        code="conflicting_arguments", field=given[1], expected=TIME_EXPECTED)
    if not given:
        return None
    arg = given[0]
    if arg == "when":
        caller.service.take_parse(caller.user_id)  # the parse rate, as /v1/parse and /v1/chat
        try:
            parsed = await nl.parse_async(args["when"], now=now, timezone=timezone)
        except ParseError as exc:
            raise ToolError(exc.message, code=exc.code, field="when", expected=exc.expected,
                            extra={"fragment": exc.field}) from None
        return TimePlan(arg, parsed.job_params, parsed)
    if arg == "schedule":
        return TimePlan(arg, JobParams("recurring", schedule=args["schedule"], timezone=timezone))
    if arg == "time":
        return TimePlan(arg, JobParams("one-time", time=args["time"], timezone=timezone))
    offset = timedelta(**args["in"])
    if offset <= timedelta(0):
        raise ToolError("`in` must add up to at least one second", field="in",
                        expected='an offset such as {"minutes": 15}; when="now" runs it '
                                 'immediately')
    at = (now + offset).astimezone(load_timezone(timezone, field="timezone"))
    return TimePlan(arg, JobParams("one-time", time=at.isoformat(timespec="seconds"),
                                   timezone=timezone))


def _new_params(current: JobParams, plan: TimePlan | None, timezone: str,
                args: Mapping[str, Any]) -> JobParams | None:
    """update_task's job_params, or None for unchanged. A new time keeps the task's flexible
    window (it belongs to the task, not to the time), except that a task made to run now has
    none; REST's PATCH, which replaces job_params as a whole, is the place to drop it."""
    window = args.get("flexible_window_seconds")
    if plan is not None:
        kept = 0 if plan.params.type == "immediate" else current.flexible_window_seconds
        return replace(plan.params, flexible_window_seconds=kept if window is None else window)
    if "timezone" not in args and window is None:
        return None
    return replace(current, timezone=timezone,
                   flexible_window_seconds=(current.flexible_window_seconds if window is None
                                            else window))


def _zone_name(value: str) -> str:
    """The canonical IANA name (a wrong-case name is accepted, as by the REST API)."""
    return load_timezone(value, field="timezone").key


def _timezone(args: Mapping[str, Any], fallback: str, now: datetime) -> str:
    """The zone of the ``timezone`` argument, which must name a place (``zones``), else
    ``fallback``: the deployment's or the task's zone, which is not judged again here."""
    given = args.get("timezone")
    if given is None:
        return _zone_name(fallback)
    check_region(given, now)
    return _zone_name(given)


def _check_type_change(job_params: JobParams, plan: TimePlan | None, name: str,
                       args: Mapping[str, Any]) -> None:
    """A new time that ends a recurring task's repetition needs ``confirm_type_change``: "run
    it now" said to a model is more often run_task_now than "stop repeating it"."""
    if (plan is None or job_params.type != "recurring" or plan.params.type == "recurring"
            or args.get("confirm_type_change") is True):
        return
    becomes = "an immediate task (run once, now)" if plan.params.type == "immediate" else (
        f"a one-time task ({plan.params.time})")
    raise ToolError(
        f"this would turn the recurring task {name!r} ({job_params.schedule}) into {becomes}: "
        "it would not repeat any more. If that is what the user wants, call update_task again "
        "with confirm_type_change: true; to run it once now and keep its schedule, call "
        "run_task_now instead", code="confirmation_required", field="confirm_type_change",
        expected="confirm_type_change: true, after the user agreed that the task stops "
                 "repeating")


def _explicit_kind(args: Mapping[str, Any]) -> Kind | None:
    """The kind the caller picked; None for auto or omitted. A kind and a webhook_url conflict:
    a webhook is a kind of its own."""
    kind = args.get("kind")
    if kind in (None, "auto"):
        return None
    if args.get("webhook_url") is not None:
        raise ToolError("give either kind or webhook_url", code="conflicting_arguments",
                        field="kind", expected="kind (prompt | news_digest | message) for work "
                        "done here, or webhook_url to call a URL instead")
    return cast(Kind, kind)  # one of KINDS: the registry checked the schema's enum


def _webhook_action(text: str | None, webhook_url: str) -> dict[str, Any]:
    action: dict[str, Any] = {"type": "webhook", "url": webhook_url}
    if text:
        action["body"] = {"task": text}
    return action


def _choice(text: str, kind: Kind | None, caller: Caller, language: Language,
            said: str | None = None) -> Choice:
    """The action for ``text``: of ``kind``, or chosen from the words (docs/mcp.md); ``said``
    is the whole sentence the task came from, when there is one."""
    if kind is None:
        return choose_action(text, language=language, said=said,
                             model_configured=bool(caller.service.settings.llm_base_url))
    try:
        return action_of_kind(kind, text, language=language)
    except ValidationError as exc:  # a news_digest whose words name no topic
        raise ToolError(exc.message, code=exc.code, field="task",
                        expected=exc.expected) from None


def _new_choice(args: Mapping[str, Any], text: str | None, caller: Caller,
                language: Language, said: str | None = None) -> Choice | None:
    """The chosen action, or None for a webhook (the caller gave its URL)."""
    kind = _explicit_kind(args)
    if args.get("webhook_url") is not None:
        return None
    if not text:
        raise ToolError("what should the task do?", code="missing_argument", field="task",
                        expected='the task text, e.g. "summarize the financial news" '
                                 '(or a webhook_url)')
    return _choice(text, kind, caller, language, said)


def _changed_action(current: dict[str, Any], fallback_text: str, args: Mapping[str, Any],
                    caller: Caller, timezone: str) -> dict[str, Any] | None:
    """The action after update_task: a new webhook, a switched kind, or the current kind with
    new text; None when neither text, kind nor webhook_url was given."""
    text: str | None = args.get("task")
    kind = _explicit_kind(args)
    if args.get("webhook_url") is not None:
        return _webhook_action(text or _text_of(current), args["webhook_url"])
    if kind is not None and kind != current.get("type"):
        words = text or _text_of(current) or fallback_text
        return _choice(words, kind, caller, detect(words, timezone)).action
    if text is None:
        return None
    kept = current.get("type")
    if kept == "webhook":
        body = current.get("body")
        return {**current, "body": {**(body if isinstance(body, dict) else {}), "task": text}}
    if kept == "prompt":
        return {**current, "prompt": text}
    if kept == "news_digest":
        return _retold_digest(current, text, caller, detect(text, timezone))
    return {**current, "text": text}


def _retold_digest(current: dict[str, Any], text: str, caller: Caller,
                   language: Language) -> dict[str, Any]:
    """A digest told new words: its topic and language re-read from them, its feeds and limits
    kept. A digest with its own feeds may lose its topic (the feeds are what it reads)."""
    try:
        derived = _choice(text, "news_digest", caller, language)
    except ToolError:
        if "feeds" not in current:
            raise
        return {k: v for k, v in current.items() if k != "topic"} | {"language": language}
    return {**current, "topic": derived.topic, "language": derived.language}


def _text_of(action: Mapping[str, Any]) -> str | None:
    body = action.get("body")
    text = (action.get("text") or action.get("prompt")
            or (body.get("task") if isinstance(body, dict) else None))
    return text if isinstance(text, str) else None


def _new_notify(args: Mapping[str, Any]) -> list[dict[str, Any]] | None:
    """The channels the notify_* arguments ask for; None when none was given (the default)."""
    if not any(name in args for name in NOTIFY_ARGS):
        return None
    return _changed_notify([{"channel": "inbox"}], args)


def _changed_notify(current: list[dict[str, Any]],
                    args: Mapping[str, Any]) -> list[dict[str, Any]] | None:
    """``current`` with each channel a notify_* argument names replaced; None if none does."""
    if not any(name in args for name in NOTIFY_ARGS):
        return None
    channels = [dict(c) for c in current]
    if "notify_inbox" in args:
        channels = [c for c in channels if c.get("channel") != "inbox"]
        if args["notify_inbox"]:
            channels.insert(0, {"channel": "inbox"})
    if "notify_email" in args:
        channels = [c for c in channels if c.get("channel") != "email"]
        if args["notify_email"].strip():
            channels.append({"channel": "email", "to": args["notify_email"].strip()})
    if "notify_webhook" in args:
        channels = [c for c in channels if c.get("channel") != "webhook"]
        if args["notify_webhook"].strip():
            channels.append({"channel": "webhook", "url": args["notify_webhook"].strip()})
    if "notify_webhook_format" in args:
        for channel in channels:
            if channel.get("channel") == "webhook":
                channel["format"] = args["notify_webhook_format"]
    return channels


def _notify_field(field: str) -> str:
    """``notify[1].to`` -> the argument that carries it."""
    if not field.startswith("notify"):
        return field
    for suffix, arg in ((".to", "notify_email"), (".url", "notify_webhook"),
                        (".format", "notify_webhook_format")):
        if field.endswith(suffix):
            return arg
    return "notify_inbox"


def _fields(time_arg: str | None, kind_given: bool = False) -> dict[str, str]:
    """Service error fields -> the tool argument that carries them."""
    fields = {"job_params.timezone": "timezone", "action.text": "task",
              "action.type": "kind" if kind_given else "task", "action.prompt": "task",
              "action.topic": "task", "action.body": "task", "action.url": "webhook_url",
              "name": "title", "Idempotency-Key": "idempotency_key", "job_id": "task_id"}
    if time_arg is not None:
        fields |= {"job_params.schedule": time_arg, "job_params.time": time_arg,
                   "job_params.type": time_arg}
    return fields | {"job_params.flexible_window_seconds": "flexible_window_seconds"}


def _remapped(exc: OnTheDotError, fields: Mapping[str, str]) -> None:
    exc.field = fields.get(exc.field or "", exc.field)
    if exc.field is not None:
        exc.field = _notify_field(exc.field)


async def _mapped(call: Awaitable[T], fields: Mapping[str, str]) -> T:
    try:
        return await call
    except OnTheDotError as exc:
        _remapped(exc, fields)
        raise


def _render(view: JobView) -> dict[str, Any]:
    return JobOut.of(view).model_dump(mode="json")


def _utc(instant: datetime) -> str:
    return instant.astimezone(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


async def _preview_runs(spec: JobSpec, caller: Caller, now: datetime) -> list[str]:
    """The next fire times a dry run reports; the schedule is checked as on creation (bounded,
    off the event loop unless cheap)."""
    caller.service.actions.validate(spec.action)
    if spec.params.type == "immediate":
        return [_utc(now)]
    min_interval = caller.service.settings.min_interval
    start = datetime.min.replace(tzinfo=UTC) if spec.params.type == "one-time" else now

    def preview() -> list[datetime]:
        schedule = compile_schedule(spec.params, anchor=now, now=now,
                                    min_interval_seconds=min_interval)
        return schedule.upcoming(start, 3)

    return [_utc(t) for t in await run_bounded(preview)]


# --- handlers ----------------------------------------------------------------------------
async def create_task(args: dict[str, Any], caller: Caller) -> dict[str, Any]:
    now = caller.service.clock.now()
    timezone = _timezone(args, caller.timezone, now)
    plan = await _plan_time(args, timezone, now, caller)
    if plan is None:
        raise ToolError("create_task needs the time of the task", code="missing_argument",
                        field="when", expected=TIME_EXPECTED)
    text = args.get("task") or (plan.parsed.task if plan.parsed else None)
    if text and caller.said is not None:  # chat: its e-mail words became caller.notify
        text = read_channels(text).text
    fields = _fields(plan.arg, kind_given=_explicit_kind(args) is not None)
    notify = _new_notify(args)
    if notify is None:
        notify = default_notify() if caller.notify is None else [dict(c) for c in caller.notify]
    # The task's language: the chat sentence's, else the sentence's when the task came from
    # `when`, else its own words'.
    from_when = plan.parsed is not None and not args.get("task")
    language = (detect(caller.said, timezone) if caller.said
                else plan.parsed.language if plan.parsed is not None and from_when
                else detect(text or "", timezone))
    said = caller.said or (args["when"] if from_when else None)
    choice = _new_choice(args, text, caller, language, said)
    name = args.get("title")
    if choice is not None and choice.kind == "news_digest" and not name:
        name = text  # a digest has no text of its own to name the job after
    params = replace(plan.params, flexible_window_seconds=args.get("flexible_window_seconds", 0))
    spec = JobSpec(action=_webhook_action(text, args["webhook_url"]) if choice is None
                   else choice.action, params=params, name=name,
                   misfire_policy=args.get("misfire_policy", "run_late"), notify=notify,
                   overlap_policy=args.get("overlap_policy", "skip"))
    understood = None if plan.parsed is None else replace(plan.parsed, task=text or "")
    out: dict[str, Any] = {"kind": "webhook" if choice is None else choice.kind}
    if understood is not None:
        out["understood"] = {"matched": understood.matched, "task": understood.task,
                             "job_params": understood.job_params.to_dict()}
    if caller.dry_run:
        try:
            runs = await _preview_runs(spec, caller, now)
        except OnTheDotError as exc:
            _remapped(exc, fields)
            raise
        return {"created": False, "dry_run": True, **out, "would_create": {
            "name": spec.name, "action": spec.action, "job_params": spec.params.to_dict(),
            "notify": spec.notify, "next_runs": runs},
            "confirmation": _confirmation(spec, choice, text, language, now, understood,
                                          caller.said is not None)}
    view, created = await _mapped(caller.service.create_job(
        caller.user_id, spec, args.get("idempotency_key")), fields)
    out["confirmation"] = _confirmation(spec, choice, text, language, now, understood,
                                        caller.said is not None)
    return {"created": created, "task": _render(view), **out}


def _confirmation(spec: JobSpec, choice: Choice | None, text: str | None, language: Language,
                  now: datetime, understood: nl.ParseResult | None, chat: bool) -> str:
    """The sentence that confirms a new task: when, what each run does, where results go. In
    the language of ``when`` when the time came from it, else (and always in chat, where
    ``language`` is the person's sentence's) in ``language``."""
    read = understood or nl.ParseResult(job_params=spec.params, task=text or "", matched="",
                                        now=now, language=language)
    doing = (choice.doing if choice is not None
             else Doing("webhook", text=urlsplit(str(spec.action.get("url", ""))).hostname or ""))
    return nl.render_confirmation(read, now, language=language if chat else None, doing=doing,
                                  notify=spec.notify)


async def list_tasks(args: dict[str, Any], caller: Caller) -> dict[str, Any]:
    page = await caller.service.list_jobs(
        caller.user_id, status=args.get("status"), page_size=args.get("page_size", 20),
        page_token=args.get("page_token"))
    return {"tasks": [_render(v) for v in page.items], "next_page_token": page.next_page_token}


async def get_task(args: dict[str, Any], caller: Caller) -> dict[str, Any]:
    fields = _fields(None)
    view = await _mapped(caller.service.get_job(caller.user_id, args["task_id"]), fields)
    runs = await caller.service.list_runs(caller.user_id, view.job.job_id,
                                          page_size=RECENT_RUNS)
    return {"task": _render(view),
            "recent_runs": [RunOut.of(r).model_dump(mode="json") for r in runs.items]}


async def update_task(args: dict[str, Any], caller: Caller) -> dict[str, Any]:
    service, user = caller.service, caller.user_id
    view = await _mapped(service.get_job(user, args["task_id"]), _fields(None))
    job = view.job
    now = service.clock.now()
    timezone = _timezone(args, job.params.timezone, now)
    plan = await _plan_time(args, timezone, now, caller)
    _check_type_change(job.params, plan, job.name, args)
    params = _new_params(job.params, plan, timezone, args)
    patch = JobPatch(name=args.get("title"), params=params,
                     action=_changed_action(job.action, job.name, args, caller, timezone),
                     misfire_policy=args.get("misfire_policy"),
                     overlap_policy=args.get("overlap_policy"),
                     notify=_changed_notify(job.notify, args))
    if patch == JobPatch():
        raise ToolError("update_task got nothing to change", code="missing_argument",
                        field="arguments", expected="at least one of: title, task, kind "
                        "(other than auto), webhook_url, when, schedule, time, in, timezone, "
                        "misfire_policy, overlap_policy, flexible_window_seconds, "
                        + ", ".join(NOTIFY_ARGS))
    if caller.dry_run:
        changes = {"name": patch.name, "action": patch.action, "misfire_policy":
                   patch.misfire_policy, "overlap_policy": patch.overlap_policy,
                   "job_params": params.to_dict() if params else None,
                   "notify": patch.notify}
        return {"dry_run": True, "task": _render(view),
                "would_change": {k: v for k, v in changes.items() if v is not None}}
    fields = _fields(plan.arg if plan else None, kind_given=_explicit_kind(args) is not None)
    return {"task": _render(await _mapped(service.update_job(user, job.job_id, patch), fields))}


async def _dry_run(args: dict[str, Any], caller: Caller, verb: str) -> dict[str, Any]:
    view = await _mapped(caller.service.get_job(caller.user_id, args["task_id"]),
                         _fields(None))
    return {"dry_run": True, "would": verb, "task": _render(view)}


async def pause_task(args: dict[str, Any], caller: Caller) -> dict[str, Any]:
    if caller.dry_run:
        return await _dry_run(args, caller, "pause")
    call = caller.service.pause_job(caller.user_id, args["task_id"])
    return {"task": _render(await _mapped(call, _fields(None)))}


async def resume_task(args: dict[str, Any], caller: Caller) -> dict[str, Any]:
    if caller.dry_run:
        return await _dry_run(args, caller, "resume")
    call = caller.service.resume_job(caller.user_id, args["task_id"])
    return {"task": _render(await _mapped(call, _fields(None)))}


async def delete_task(args: dict[str, Any], caller: Caller) -> dict[str, Any]:
    if caller.dry_run:
        return await _dry_run(args, caller, "delete")
    fields = _fields(None)
    await _mapped(caller.service.delete_job(caller.user_id, args["task_id"]), fields)
    view = await _mapped(caller.service.get_job(caller.user_id, args["task_id"]), fields)
    return {"deleted": True, "task": _render(view)}


async def run_task_now(args: dict[str, Any], caller: Caller) -> dict[str, Any]:
    if caller.dry_run:
        return await _dry_run(args, caller, "run now")
    run = await _mapped(caller.service.run_job_now(caller.user_id, args["task_id"]),
                        _fields(None))
    return {"run": RunOut.of(run).model_dump(mode="json")}


async def skip_next_run(args: dict[str, Any], caller: Caller) -> dict[str, Any]:
    if caller.dry_run:
        return await _dry_run(args, caller, "skip the next run")
    skipped = await _mapped(caller.service.skip_next(caller.user_id, args["task_id"]),
                            _fields(None))
    return {"skipped": RunOut.of(skipped.run).model_dump(mode="json"),
            "task": _render(skipped.view)}


async def backfill_task(args: dict[str, Any], caller: Caller) -> dict[str, Any]:
    start = _instant(args, "start_time")
    end = _instant(args, "end_time")
    if caller.dry_run:
        return await _dry_run(args, caller, "backfill")
    done = await _mapped(caller.service.backfill(
        caller.user_id, args["task_id"], start, end,
        max_runs=args.get("max_runs", MAX_BACKFILL_RUNS)), _fields(None))
    return {"runs": [{"created": c, "run": RunOut.of(r).model_dump(mode="json")}
                     for r, c in zip(done.runs, done.created, strict=True)]}


def _instant(args: dict[str, Any], name: str) -> datetime:
    try:
        at = datetime.fromisoformat(args[name])
    except ValueError:
        at = None
    if at is None or at.tzinfo is None:
        raise ToolError(f"{name} is not an ISO 8601 instant with an offset", code="invalid_time",
                        field=name, expected="e.g. 2026-06-20T00:00:00Z")
    return at


async def list_inbox(args: dict[str, Any], caller: Caller) -> dict[str, Any]:
    page = await caller.service.list_inbox(
        caller.user_id, unread_only=args.get("unread_only", False),
        page_size=args.get("page_size", 20), page_token=args.get("page_token"))
    return {"items": [InboxItemOut.of(i).model_dump(mode="json") for i in page.items],
            "next_page_token": page.next_page_token}


async def mark_inbox_read(args: dict[str, Any], caller: Caller) -> dict[str, Any]:
    if caller.dry_run:
        return {"dry_run": True, "would": "mark read", "item_id": args["item_id"]}
    item = await caller.service.mark_inbox_read(caller.user_id, args["item_id"])
    return {"item": InboxItemOut.of(item).model_dump(mode="json")}


# --- the registry ------------------------------------------------------------------------
def build_registry(default_timezone: str) -> ToolRegistry:
    """The current tool set; descriptions state this deployment's default timezone."""
    tz = default_timezone
    task_only = _object({"task_id": TASK_ID}, required=("task_id",))
    page_size = {"type": "integer", "minimum": 1, "maximum": 100,
                 "description": "How many per page, 1-100. Default: 20."}
    page_token = _text("next_page_token of the previous page.", minLength=1)
    return ToolRegistry([
        ToolDef(
            name="create_task", title="Create a task",
            description=(
                "Schedule something for the user: once, recurring, or right now. Give the time "
                "as exactly one of: when (the user's words in English or Chinese, e.g. \"every "
                "weekday at 9am\", \"每天早上八點\"; easiest), schedule (cron or RRULE), time "
                "(ISO 8601) or in ({\"minutes\": 15}); null means not given. when=\"now\" "
                f"runs it at once. timezone defaults to {tz}. With when, task defaults to the "
                "rest of the sentence. The server chooses what the task does from its words "
                "(a news digest, a reminder, or a prompt when a model is configured and the "
                "words ask for something written); kind overrides that. The result's "
                "confirmation says when, what and where, in the user's language."),
            input_schema=_object({**_what_properties(on_update=False), **_time_properties(tz),
                                  **_option_properties(on_update=False), "idempotency_key": _text(
                                      "Retrying with the same key returns the task created "
                                      "the first time instead of a second one.",
                                      minLength=1, maxLength=255)}),
            annotations=_changes(idempotent=False), handler=create_task,
            output_schema=results.CREATE),
        ToolDef(
            name="list_tasks", title="List tasks",
            description="The user's tasks, newest first, with status and next_run_at. Filter "
                        "by status; follow next_page_token for more.",
            input_schema=_object({
                "status": _text("Only tasks in this state. Default: all.", enum=[
                    "scheduled", "running", "completed", "failed", "paused", "cancelled"]),
                "page_size": page_size, "page_token": page_token}),
            annotations=READ_ONLY, handler=list_tasks, output_schema=results.LIST_TASKS),
        ToolDef(
            name="get_task", title="Get a task",
            description="One task: its schedule, status, next_run_at and its last "
                        f"{RECENT_RUNS} runs with their output (what it produced) or error.",
            input_schema=task_only, annotations=READ_ONLY, handler=get_task,
            output_schema=results.GET_TASK),
        ToolDef(
            name="update_task", title="Change a task",
            description=(
                "Change a task's time, text, title, kind or timezone; arguments left out or "
                "null stay as they are; new text keeps the task's kind. Give a new time as one "
                "of when (the user's words; it sets only the time), schedule (cron or RRULE), "
                "time (ISO 8601) or in ({\"minutes\": 15}); timezone defaults to the task's. "
                "A new time replaces the pending run. A one-time time (when \"now\", time, "
                "in ...) for a recurring task ends its repetition and needs "
                "confirm_type_change: true; to run it once now, use run_task_now."),
            input_schema=_object({"task_id": TASK_ID, **_what_properties(on_update=True),
                                  **_time_properties(None), **_option_properties(on_update=True),
                                  "confirm_type_change": CONFIRM_TYPE_CHANGE},
                                 required=("task_id",)),
            annotations=_changes(idempotent=False, destructive=True), handler=update_task,
            output_schema=results.UPDATE),
        ToolDef(
            name="pause_task", title="Pause a task",
            description="Stop a scheduled task from firing until resume_task. A one-time task "
                        "whose time passes while paused does not run late when resumed.",
            input_schema=task_only, annotations=_changes(idempotent=True), handler=pause_task,
            output_schema=results.TASK_ONLY),
        ToolDef(
            name="resume_task", title="Resume a task",
            description="Schedule a paused task again; missed runs are not made up. A "
                        "recurring task continues at its next occurrence after now. A one-time "
                        "task whose time passed while paused is not resumed (error "
                        "time_passed): give it a new time with update_task, or run it once "
                        "with run_task_now.",
            input_schema=task_only, annotations=_changes(idempotent=True), handler=resume_task,
            output_schema=results.TASK_ONLY),
        ToolDef(
            name="delete_task", title="Delete a task",
            description="Cancel a task and its pending runs for good (its history is kept). "
                        "Use pause_task to stop it only for a while.",
            input_schema=task_only, annotations=_changes(idempotent=True, destructive=True),
            handler=delete_task, output_schema=results.DELETE),
        ToolDef(
            name="run_task_now", title="Run a task now",
            description="One extra run of a task right now, besides its schedule; returns the "
                        "run (see get_task for its result).",
            input_schema=task_only, annotations=_changes(idempotent=False),
            handler=run_task_now, output_schema=results.RUN_NOW),
        ToolDef(
            name="skip_next_run", title="Skip the next run",
            description="Skip only the next occurrence of a recurring task (\"skip tomorrow's "
                        "standup\"): that run is marked SKIPPED, the ones after it stay. The "
                        "task's next_run_at is then the occurrence after. Refused for a "
                        "one-time task (use pause_task or delete_task) and when the next run "
                        "has already started.",
            input_schema=task_only, annotations=_changes(idempotent=False, destructive=True),
            handler=skip_next_run, output_schema=results.SKIP_NEXT),
        ToolDef(
            name="backfill_task", title="Run past occurrences",
            description="Run now the occurrences of a recurring task that were scheduled "
                        "between start_time (included) and end_time (excluded), both in the "
                        "past (\"run yesterday's and today's report that the outage missed\"). "
                        f"At most max_runs (default and limit {MAX_BACKFILL_RUNS}); more is "
                        "refused and nothing runs. An occurrence that has a run already keeps "
                        "it (created: false). The schedule is not changed.",
            input_schema=_object({
                "task_id": TASK_ID,
                "start_time": _text("ISO 8601 instant with an offset, e.g. "
                                    "2026-06-20T00:00:00Z: the first instant of the range.",
                                    minLength=1),
                "end_time": _text("ISO 8601 instant with an offset, not after now: the end of "
                                  "the range (excluded).", minLength=1),
                "max_runs": {"type": "integer", "minimum": 1, "maximum": MAX_BACKFILL_RUNS,
                             "description": "Refuse a range with more occurrences than this. "
                                            f"Default: {MAX_BACKFILL_RUNS}."}},
                required=("task_id", "start_time", "end_time")),
            annotations=_changes(idempotent=True), handler=backfill_task,
            output_schema=results.BACKFILL),
        ToolDef(
            name="list_inbox", title="List delivered results",
            description="Results of the user's tasks delivered to their inbox: unread first, "
                        "newest first, each with its text and read state. Follow "
                        "next_page_token for more; mark_inbox_read marks one read.",
            input_schema=_object({
                "unread_only": {"type": "boolean",
                                "description": "Only results not read yet. Default: false."},
                "page_size": page_size, "page_token": page_token}),
            annotations=READ_ONLY, handler=list_inbox, output_schema=results.LIST_INBOX),
        ToolDef(
            name="mark_inbox_read", title="Mark a result read",
            description="Mark one inbox item read (after showing it to the user).",
            input_schema=_object({"item_id": _text("The item_id from list_inbox.",
                                                   minLength=1)}, required=("item_id",)),
            annotations=_changes(idempotent=True), handler=mark_inbox_read,
            output_schema=results.MARK_READ),
    ])


__all__ = ["TIME_EXPECTED", "build_registry"]
