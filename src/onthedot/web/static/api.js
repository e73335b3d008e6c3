// The REST API, as this page calls it: relative paths (so the page also works behind a proxy
// that serves it under a prefix), JSON in and out, RFC 9457 problems turned into ApiError.
//
// The token lives in sessionStorage: it survives a reload but not the tab, and no other site
// can read it. Without one the server may still answer (token-less local mode).

const TOKEN_KEY = "onthedot.token";

export class ApiError extends Error {
  constructor(status, problem) {
    super(problem?.detail ?? `HTTP ${status}`);
    this.status = status;
    this.code = problem?.code ?? "http_error";
    this.field = problem?.field ?? null;
    this.expected = problem?.expected ?? null;
  }

  /** The API wants a (different) token: the page should ask for one. */
  get needsSignIn() {
    return this.status === 401 || this.code === "untrusted_origin";
  }
}

export function token() {
  try {
    return sessionStorage.getItem(TOKEN_KEY);
  } catch {
    return null;
  }
}

export function setToken(value) {
  if (value) sessionStorage.setItem(TOKEN_KEY, value);
  else sessionStorage.removeItem(TOKEN_KEY);
}

/** A fresh Idempotency-Key: a create retried after a lost answer cannot make a second task. */
export function newKey() {
  const bytes = crypto.getRandomValues(new Uint8Array(16));
  return `web-${Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("")}`;
}

// GET answers that carry an ETag, by URL: the next poll sends it back as If-None-Match, and an
// unchanged list comes back as a bodiless 304 (GET /v1/jobs).
const remembered = new Map();
const REMEMBERED_MAX = 50;

export async function api(method, path, { body, key, query } = {}) {
  const headers = { Accept: "application/json, application/problem+json" };
  const bearer = token();
  if (bearer) headers.Authorization = `Bearer ${bearer}`;
  if (body !== undefined) headers["Content-Type"] = "application/json";
  if (key) headers["Idempotency-Key"] = key;
  let url = path;
  if (query) {
    const params = new URLSearchParams();
    for (const [name, value] of Object.entries(query)) {
      if (value !== undefined && value !== null && value !== "") params.set(name, String(value));
    }
    if ([...params].length) url += `?${params}`;
  }
  const known = method === "GET" ? remembered.get(url) : undefined;
  if (known) headers["If-None-Match"] = known.etag;
  let response;
  try {
    response = await fetch(url, {
      method, headers, body: body === undefined ? undefined : JSON.stringify(body),
      cache: "no-store",
    });
  } catch (error) {
    throw new ApiError(0, { code: "network", detail: String(error) });
  }
  if (response.status === 204) return null;
  if (response.status === 304 && known) return known.data;
  const data = await response.json().catch(() => null);
  if (!response.ok) throw new ApiError(response.status, data);
  const etag = method === "GET" ? response.headers.get("ETag") : null;
  if (etag) {
    remembered.delete(url);
    remembered.set(url, { etag, data });
    if (remembered.size > REMEMBERED_MAX) remembered.delete(remembered.keys().next().value);
  }
  return data;
}

const MAX_PAGES = 10;  // per refresh: a filtered listing may hand out empty pages

/** The first `limit` items of a paginated listing; `more` tells whether it goes on. */
export async function fetchPages(path, field, query, limit) {
  const items = [];
  let pageToken = null;
  for (let page = 0; page < MAX_PAGES; page++) {
    const size = Math.min(100, Math.max(1, limit - items.length));
    const data = await api("GET", path, { query: { ...query, page_size: size, page_token: pageToken } });
    items.push(...data[field]);
    pageToken = data.next_page_token;
    if (!pageToken || items.length >= limit) break;
  }
  return { items, more: Boolean(pageToken) };
}
