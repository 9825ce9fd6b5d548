// What the browser sent to the API and what came back, for test/browser/logout-csrf.spec.ts.
import type { BrowserContext, Page, Request, Response } from "@playwright/test";

export const COOKIE = "__Host-session";
const HEADERS_MS = 5_000;

/** Rejects after `ms`: some header reads never settle for a request Chromium blocked. */
export function within<T>(ms: number, promise: Promise<T>): Promise<T> {
  return Promise.race([
    promise,
    new Promise<never>((_, reject) => setTimeout(() => reject(new Error(`timed out after ${ms} ms`)), ms).unref()),
  ]);
}

export function info(line: string): void {
  console.log(`      info: ${line}`);
}

export interface Observed {
  via: string;
  method: string;
  type: string;
  status: number | null;
  failure: string | null;
  /** null: the wire headers were not observable. */
  cookie: boolean | null;
  /** Why Chromium left the session cookie off, when it says so (e.g. SameSiteLax). */
  cookieBlocked: string;
  secFetchSite: string;
  origin: string;
  setCookie: string;
  done: boolean;
}

function blank(url: string, method: string, type: string): Observed {
  const parsed = new URL(url);
  return {
    via: parsed.searchParams.get("via") ?? parsed.pathname,
    method,
    type,
    status: null,
    failure: null,
    cookie: null,
    cookieBlocked: "",
    secFetchSite: "-",
    origin: "-",
    setCookie: "",
    done: false,
  };
}

function header(headers: Record<string, unknown>, name: string): string | undefined {
  for (const [key, value] of Object.entries(headers)) if (key.toLowerCase() === name) return String(value);
  return undefined;
}

/**
 * Records every request the browser makes to the API, from two vantage points:
 * - Playwright's context events, which see every frame (an out-of-process iframe included)
 *   but know nothing of a request whose response Chromium blocked: the service's
 *   `Cross-Origin-Resource-Policy: same-origin` makes every cross-origin <img>, prefetch
 *   and no-cors fetch a `net::ERR_BLOCKED_BY_RESPONSE`, with no status and no wire headers;
 * - a CDP session on each page, whose ExtraInfo events carry the headers and cookies as
 *   sent (and why a cookie was left off) and the status even of a blocked response.
 */
export class Recorder {
  private readonly playwright: Observed[] = [];
  private readonly cdp = new Map<string, Observed & { url: string }>();
  private readonly pending: Promise<unknown>[] = [];
  private readonly api: string;
  private readonly token: string;

  constructor(context: BrowserContext, api: string, token: string) {
    this.api = api;
    this.token = token;
    const byRequest = new Map<Request, Observed>();
    context.on("request", (request) => {
      if (!this.ours(request.url())) return;
      const entry = blank(request.url(), request.method(), request.resourceType());
      byRequest.set(request, entry);
      this.playwright.push(entry);
      this.pending.push(this.readHeaders(request, entry));
    });
    context.on("response", (response: Response) => {
      const entry = byRequest.get(response.request());
      if (!entry) return;
      entry.status = response.status();
      this.pending.push(
        within(HEADERS_MS, response.allHeaders())
          .then((headers) => (entry.setCookie = headers["set-cookie"] ?? ""))
          .catch(() => {}),
      );
    });
    context.on("requestfinished", (request) => {
      const entry = byRequest.get(request);
      if (entry) entry.done = true;
    });
    context.on("requestfailed", (request) => {
      const entry = byRequest.get(request);
      if (!entry) return;
      entry.failure = request.failure()?.errorText ?? "failed";
      entry.done = true;
    });
  }

  private ours(url: string): boolean {
    return url.startsWith(`${this.api}/auth/`);
  }

  private carried(cookieHeader: string | undefined): boolean {
    return (cookieHeader ?? "").split(/;\s*/).includes(`${COOKIE}=${this.token}`);
  }

  private async readHeaders(request: Request, entry: Observed): Promise<void> {
    // allHeaders() is what went on the wire only once Chromium reports a response.
    try {
      const headers = await within(HEADERS_MS, request.allHeaders());
      if (headers["sec-fetch-site"] === undefined) return; // provisional headers only
      entry.cookie = this.carried(headers.cookie);
      entry.secFetchSite = headers["sec-fetch-site"];
      entry.origin = headers.origin ?? "-";
    } catch {
      // not observable here
    }
  }

