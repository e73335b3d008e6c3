// The Tasks view: create a task (from one sentence, previewed by POST /v1/parse, or from a
// form), list the caller's tasks with a status filter, act on them, and show a task's runs.

import { api, fetchPages, newKey } from "./api.js";
import {
  forget, h, hidden, outputSummary, outputText, relative, syncList, viewerZone, when, whileBusy,
} from "./dom.js";
import { language, t, tOr } from "./i18n.js";

const PAGE = 20;
const TERMINAL = new Set(["SUCCEEDED", "FAILED", "SKIPPED", "CANCELLED"]);
// Problem fields of POST /v1/jobs -> the form control that holds them.
const FORM_FIELDS = {
  "name": "f-name",
  "job_params.type": "f-type",
  "job_params.time": "f-time",
  "job_params.schedule": "f-schedule",
  "job_params.timezone": "f-timezone",
  "overlap_policy": "f-overlap",
  "action": "f-action",
  "action.type": "f-action",
  "action.text": "f-text",
  "action.url": "f-url",
  "action.topic": "f-topic",
  "action.language": "f-digest-language",
};
// Problem fields of PATCH /v1/jobs/{id} -> the edit dialog's control that holds them.
const EDIT_FIELDS = {
  "name": "e-name",
  "job_params.time": "e-time",
  "job_params.schedule": "e-schedule",
  "job_params.timezone": "e-timezone",
  "overlap_policy": "e-overlap",
  "action.text": "e-text",
  "action.url": "e-url",
  "action.topic": "e-topic",
  "action.prompt": "e-prompt",
};
const $ = (id) => document.getElementById(id);

/** A task's schedule in the page's language: "every day at 08:00 (Asia/Taipei)". The words of a
 * recurring schedule come from the server (`schedule_words`), which says every form its parser
 * writes; the schedule as written stands in when they are missing. */
export function scheduleWords(params, words) {
  if (params.type === "immediate") return t("schedule.immediate");
  if (params.type === "one-time") {
    const instant = new Date(params.time);
    const time = Number.isNaN(instant.getTime()) ? params.time
      : new Intl.DateTimeFormat(language(), {
        dateStyle: "medium", timeStyle: "short", timeZone: params.timezone,
      }).format(instant);
    return t("schedule.zone", { words: t("schedule.once", { time }), tz: params.timezone });
  }
  const said = (words && words[language()]) || params.schedule;
  return t("schedule.zone", { words: said, tz: params.timezone });
}

function problemText(error) {
  return error.expected ? `${error.message} ${t("error.expected", { expected: error.expected })}`
    : error.message;
}

/** An ISO instant as a datetime-local value ("2026-06-23T09:00") in ``zone``. */
function localInput(iso, zone) {
  const instant = new Date(iso);
  if (Number.isNaN(instant.getTime())) return iso.slice(0, 16);
  const parts = Object.fromEntries(new Intl.DateTimeFormat("en-CA", {
    timeZone: zone, year: "numeric", month: "2-digit", day: "2-digit", hour: "2-digit",
    minute: "2-digit", hourCycle: "h23",
  }).formatToParts(instant).map((p) => [p.type, p.value]));
  return `${parts.year}-${parts.month}-${parts.day}T${parts.hour}:${parts.minute}`;
}

/** Explain the chosen overlap policy under its select (the hint keeps its key, so a change of
 * language says it again). */
function explainOverlap(select) {
  const hint = $(`${select.id}-hint`);
  // A policy this page does not know (a newer server's) selects nothing: no words for it.
  hint.dataset.i18n = select.value ? `overlap.hint.${select.value}` : "";
  hint.textContent = select.value ? t(hint.dataset.i18n) : "";
}

/** job_params without the null members a response carries. */
function paramsBody(params) {
  return Object.fromEntries(Object.entries(params).filter(([, v]) => v !== null));
}

export class TasksView {
  constructor(app) {
    this.app = app;
    this.filter = "";
    this.limit = PAGE;
    this.jobs = [];
    this.runStates = new Map(); // job_id -> [run_id, status] seen on the last refresh
    this.selected = null;
    this.editing = null; // the job the edit dialog is open for
    this.runsLimit = PAGE;
    this.preview = null;
    this.formKey = newKey();
    this.seq = 0;
    this.bind();
  }

