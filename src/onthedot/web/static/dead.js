// The Dead letters view: runs that failed their last attempt, each with a Redrive button.

import { api, fetchPages } from "./api.js";
import { forget, h, hidden, syncList, when, whileBusy } from "./dom.js";
import { language, t } from "./i18n.js";

const PAGE = 20;
const $ = (id) => document.getElementById(id);

export class DeadLettersView {
  constructor(app) {
    this.app = app;
    this.limit = PAGE;
    this.runs = [];
    this.seq = 0;
    $("dead-more").addEventListener("click", () => {
      this.limit += PAGE;
      this.app.refreshSoon();
    });
    $("dead-items").addEventListener("click", (e) => {
      const button = e.target.closest("button[data-act=redrive]");
      const run = button && this.runs.find((r) => r.run_id === button.closest("li").dataset.key);
      if (run) this.redrive(run, button);
    });
  }

  heading() {
    return $("dead-title");
  }

  async refresh() {
    const seq = ++this.seq;
    const { items, more } = await fetchPages("v1/dead-letters", "dead_letters", {}, this.limit);
    await this.learnNames(items);
    if (seq !== this.seq) return;
    this.runs = items;
    this.more = more;
    this.render();
  }

  /** Dead letters name their job by id; the page shows its name. */
  async learnNames(runs) {
    const unknown = [...new Set(runs.map((r) => r.job_id))].filter((id) => !this.app.names.has(id));
    await Promise.all(unknown.map(async (id) => {
      try {
        const job = await api("GET", `v1/jobs/${encodeURIComponent(id)}`);
        this.app.names.set(id, job.name);
      } catch {
        this.app.names.set(id, id); // shown by id; not worth failing the list over
      }
    }));
  }

  render() {
    syncList($("dead-items"), this.runs, {
      key: (run) => run.run_id,
      signature: (run) => `${language()}|${this.app.names.get(run.job_id)}|${JSON.stringify(run)}`,
      build: (run) => this.item(run),
      lost: this.heading(),
    });
    $("dead-empty").hidden = this.runs.length > 0;
    $("dead-more").hidden = !this.more;
  }

  rerender() {
    forget($("dead-items"));
    this.render();
  }

  item(run) {
    const name = this.app.names.get(run.job_id) ?? run.job_id;
    const fact = (label, value) => [h("dt", {}, label), h("dd", {}, value)];
    return h("li", { class: "item" },
      h("h3", {}, name),
      h("dl", { class: "facts small" },
        fact(t("run.scheduled"), when(run.scheduled_at)),
        fact(t("run.finished"), when(run.finished_at)),
        fact(t("run.attempt"), String(run.attempt))),
      run.error ? h("pre", { class: "output error-text", tabindex: "0" }, run.error) : null,
      h("button", { type: "button", "data-act": "redrive" }, t("dead.redrive"),
        hidden(` “${name}”`)));
  }

  async redrive(run, button) {
    const name = this.app.names.get(run.job_id) ?? run.job_id;
    await whileBusy(button, async () => {
      try {
        await api("POST", `v1/dead-letters/${encodeURIComponent(run.run_id)}:redrive`);
        this.app.notify(t("dead.redriven", { name }));
        await this.app.refreshSoon();
      } catch (error) {
        if (!this.app.handled(error)) this.app.notify(error.message, true);
      }
    });
  }
}
