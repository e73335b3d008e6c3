// The Tasks page: sign-in, the three views (tasks, inbox, dead letters), the language, and
// live updates by polling the REST API.
//
// Polling, not server-sent events: the page then needs nothing the API does not already
// offer, and works unchanged behind any proxy. It asks every POLL_MS while the tab is visible,
// at once when it becomes visible again, and right after each change the viewer makes.

import { ApiError, api, setToken, token } from "./api.js";
import { DeadLettersView } from "./dead.js";
import { h, hidden, viewerZone } from "./dom.js";
import { initialLanguage, language, setLanguage, t } from "./i18n.js";
import { InboxView } from "./inbox.js";
import { TasksView } from "./tasks.js";

const POLL_MS = 2000;
const COUNT_CAP = 100; // badges count up to this many ("99+" past it)
const $ = (id) => document.getElementById(id);

class App {
  constructor() {
    this.names = new Map(); // job_id -> name, for dead letters
    this.timer = null;
    this.signingIn = false;
    setLanguage(initialLanguage(), false);
    $("language").value = language();
    this.views = {
      "tasks": new TasksView(this),
      "inbox": new InboxView(this),
      "dead-letters": new DeadLettersView(this),
    };
    this.view = "tasks";
    this.bind();
    this.applyLanguage();
  }

  bind() {
    $("language").addEventListener("change", () => {
      setLanguage($("language").value, true);
      this.applyLanguage();
    });
    window.addEventListener("hashchange", () => this.route(true));
    document.addEventListener("visibilitychange", () => {
      if (!document.hidden) this.refreshSoon();
    });
    $("signin-form").addEventListener("submit", (e) => {
      e.preventDefault();
      setToken($("token").value.trim());
      $("token").value = "";
      this.enter();
    });
    $("sign-out").addEventListener("click", () => {
      setToken(null);
      this.enter();
    });
  }

  applyLanguage() {
    $("zone-note").textContent = t("timezone.note", { tz: viewerZone });
    for (const view of Object.values(this.views)) view.rerender();
    this.showCounts();
  }

  // --- sign-in -------------------------------------------------------------------------
  enter() {
    this.signingIn = false;
    $("signin").hidden = true;
    $("nav").hidden = false;
    $("sign-out").hidden = !token();
    this.route(false);
    this.refreshSoon();
  }

  showSignIn(error) {
    this.signingIn = true;
    clearTimeout(this.timer);
    let reason = "";
    if (error.code === "untrusted_origin") reason = t("signin.origin");
    else if (token()) reason = t("signin.rejected");
    setToken(null);
    $("signin-error").textContent = reason;
    for (const view of document.querySelectorAll(".view")) view.hidden = true;
    $("nav").hidden = true;
    $("sign-out").hidden = true;
    $("signin").hidden = false;
    $("token").focus();
  }

  /** Deal with what any view may meet: a token to ask for, a server that is away. True when
   * handled; the caller shows anything else next to what the viewer did. */
  handled(error) {
    if (!(error instanceof ApiError)) {
      console.error(error); // a bug of the page: say so, keep going
      return false;
    }
    if (error.needsSignIn) {
      this.showSignIn(error);
      return true;
    }
    if (error.status === 0 || error.status === 503) {
      this.notify(t("error.network"), true);
      return true;
    }
    return false;
  }

  // --- views ---------------------------------------------------------------------------
  route(moveFocus) {
    const wanted = location.hash.slice(1);
    this.view = wanted in this.views ? wanted : "tasks";
    for (const [name] of Object.entries(this.views)) {
      $(`view-${name}`).hidden = this.signingIn || name !== this.view;
    }
    for (const link of document.querySelectorAll("nav a[data-view]")) {
      if (link.dataset.view === this.view) link.setAttribute("aria-current", "page");
      else link.removeAttribute("aria-current");
    }
    if (moveFocus) {
      this.views[this.view].heading().setAttribute("tabindex", "-1");
      this.views[this.view].heading().focus();
      this.refreshSoon();
    }
  }

  /** Refresh now (after a change), then keep polling. */
  async refreshSoon() {
    clearTimeout(this.timer);
    if (this.signingIn) return;
    try {
      await this.views[this.view].refresh();
      await this.refreshCounts();
      if ($("notice").dataset.kind === "network") this.notify("");
    } catch (error) {
      if (!this.handled(error)) this.notify(error.message, true);
      if (error.status === 0 || error.status === 503) $("notice").dataset.kind = "network";
    }
    if (!this.signingIn && !document.hidden) {
      clearTimeout(this.timer);
      this.timer = setTimeout(() => this.refreshSoon(), POLL_MS);
    }
  }

  async refreshCounts() {
    const [inbox, dead] = await Promise.all([
      api("GET", "v1/inbox", { query: { unread: "true", page_size: COUNT_CAP } }),
      api("GET", "v1/dead-letters", { query: { page_size: COUNT_CAP } }),
    ]);
    this.counts = {
      inbox: [inbox.items.length, Boolean(inbox.next_page_token)],
      dead: [dead.dead_letters.length, Boolean(dead.next_page_token)],
    };
    this.showCounts();
  }

  showCounts() {
    if (!this.counts) return;
    for (const [id, [n, more], key] of [
      ["inbox-count", this.counts.inbox, "nav.unread"],
      ["dead-count", this.counts.dead, "nav.deadCount"],
    ]) {
      const badge = $(id);
      const shown = more ? `${COUNT_CAP - 1}+` : String(n);
      badge.hidden = n === 0;
      badge.replaceChildren(h("span", { "aria-hidden": "true" }, shown),
        hidden(`(${t(key, { n: shown })})`));
    }
  }

  // --- feedback ------------------------------------------------------------------------
  /** A one-line message in the status region (read out by screen readers). */
  notify(text, isError = false) {
    const notice = $("notice");
    notice.textContent = text;
    notice.classList.toggle("error", isError);
    delete notice.dataset.kind;
  }

  /** A modal yes/no question; Escape and "keep" answer no. */
  confirm(title, text, okLabel) {
    const dialog = $("confirm");
    $("confirm-title").textContent = title;
    $("confirm-text").textContent = text;
    $("confirm-ok").textContent = okLabel;
    $("confirm-cancel").textContent = t("confirm.keep");
    return new Promise((resolve) => {
      const finish = (answer) => {
        $("confirm-ok").onclick = null;
        $("confirm-cancel").onclick = null;
        dialog.oncancel = null;
        dialog.close();
        resolve(answer);
      };
      $("confirm-ok").onclick = () => finish(true);
      $("confirm-cancel").onclick = () => finish(false);
      dialog.oncancel = (e) => {
        e.preventDefault();
        finish(false);
      };
      dialog.showModal();
    });
  }
}

const app = new App();
app.enter();