  heading() {
    return $("list-title");
  }

  bind() {
    for (const radio of document.querySelectorAll("input[name=mode]")) {
      radio.addEventListener("change", () => this.showMode(radio.value));
    }
    $("sentence-form").addEventListener("submit", (e) => {
      e.preventDefault();
      this.previewSentence();
    });
    $("sentence").addEventListener("input", () => {
      if (this.preview && $("sentence").value.trim() !== this.preview.text) this.hidePreview();
    });
    $("preview-create").addEventListener("click", () => this.createFromPreview());
    $("job-form").addEventListener("submit", (e) => {
      e.preventDefault();
      this.createFromForm();
    });
    $("f-type").addEventListener("change", () => this.toggleFields());
    $("f-action").addEventListener("change", () => this.toggleFields());
    for (const id of ["f-overlap", "e-overlap"]) {
      $(id).addEventListener("change", () => explainOverlap($(id)));
    }
    $("f-timezone").value = viewerZone;
    const zones = typeof Intl.supportedValuesOf === "function" ? Intl.supportedValuesOf("timeZone")
      : [viewerZone];
    $("zones").replaceChildren(...zones.map((zone) => h("option", { value: zone })));
    this.toggleFields();
    $("status-filter").addEventListener("change", () => {
      this.filter = $("status-filter").value;
      this.limit = PAGE;
      this.app.refreshSoon();
    });
    $("tasks-more").addEventListener("click", () => {
      this.limit += PAGE;
      this.app.refreshSoon();
    });
    $("task-rows").addEventListener("click", (e) => {
      const button = e.target.closest("button[data-act]");
      const job = button && this.jobs.find((j) => j.job_id === button.closest("tr").dataset.key);
      if (job) this.act(button.dataset.act, job, button);
    });
    $("details-close").addEventListener("click", () => this.closeDetails());
    $("edit-form").addEventListener("submit", (e) => {
      e.preventDefault();
      this.saveEdit();
    });
    $("edit-cancel").addEventListener("click", () => this.closeEdit());
    $("edit").addEventListener("cancel", (e) => {
      e.preventDefault();
      this.closeEdit();
    });
    $("runs-more").addEventListener("click", () => {
      this.runsLimit += PAGE;
      this.app.refreshSoon();
    });
  }

  // --- creating ------------------------------------------------------------------------
  showMode(mode) {
    const sentence = mode === "sentence";
    $("sentence-form").hidden = !sentence;
    $("preview").hidden = !sentence || !this.preview;
    $("job-form").hidden = sentence;
  }

  toggleFields() {
    const type = $("f-type").value;
    const action = $("f-action").value;
    for (const field of document.querySelectorAll("#job-form [data-for]")) {
      this.enable(field, field.dataset.for === type);
    }
    for (const field of document.querySelectorAll("#job-form [data-action]")) {
      this.enable(field, field.dataset.action === action);
    }
  }

  enable(field, on) {
    field.hidden = !on;
    for (const control of field.querySelectorAll("input, select, textarea")) control.disabled = !on;
  }

  async previewSentence() {
    const input = $("sentence");
    const text = input.value.trim();
    this.setError(input, "sentence-error", "");
    if (!text) {
      this.setError(input, "sentence-error", t("preview.noTask"));
      input.focus();
      return;
    }
    try {
      const result = await api("POST", "v1/parse", { body: { text, timezone: viewerZone } });
      this.preview = { text, result, key: newKey() };
      this.renderPreview();
      $("preview").hidden = false;
      $("preview-title").focus();
    } catch (error) {
      if (!this.app.handled(error)) this.setError(input, "sentence-error", problemText(error));
    }
  }

  renderPreview() {
    if (!this.preview) return;
    const { result } = this.preview;
    $("preview-when").textContent = scheduleWords(result.job_params, result.schedule_words);
    $("preview-task").textContent = result.task
      ? `${result.task} (${actionWords(result.action)})` : t("none");
    $("preview-runs").replaceChildren(...result.next_runs.map((iso) => h("li", {}, when(iso))));
    $("preview-error").textContent = result.task ? "" : t("preview.noTask");
    $("preview-create").disabled = !result.task;
  }