  /** Adds the CDP view of `page`; call before it navigates. */
  async attach(page: Page): Promise<void> {
    const session = await page.context().newCDPSession(page);
    const entry = (requestId: string) => {
      let found = this.cdp.get(requestId);
      if (!found) {
        found = { ...blank(`${this.api}/`, "?", "?"), url: "" };
        this.cdp.set(requestId, found);
      }
      return found;
    };
    session.on("Network.requestWillBeSent", (event) => {
      const found = entry(event.requestId);
      const fresh = blank(event.request.url, event.request.method, (event.type ?? "other").toLowerCase());
      Object.assign(found, { url: event.request.url, via: fresh.via, method: fresh.method, type: fresh.type });
    });
    session.on("Network.requestWillBeSentExtraInfo", (event) => {
      const found = entry(event.requestId);
      found.cookie = this.carried(header(event.headers, "cookie"));
      found.cookieBlocked = event.associatedCookies
        .filter((c) => c.cookie.name === COOKIE && c.blockedReasons.length > 0)
        .map((c) => c.blockedReasons.join("+"))
        .join(",");
      found.secFetchSite = header(event.headers, "sec-fetch-site") ?? "-";
      found.origin = header(event.headers, "origin") ?? "-";
    });
    session.on("Network.responseReceivedExtraInfo", (event) => {
      const found = entry(event.requestId);
      found.status = event.statusCode;
      found.setCookie = header(event.headers, "set-cookie") ?? "";
    });
    session.on("Network.responseReceived", (event) => {
      const found = entry(event.requestId);
      found.status ??= event.response.status;
    });
    session.on("Network.loadingFinished", (event) => {
      entry(event.requestId).done = true;
    });
    session.on("Network.loadingFailed", (event) => {
      const found = entry(event.requestId);
      const reasons = [event.blockedReason, event.corsErrorStatus?.corsError].filter(Boolean);
      found.failure = `${event.errorText}${reasons.length ? ` [${reasons.join(", ")}]` : ""}`;
      found.done = true;
    });
    await session.send("Network.enable");
  }

  /** Both views merged: CDP's wire facts win, Playwright fills in what CDP did not see. */
  observed(): Observed[] {
    const fromCdp = [...this.cdp.values()].filter((e) => this.ours(e.url));
    const used = new Set<Observed>();
    const merged: Observed[] = [];
    for (const pw of this.playwright) {
      const twin = fromCdp.find((e) => !used.has(e) && e.via === pw.via && e.method === pw.method);
      if (!twin) {
        merged.push(pw);
        continue;
      }
      used.add(twin);
      merged.push({
        ...pw,
        status: twin.status ?? pw.status,
        failure: twin.failure ?? pw.failure,
        cookie: twin.cookie ?? pw.cookie,
        cookieBlocked: twin.cookieBlocked,
        secFetchSite: twin.secFetchSite !== "-" ? twin.secFetchSite : pw.secFetchSite,
        origin: twin.origin !== "-" ? twin.origin : pw.origin,
        setCookie: twin.setCookie || pw.setCookie,
        done: twin.done || pw.done,
      });
    }
    for (const e of fromCdp) if (!used.has(e)) merged.push(e);
    return merged;
  }

  /** Waits (bounded) until every recorded request has finished or failed. */
  async settle(ms = 5_000): Promise<void> {
    const deadline = Date.now() + ms;
    while (Date.now() < deadline && this.observed().some((e) => !e.done))
      await new Promise((resolve) => setTimeout(resolve, 50));
    await within(ms, Promise.allSettled(this.pending)).catch(() => {});
    for (const e of this.observed()) if (!e.done) info(`still unfinished after ${ms} ms: ${e.method} ${e.via}`);
  }

  find(via: string, method?: string): Observed[] {
    return this.observed().filter((e) => e.via === via && (method === undefined || e.method === method));
  }

  print(): void {
    for (const e of this.observed()) {
      const cookie =
        e.cookie === null
          ? "cookie ?"
          : e.cookie
            ? "cookie SENT"
            : `cookie not sent${e.cookieBlocked ? ` (blocked: ${e.cookieBlocked})` : ""}`;
      info(
        `${e.method} ${e.via} [${e.type}] -> ${e.status ?? "no status"}${e.failure ? `, then ${e.failure}` : ""}; ${cookie}; ` +
          `Sec-Fetch-Site ${e.secFetchSite}; Origin ${e.origin}${e.setCookie ? `; Set-Cookie ${e.setCookie}` : ""}`,
      );
    }
  }
}

export function describe(e: Observed | undefined): string {
  if (!e) return "not seen";
  const cookie = e.cookie === null ? "cookie ?" : e.cookie ? "cookie sent" : "cookie not sent";
  return `${e.method} -> ${e.status ?? "no status"}${e.failure ? ` (${e.failure})` : ""}, ${cookie}, Sec-Fetch-Site ${e.secFetchSite}, Origin ${e.origin}`;
}
