// The Inbox view: results the inbox channel delivered, unread first; mark one read.

import { api, fetchPages } from "./api.js";
import { forget, h, hidden, syncList, when, whileBusy } from "./dom.js";
import { language, t } from "./i18n.js";

const PAGE = 20;
const $ = (id) => document.getElementById(id);

export class InboxView {
  constructor(app) {
    this.app = app;
    this.limit = PAGE;
    this.items = [];
    this.seq = 0;
    $("inbox-unread").addEventListener("change", () => {
      this.limit = PAGE;
      this.app.refreshSoon();
    });
    $("inbox-more").addEventListener("click", () => {
      this.limit += PAGE;
      this.app.refreshSoon();
    });
    $("inbox-items").addEventListener("click", (e) => {
      const button = e.target.closest("button[data-act=read]");
      if (button) this.markRead(button.closest("li").dataset.key, button);
    });
  }

  heading() {
    return $("inbox-title");
  }

  async refresh() {
    const seq = ++this.seq;
    const query = { unread: $("inbox-unread").checked ? "true" : undefined };
    const { items, more } = await fetchPages("v1/inbox", "items", query, this.limit);
    if (seq !== this.seq) return;
    this.items = items;
    this.more = more;
    this.render();
  }

  render() {
    syncList($("inbox-items"), this.items, {
      key: (item) => item.item_id,
      signature: (item) => `${language()}|${JSON.stringify(item)}`,
      build: (item) => this.item(item),
      lost: this.heading(),
    });
    $("inbox-empty").hidden = this.items.length > 0;
    $("inbox-more").hidden = !this.more;
  }

  rerender() {
    forget($("inbox-items"));
    this.render();
  }

  item(item) {
    return h("li", { class: item.read ? "item" : "item unread" },
      h("h3", {}, item.title),
      h("p", { class: "muted" },
        h("span", { class: `badge ${item.read ? "d-delivered" : "s-scheduled"}` },
          t(item.read ? "inbox.read" : "inbox.unread")),
        ` ${t("inbox.delivered")} `, when(item.delivered_at)),
      h("p", { class: "text" }, item.text),
      item.read ? null : h("button", { type: "button", "data-act": "read" }, t("inbox.markRead"),
        hidden(` “${item.title}”`)));
  }

  async markRead(itemId, button) {
    await whileBusy(button, async () => {
      try {
        await api("POST", `v1/inbox/${encodeURIComponent(itemId)}:read`);
        await this.app.refreshSoon();
      } catch (error) {
        if (!this.app.handled(error)) this.app.notify(error.message, true);
      }
    });
  }
}