  hidePreview() {
    this.preview = null;
    $("preview").hidden = true;
  }

  async createFromPreview() {
    const { result, key } = this.preview;
    if (!result.task) return;
    await whileBusy($("preview-create"), async () => {
      try {
        const job = await api("POST", "v1/jobs", {
          key,
          body: { name: result.task.slice(0, 200),
            action: result.action || { type: "message", text: result.task },
            job_params: paramsBody(result.job_params) },
        });
        this.hidePreview();
        $("sentence").value = "";
        this.app.notify(t("created", { name: job.name }));
        $("sentence").focus();
        await this.app.refreshSoon();
      } catch (error) {
        if (!this.app.handled(error)) $("preview-error").textContent = problemText(error);
      }
    });
  }

  formBody() {
    const type = $("f-type").value;
    const params = { type, timezone: $("f-timezone").value.trim() || viewerZone };
    // datetime-local gives a wall time without seconds; the API reads it in the timezone.
    if (type === "one-time") params.time = $("f-time").value ? `${$("f-time").value}:00` : "";
    if (type === "recurring") params.schedule = $("f-schedule").value.trim();
    const kind = $("f-action").value;
    const action = { type: kind };
    if (kind === "message") action.text = $("f-text").value;
    if (kind === "webhook") action.url = $("f-url").value.trim();
    if (kind === "news_digest") {
      action.topic = $("f-topic").value;
      action.language = $("f-digest-language").value;
    }
    const body = { action, job_params: params };
    // A one-time or immediate task never overlaps itself: the policy goes with a repeating one.
    if (type === "recurring") body.overlap_policy = $("f-overlap").value;
    const name = $("f-name").value.trim();
    if (name) body.name = name;
    return body;
  }

  async createFromForm() {
    const form = $("job-form");
    for (const el of form.querySelectorAll("[aria-invalid]")) this.setError(el, "form-error", "");
    $("form-error").textContent = "";
    try {
      const job = await api("POST", "v1/jobs", { key: this.formKey, body: this.formBody() });
      this.formKey = newKey();
      for (const id of ["f-name", "f-time", "f-schedule", "f-text", "f-url"]) $(id).value = "";
      $("f-overlap").value = "skip";
      explainOverlap($("f-overlap"));
      this.app.notify(t("created", { name: job.name }));
      await this.app.refreshSoon();
    } catch (error) {
      if (this.app.handled(error)) return;
      const control = $(FORM_FIELDS[error.field] ?? "") ?? null;
      if (control) {
        this.setError(control, "form-error", problemText(error));
        control.focus();
      } else {
        $("form-error").textContent = problemText(error);
      }
    }
  }

  setError(control, boxId, text) {
    $(boxId).textContent = text;
    if (text) control.setAttribute("aria-invalid", "true");
    else control.removeAttribute("aria-invalid");
    const ids = new Set((control.getAttribute("aria-describedby") ?? "").split(" ").filter(Boolean));
    if (text) ids.add(boxId);
    else if (control.id !== "sentence") ids.delete(boxId);
    if (ids.size) control.setAttribute("aria-describedby", [...ids].join(" "));
  }

  // --- the list ------------------------------------------------------------------------
  async refresh() {
    const seq = ++this.seq;
    const query = { status: this.filter || undefined };
    const { items, more } = await fetchPages("v1/jobs", "jobs", query, this.limit);
    if (seq !== this.seq) return; // a newer refresh started meanwhile
    this.jobs = items;
    for (const job of items) this.app.names.set(job.job_id, job.name);
    this.announceFinished(items);
    this.render(more);
    if (this.selected) await this.refreshDetails();
  }

  /** Say when a task's latest run has finished since the last refresh. */
  announceFinished(jobs) {
    for (const job of jobs) {
      const run = job.last_run;
      if (!run) continue;
      const [runId, status] = this.runStates.get(job.job_id) ?? [];
      if (runId === run.run_id && status !== run.status && TERMINAL.has(run.status)) {
        this.app.notify(t("finished", { name: job.name, status: t(`run.${run.status}`) }));
      }
      this.runStates.set(job.job_id, [run.run_id, run.status]);
    }
  }

