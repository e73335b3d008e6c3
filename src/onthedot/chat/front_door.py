"""One sentence in, a scheduled job (or a managed one) and a one-sentence answer out.

What is asked: ``chat.intents`` tells a new task ("每天提醒我刪除垃圾郵件") from a request about
existing ones ("刪除每週的運動提醒", "run the backup task now", "我有哪些提醒"); the latter go to
``chat.manage``, which finds the task by its words, asks which one when two match, asks for a
confirmation before deleting or moving one, and never creates a task. A call that passes back a
``confirm`` token (with "yes", "好", or no message) answers that question, whoever decides.

Who decides a new task:

* no model configured (``llm_base_url`` unset): the offline parser ``onthedot.nl`` reads the
  sentence and ``actions.choice`` picks the action from its task and the whole sentence (a news
  digest when it asks for news, else a reminder); the job is created through the service and
  the answer is ``render_confirmation`` in the language of the sentence. What it cannot read
  exactly is a ``ParseError`` (HTTP 422) whose ``field`` is the fragment it could not read; it
  never guesses.
* a model configured: the model gets the MCP tools (same schemas, same handlers, same user, and
  the user's sentence on the ``Caller``) and decides what to call. ``create_task`` chooses the
  action as the parser path does (a reminder stays a reminder, news a digest; a ``prompt`` only
  for what only a model can do). The answer to a created task is the tool's confirmation, not
  the model's words; otherwise the model's last message.

Either way the answer to a new task says when it runs, what each run does and where each result
goes, and "… by email" in the sentence becomes an e-mail channel or a sentence saying why not
(``chat.where``).

``dry_run`` creates and changes nothing: the parser path reports what it understood, and over
the model path every changing tool answers with what it would have done.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any, Literal

from onthedot import nl
from onthedot.actions.choice import Choice, choose_action
from onthedot.chat.intents import IntentKind, recognise, which_one, yes_or_no
from onthedot.chat.manage import Managed, Manager
from onthedot.chat.where import Where, where_results_go
from onthedot.config import Settings
from onthedot.domain.errors import ValidationError
from onthedot.llm import ChatModel, run_with_tools
from onthedot.mcp.registry import ArgumentError, Caller, ToolRegistry, ToolResult
from onthedot.mcp.server import server_instructions
from onthedot.mcp.tools import build_registry
from onthedot.nl.channels import asks_for_email, read_channels
from onthedot.nl.lang import detect
from onthedot.schedule.local import load_timezone
from onthedot.service import JobService, JobSpec, JobView
from onthedot.views import JobOut, RunOut

Decider = Literal["parser", "model"]

_DRY_RUN_NOTE = {
    "en": " (dry run: nothing was created)",
    "zh-Hant": "（試算：尚未建立）",
    "zh-Hans": "（试算：尚未创建）",
}
_NO_TASK = {
    "en": "What should I do at that time? Say it in the same sentence, e.g. “every day at "
          "8am summarize the financial news”.",
    "zh-Hant": "要在那個時間做什麼呢？請在同一句話裡說明，例如「每天早上八點幫我總結財經新聞」。",
    "zh-Hans": "要在那个时间做什么呢？请在同一句话里说明，例如「每天早上八点帮我总结财经新闻」。",
}


@dataclass(frozen=True)
class ChatAnswer:
    reply: str
    decided_by: Decider
    dry_run: bool
    jobs: list[dict[str, Any]]  # created or changed, rendered as GET /v1/jobs/{id} renders them
    language: str | None = None  # parser path: en | zh-Hant | zh-Hans
    understood: dict[str, Any] | None = None  # parser path: ParseResult.to_dict()
    action: dict[str, Any] | None = None  # parser path: the action chosen for the task
    tool_calls: list[dict[str, Any]] = field(default_factory=list)  # model path: name, args, result
    intent: IntentKind | None = None  # parser path (and confirmations): what was asked
    candidates: list[dict[str, Any]] = field(default_factory=list)  # tasks referred to, unchanged
    run: dict[str, Any] | None = None  # run now: the new run; last result: the run shown
    confirmation_token: str | None = None  # pass back as `confirm` to carry out the change
    confirmation_expires_at: datetime | None = None
    choice: bool = False  # the token answers "which one?" with a number, not yes or no

    @property
    def needs_confirmation(self) -> bool:
        return self.confirmation_token is not None and not self.choice

    @property
    def needs_choice(self) -> bool:
        return self.confirmation_token is not None and self.choice


class FrontDoor:
    def __init__(self, service: JobService, settings: Settings) -> None:
        self.service = service
        self.settings = settings

    async def answer(self, user_id: str, message: str | None, *, dry_run: bool = False,
                     timezone: str | None = None, idempotency_key: str | None = None,
                     confirm: str | None = None) -> ChatAnswer:
        """``message`` may be None only with ``confirm`` (an API client saying yes). Every
        call counts against the user's parse rate (429 ``rate_limited`` beyond it)."""
        self.service.take_parse(user_id)
        tz = load_timezone(timezone or self.settings.default_timezone, field="timezone").key
        if confirm is not None:
            said = "yes" if message is None else yes_or_no(message)
            pick = None if message is None else which_one(message)
            # Neither yes, no nor a number: a new request; the question is left unanswered.
            if said is not None or pick is not None:
                language = detect(message, tz) if message else "en"
                return _managed(await Manager(self.service).confirm(
                    confirm, user_id, agreed=None if said is None else said == "yes",
                    pick=pick, dry_run=dry_run, language=language), dry_run)
        if message is None:
            raise ValidationError("say something, or pass back a confirmation with confirm",
                                  code="missing_field", field="message",
                                  expected="the user's message (1-4000 characters)")
        if self.settings.llm_base_url:
            return await self._by_model(user_id, message, tz, dry_run)
        # CPU work bounded by the message's length (4,000 characters): off the event loop.
        intent = await nl.off_loop(lambda: recognise(message, tz))
        if intent.kind != "create":
            return _managed(await Manager(self.service).handle(
                intent, user_id, timezone=tz, timezone_given=timezone is not None,
                dry_run=dry_run), dry_run)
        return await self._by_parser(user_id, message, tz, dry_run, idempotency_key)

    # --- offline ---------------------------------------------------------------------------
    async def _by_parser(self, user_id: str, message: str, tz: str, dry_run: bool,
                         idempotency_key: str | None) -> ChatAnswer:
        now = self.service.clock.now()

        def understand() -> tuple[nl.ParseResult, dict[str, Any], Choice, Where, str]:
            parsed = nl.parse(message, now=now, timezone=tz)
            if not parsed.task:
                raise ValidationError(_NO_TASK[parsed.language], code="missing_task",
                                      field="message", expected="what to do, in the same "
                                      "sentence as when, e.g. 每天早上八點幫我總結財經新聞")
            asked = read_channels(parsed.task)  # "… by email" is where, not what
            result = replace(parsed, task=asked.text)
            if not asked.email:  # said elsewhere in the sentence ("… at 9am by email")
                asked = asks_for_email(message)
            where = where_results_go(asked, self.settings, result.language)
            choice = choose_action(result.task, said=message,
                                   model_configured=bool(self.settings.llm_base_url),
                                   language=result.language)
            reply = nl.render_confirmation(result, now, doing=choice.doing,
                                           notify=where.notify) + where.note
            return result, result.to_dict(), choice, where, reply

        # Reading the sentence is CPU work: off the event loop (onthedot.nl.offload).
        result, understood, choice, where, reply = await nl.off_loop(understand)
        spec = JobSpec(action=choice.action, params=result.job_params, notify=where.notify,
                       # a digest has no text of its own to name the job after
                       name=result.task if choice.kind == "news_digest" else None)
        if dry_run:
            self.service.actions.validate(spec.action)
            return ChatAnswer(reply=reply + _DRY_RUN_NOTE[result.language], decided_by="parser",
                              dry_run=True, jobs=[], language=result.language,
                              understood=understood, action=choice.action, intent="create")
        view, _created = await self.service.create_job(user_id, spec, idempotency_key)
        return ChatAnswer(reply=reply, decided_by="parser", dry_run=False,
                          jobs=[_job(view)], language=result.language, understood=understood,
                          action=choice.action, intent="create")

    # --- with a model ----------------------------------------------------------------------
    async def _by_model(self, user_id: str, message: str, tz: str,
                        dry_run: bool) -> ChatAnswer:
        assert self.settings.llm_base_url is not None
        model = ChatModel(self.settings.llm_base_url, self.settings.llm_model,
                          self.settings.llm_api_key)
        registry = build_registry(tz)
        language = detect(message, tz)
        where = where_results_go(asks_for_email(message), self.settings, language)
        caller = Caller(service=self.service, user_id=user_id, timezone=tz, dry_run=dry_run,
                        said=message, notify=tuple(where.notify))
        calls: list[dict[str, Any]] = []

        async def execute(name: str, raw_arguments: str) -> str:
            try:
                arguments = json.loads(raw_arguments or "{}")
            except ValueError:
                arguments = raw_arguments
                result = ToolResult.failure(ArgumentError(
                    "the arguments are not valid JSON", code="invalid_json", field="arguments",
                    expected="a JSON object"))
            else:
                result = await registry.call(name, arguments, caller)
            calls.append({"name": name, "arguments": arguments, "ok": not result.is_error,
                          "result": result.payload})
            return result.text

        messages: list[dict[str, Any]] = [
            {"role": "system", "content": _system_prompt(tz, self.service.clock.now(), dry_run)},
            {"role": "user", "content": message},
        ]
        reply = await run_with_tools(model, messages, registry.openai_tools(), execute)
        jobs = _changed_jobs(calls, registry)
        # A new task is confirmed in the server's words, which name its action and channels
        # exactly; the model's own sentence could say anything.
        created = [c["result"] for c in calls if c["name"] == "create_task" and c["ok"]
                   and c["result"].get("confirmation")]
        if created:
            reply = " ".join(r["confirmation"] for r in created)
            if not any(_emails(r) for r in created):
                reply += where.note  # e-mail asked for and not possible: say where it goes
            if dry_run:
                reply += _DRY_RUN_NOTE[language]
        elif not reply:  # a model that only called tools: say what was done, never nothing
            reply = "OK." if jobs else ""
        return ChatAnswer(reply=reply, decided_by="model", dry_run=dry_run, jobs=jobs,
                          tool_calls=calls)


