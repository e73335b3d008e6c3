// Small helpers to build the page's elements. Text always goes in as text (never as HTML), so
// a task's name or output cannot inject markup.

import { language } from "./i18n.js";

export const viewerZone = Intl.DateTimeFormat().resolvedOptions().timeZone;

/** h("p", {class: "x"}, "text", child, ...): attributes starting with "on" are listeners. */
export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs)) {
    if (value === false || value === null || value === undefined) continue;
    if (name.startsWith("on")) el.addEventListener(name.slice(2), value);
    else if (name === "dataset") Object.assign(el.dataset, value);
    else el.setAttribute(name, value === true ? "" : String(value));
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const child of children) {
    if (child === null || child === undefined || child === false) continue;
    if (Array.isArray(child)) append(el, child);
    else el.append(child instanceof Node ? child : String(child));
  }
}

/** Visually hidden text for screen readers ("Pause" + " “tea”"). */
export function hidden(text) {
  return h("span", { class: "vh" }, text);
}

/** An instant in the viewer's timezone and the page's language, with the exact instant in
 * its datetime attribute. */
export function when(iso) {
  if (!iso) return h("span", {}, "—");
  const date = new Date(iso);
  return h("time", { datetime: iso }, formatInstant(date));
}

export function formatInstant(date) {
  return new Intl.DateTimeFormat(language(), { dateStyle: "medium", timeStyle: "short" })
    .format(date);
}

/** "in 5 minutes" / "5 分鐘後", for the next run. */
export function relative(iso, now = Date.now()) {
  const seconds = (new Date(iso).getTime() - now) / 1000;
  const steps = [[60, "second"], [3600, "minute"], [86400, "hour"], [Infinity, "day"]];
  const size = { second: 1, minute: 60, hour: 3600, day: 86400 };
  const [, unit] = steps.find(([limit]) => Math.abs(seconds) < limit);
  return new Intl.RelativeTimeFormat(language(), { numeric: "auto" })
    .format(Math.round(seconds / size[unit]), unit);
}

/** A run's output as one short line: the message, the digest, an HTTP status, or JSON. */
export function outputSummary(output, limit = 120) {
  if (output === null || output === undefined) return "";
  let text;
  if (typeof output === "string") text = output;
  else if (typeof output.message === "string") text = output.message;
  else if (typeof output.digest === "string") text = output.digest;
  else if (typeof output.status_code === "number") text = `HTTP ${output.status_code}`;
  else text = JSON.stringify(output);
  return text.length > limit ? `${text.slice(0, limit - 1)}…` : text;
}

/** A run's output in full, for the run history. */
export function outputText(output) {
  if (typeof output === "string") return output;
  return JSON.stringify(output, null, 2);
}

const signatures = new WeakMap();

/** Make `container`'s children show `items`, rebuilding only the ones whose signature changed,
 * so polling does not flicker or steal focus. If the focused control's element is rebuilt, the
 * control with the same data-act (or its counterpart in `fallbacks`, e.g. pause -> resume) in
 * the new element gets the focus back. */
export function syncList(container, items, { key, signature, build, fallbacks = {}, lost }) {
  const active = document.activeElement;
  const holder = active && container.contains(active) ? active.closest("[data-key]") : null;
  const focusKey = holder?.dataset.key;
  const focusAct = active?.dataset?.act;
  const old = new Map([...container.children].map((el) => [el.dataset.key, el]));
  const elements = items.map((item) => {
    const k = key(item);
    const sig = signature(item);
    const previous = old.get(k);
    if (previous && signatures.get(previous) === sig) return previous;
    const el = build(item);
    el.dataset.key = k;
    signatures.set(el, sig);
    return el;
  });
  const unchanged = elements.length === container.children.length
    && elements.every((el, i) => container.children[i] === el);
  if (!unchanged) container.replaceChildren(...elements);
  if (focusKey === undefined || container.contains(document.activeElement)) return;
  const row = elements.find((el) => el.dataset.key === focusKey);
  const target = row && (row.querySelector(`[data-act="${focusAct}"]`)
    ?? row.querySelector(`[data-act="${fallbacks[focusAct]}"]`)
    ?? row.querySelector("[data-act]"));
  if (target) target.focus();
  else lost?.focus();
}

/** The same rows again, each rebuilt: after a change of language. */
export function forget(container) {
  for (const el of container.children) signatures.delete(el);
}

/** Run `work` for a button, ignoring clicks meanwhile. The button is marked aria-disabled, not
 * disabled: a disabled button drops the keyboard focus, and the viewer would lose their place. */
export async function whileBusy(button, work) {
  if (button.getAttribute("aria-disabled") === "true") return undefined;
  button.setAttribute("aria-disabled", "true");
  try {
    return await work();
  } finally {
    button.removeAttribute("aria-disabled");
  }
}