  render(more) {
    const rows = $("task-rows");
    // Relative times ("in 5 minutes") age: rows are rebuilt at least every half minute.
    const tick = Math.floor(Date.now() / 30000);
    syncList(rows, this.jobs, {
      key: (job) => job.job_id,
      signature: (job) => `${language()}|${tick}|${this.selected === job.job_id}|${JSON.stringify(job)}`,
      build: (job) => this.row(job),
      fallbacks: { pause: "resume", resume: "pause" },
      lost: this.heading(),
    });
    const empty = $("tasks-empty");
    empty.hidden = this.jobs.length > 0;
    empty.textContent = this.filter ? t("list.emptyFiltered") : t("list.empty");
    $("tasks-more").hidden = !more;
  }

  rerender() {
    forget($("task-rows"));
    this.render(!$("tasks-more").hidden);
    this.renderPreview();
    if (this.selected) this.renderDetails();
  }

  row(job) {
    // One element per cell: the narrow layout puts the label beside it.
    const cell = (label, ...children) => h("td", { role: "cell", "data-label": label },
      h("div", {}, ...children));
    return h("tr", { role: "row", "data-status": job.status },
      cell(t("col.name"), h("button", {
        type: "button", class: "link", "data-act": "open", "aria-controls": "details",
        "aria-expanded": String(this.selected === job.job_id),
      }, job.name, hidden(` – ${t("act.open")}`))),
      cell(t("col.schedule"), scheduleWords(job.job_params, job.schedule_words),
        this.overlapTag(job)),
      cell(t("col.status"), h("span", { class: `badge s-${job.status}` }, t(`status.${job.status}`))),
      cell(t("col.next"), job.next_run_at
        ? [when(job.next_run_at), h("span", { class: "muted" }, ` · ${relative(job.next_run_at)}`)]
        : t("none")),
      cell(t("col.last"), this.lastResult(job.last_run)),
      h("td", { role: "cell", class: "actions", "data-label": t("col.actions") },
        this.buttons(job)));
  }

  /** A repeating task's overlap policy when it is not the default (skip). */
  overlapTag(job) {
    const policy = job.job_params.type === "recurring" ? job.overlap_policy : "skip";
    if (!policy || policy === "skip") return null;
    return h("span", { class: "tag overlap", "data-overlap": policy },
      tOr(`overlap.tag.${policy}`, policy));
  }

  lastResult(run) {
    if (!run) return t("none");
    const summary = run.error ?? outputSummary(run.output);
    return [h("span", { class: `badge r-${run.status}` }, t(`run.${run.status}`)),
      summary ? h("span", { class: "summary" }, ` ${summary}`) : null];
  }

  buttons(job) {
    const button = (act, cls = "") => h("button", { type: "button", "data-act": act, class: cls },
      t(`act.${act}`), hidden(` “${job.name}”`));
    const list = [];
    const active = job.status === "scheduled" || job.status === "running";
    if (active) list.push(button("pause"));
    // Only the next occurrence of a repeating task; its run list then shows it SKIPPED.
    if (active && job.job_params.type === "recurring" && job.next_run_at) {
      list.push(button("skip-next"));
    }
    if (job.status === "paused") list.push(button("resume"));
    if (job.status !== "cancelled") {
      list.push(button("edit"), button("run"), button("delete", "danger"));
    }
    return list;
  }

  // --- editing a task where it is listed -----------------------------------------------
  openEdit(job) {
    this.editing = job;
    const params = job.job_params;
    const action = job.action;
    $("edit-title").textContent = t("edit.title", { name: job.name });
    $("e-name").value = job.name;
    $("e-schedule").value = params.schedule ?? "";
    // A one-time job's time as a wall time in its own timezone (datetime-local has no zone).
    $("e-time").value = params.time ? localInput(params.time, params.timezone) : "";
    $("e-timezone").value = params.timezone;
    $("e-overlap").value = job.overlap_policy ?? "skip";
    explainOverlap($("e-overlap"));
    $("e-text").value = action.text ?? "";
    $("e-url").value = action.url ?? "";
    $("e-topic").value = action.topic ?? "finance";
    $("e-prompt").value = action.prompt ?? "";
    const channels = job.notify ?? [];
    $("e-inbox").checked = channels.some((c) => c.channel === "inbox");
    $("e-email").value = channels.find((c) => c.channel === "email")?.to ?? "";
    $("e-hook").value = channels.find((c) => c.channel === "webhook")?.url ?? "";
    for (const field of $("edit-form").querySelectorAll("[data-for]")) {
      this.enable(field, field.dataset.for === params.type);
    }
    for (const field of $("edit-form").querySelectorAll("[data-action]")) {
      this.enable(field, field.dataset.action === action.type);
    }
    for (const el of $("edit-form").querySelectorAll("[aria-invalid]")) {
      this.setError(el, "edit-error", "");
    }
    $("edit-error").textContent = "";
    $("edit").showModal();
    $("e-name").focus();
  }