def _managed(managed: Managed, dry_run: bool) -> ChatAnswer:
    return ChatAnswer(
        reply=managed.reply, decided_by="parser", dry_run=dry_run,
        jobs=[_job(v) for v in managed.changed], language=managed.language,
        understood=managed.understood, intent=managed.intent,
        candidates=[_job(v) for v in managed.candidates],
        run=None if managed.run is None else RunOut.of(managed.run).model_dump(mode="json"),
        confirmation_token=managed.token, confirmation_expires_at=managed.expires_at,
        choice=managed.choice)


def _emails(created: dict[str, Any]) -> bool:
    """Whether a create_task result's task sends e-mail."""
    task = created.get("task") or created.get("would_create") or {}
    return any(c.get("channel") == "email" for c in task.get("notify") or [])


def _job(view: JobView) -> dict[str, Any]:
    return JobOut.of(view).model_dump(mode="json")


def _system_prompt(tz: str, now: datetime, dry_run: bool) -> str:
    local = now.astimezone(load_timezone(tz)).isoformat(timespec="minutes")
    prompt = (f"{server_instructions(tz)}\n"
              f"Now: {local} ({tz}). Prefer passing the user's words about time as `when`. "
              "When the user asks to change, move, pause, stop, resume, delete, cancel or run "
              "a task, or asks what tasks they have or what one returned, that is about a task "
              "they already have: find it with list_tasks and use update_task, pause_task, "
              "resume_task, delete_task, run_task_now, skip_next_run (skip only the next "
              "occurrence) or get_task. Never call create_task for "
              "such a request; if no task matches, or several do, say so and ask which. "
              "For create_task, leave kind out unless the user named one: the server chooses "
              "it from the user's words; pass notify_email only with an address the user "
              "wrote. "
              "Answer in the user's language, in one or two sentences: what was scheduled or "
              "changed and when it next runs (next_run_at of the tool result, in the user's "
              "timezone).")
    if dry_run:
        prompt += (" This is a dry run: the tools report what they would do and change "
                   "nothing; say that nothing was created.")
    return prompt


def _changed_jobs(calls: list[dict[str, Any]], registry: ToolRegistry) -> list[dict[str, Any]]:
    """The tasks the model created or changed (the last state of each), in order."""
    jobs: dict[str, dict[str, Any]] = {}
    for call in calls:
        tool = registry.get(call["name"])
        task = call["result"].get("task")
        if tool is None or tool.annotations.readOnlyHint or not isinstance(task, dict):
            continue
        if call["result"].get("dry_run"):
            continue
        jobs.pop(task["job_id"], None)
        jobs[task["job_id"]] = task
    return list(jobs.values())