  closeEdit() {
    const job = this.editing;
    this.editing = null;
    $("edit").close();
    const row = [...$("task-rows").children].find((el) => el.dataset.key === job?.job_id);
    (row?.querySelector("[data-act=edit]") ?? this.heading()).focus();
  }

  editBody(job) {
    const params = { ...paramsBody(job.job_params), timezone: $("e-timezone").value.trim() };
    if (params.type === "recurring") params.schedule = $("e-schedule").value.trim();
    if (params.type === "one-time") {
      params.time = $("e-time").value ? `${$("e-time").value}:00` : "";
    }
    const action = { ...job.action };  // secret headers come back as "***": the server keeps them
    if (action.type === "message") action.text = $("e-text").value;
    if (action.type === "webhook") action.url = $("e-url").value.trim();
    if (action.type === "news_digest") action.topic = $("e-topic").value;
    if (action.type === "prompt") action.prompt = $("e-prompt").value;
    const notify = [];
    if ($("e-inbox").checked) notify.push({ channel: "inbox" });
    const email = $("e-email").value.trim();
    if (email) notify.push({ channel: "email", to: email });
    const hook = $("e-hook").value.trim();
    if (hook) {
      const old = (job.notify ?? []).find((c) => c.channel === "webhook");
      notify.push(old && old.url === hook ? old : { channel: "webhook", url: hook });
    }
    const body = { name: $("e-name").value.trim(), job_params: params, action, notify };
    // Sent only when chosen: a policy the page does not know is kept as it is.
    if (params.type === "recurring" && $("e-overlap").value) {
      body.overlap_policy = $("e-overlap").value;
    }
    return body;
  }

  async saveEdit() {
    const job = this.editing;
    if (!job) return;
    for (const el of $("edit-form").querySelectorAll("[aria-invalid]")) {
      this.setError(el, "edit-error", "");
    }
    $("edit-error").textContent = "";
    await whileBusy($("edit-save"), async () => {
      try {
        const saved = await api("PATCH", `v1/jobs/${encodeURIComponent(job.job_id)}`,
          { body: this.editBody(job) });
        this.closeEdit();
        this.app.notify(t("done.edit", { name: saved.name }));
        await this.app.refreshSoon();
      } catch (error) {
        if (this.app.handled(error)) return;
        const control = $(EDIT_FIELDS[error.field] ?? "") ?? null;
        if (control) {
          this.setError(control, "edit-error", problemText(error));
          control.focus();
        } else {
          $("edit-error").textContent = problemText(error);
        }
      }
    });
  }

  async act(act, job, button) {
    if (act === "open") {
      this.openDetails(job);
      return;
    }
    if (act === "edit") {
      this.openEdit(job);
      return;
    }
    if (act === "delete") {
      const sure = await this.app.confirm(t("confirm.delete", { name: job.name }),
        t("confirm.deleteText"), t("act.delete"));
      if (!sure) return;
    }
    const path = `v1/jobs/${encodeURIComponent(job.job_id)}`;
    await whileBusy(button, async () => {
      try {
        if (act === "delete") await api("DELETE", path);
        else await api("POST", `${path}:${act}`);
        this.app.notify(t(`done.${act}`, { name: job.name }));
        await this.app.refreshSoon();
      } catch (error) {
        if (!this.app.handled(error)) this.app.notify(problemText(error), true);
      }
    });
  }

  // --- one task's runs -----------------------------------------------------------------
  async openDetails(job) {
    this.selected = job.job_id;
    this.runsLimit = PAGE;
    this.runs = null;
    $("runs").replaceChildren();
    $("details").hidden = false;
    this.renderDetails();
    this.render(!$("tasks-more").hidden);
    $("details-title").focus();
    try {
      await this.refreshDetails();
    } catch (error) {
      if (!this.app.handled(error)) this.app.notify(problemText(error), true);
    }
  }

  closeDetails() {
    const id = this.selected;
    this.selected = null;
    $("details").hidden = true;
    this.render(!$("tasks-more").hidden);
    const row = [...$("task-rows").children].find((el) => el.dataset.key === id);
    (row?.querySelector("[data-act=open]") ?? this.heading()).focus();
  }

  async refreshDetails() {
    const id = this.selected;
    const path = `v1/jobs/${encodeURIComponent(id)}/runs`;
    const { items, more } = await fetchPages(path, "runs", {}, this.runsLimit);
    if (id !== this.selected) return;
    this.runs = items;
    this.runsMore = more;
    this.renderDetails();
  }

  renderDetails() {
    const job = this.jobs.find((j) => j.job_id === this.selected);
    if (job) {
      $("details-title").textContent = t("details.title", { name: job.name });
      const fact = (label, value) => [h("dt", {}, label), h("dd", {}, value)];
      const channels = job.notify.map((c) => (c.channel === "inbox" ? t("nav.inbox")
        : `${c.channel}: ${c.to ?? c.url ?? ""}`));
      $("details-facts").replaceChildren(...[
        fact(t("col.schedule"), scheduleWords(job.job_params, job.schedule_words)),
        job.job_params.type === "recurring"
          ? fact(t("details.overlap"), tOr(`overlap.${job.overlap_policy}`, job.overlap_policy))
          : [],
        fact(t("col.status"), t(`status.${job.status}`)),
        fact(t("details.action"), `${tOr(`action.${job.action.type}`, job.action.type)}: ${
          job.action.text ?? job.action.url ?? job.action.topic ?? job.action.reason ?? ""}`),
        fact(t("details.notify"), channels.length ? channels.join(", ") : t("details.nowhere")),
        fact(t("details.retry"), String(job.retry_policy.max_attempts)),
      ].flat());
    }
    if (!this.runs) return;
    syncList($("runs"), this.runs, {
      key: (run) => run.run_id,
      signature: (run) => `${language()}|${JSON.stringify(run)}`,
      build: (run) => this.runItem(run),
    });
    $("runs-empty").hidden = this.runs.length > 0;
    $("runs-more").hidden = !this.runsMore;
  }

  runItem(run) {
    const fact = (label, value) => [h("dt", {}, label), h("dd", {}, value)];
    return h("li", { class: "run" },
      h("h3", {},
        h("span", { class: `badge r-${run.status}` }, t(`run.${run.status}`)), " ",
        when(run.scheduled_at),
        run.kind === "manual" ? h("span", { class: "tag" }, t("run.manual")) : null),
      h("dl", { class: "facts small" },
        fact(t("run.started"), when(run.started_at)),
        fact(t("run.finished"), when(run.finished_at)),
        fact(t("run.attempt"), String(run.attempt))),
      run.output !== null && run.output !== undefined ? [
        h("h4", {}, t("run.output")),
        h("pre", { class: "output", tabindex: "0" }, outputText(run.output))] : null,
      run.error ? [h("h4", {}, t("run.error")), h("pre", { class: "output error-text",
        tabindex: "0" }, run.error)] : null,
      run.deliveries.length ? [
        h("h4", {}, t("run.deliveries")),
        h("ul", { class: "deliveries" }, run.deliveries.map((d) => h("li", {},
          `${d.channel === "inbox" ? t("nav.inbox") : `${d.channel} → ${d.target}`}: `,
          h("span", { class: `badge d-${d.status}` }, t(`delivery.${d.status}`)),
          d.next_attempt_at ? ` ${t("delivery.next")}: ${when(d.next_attempt_at)}` : "",
          d.error ? ` ${d.error}` : "")))] : null);
  }
}

/** What a previewed task does, in the page's words: "a reminder", "a news digest". */
function actionWords(action) {
  const type = action ? action.type : "message";
  return tOr(`does.${type}`, type);
}
