import { html, raw } from "hono/html";
import { type Company, policyLine } from "./companies.ts";
import { WORDS } from "./security-log.ts";

// The demo's two pages: the sign-in form, and the devices page, which a few lines of script
// fill from the service's own API, as a product's account pages could.

const STYLE = html`<style>
  body { font: 16px/1.5 system-ui, sans-serif; max-width: 46rem; margin: 3rem auto; padding: 0 1rem; color: #1d2330; }
  h1 { font-size: 1.6rem; margin-bottom: 0.2rem; }
  .muted { color: #5b6475; }
  table { width: 100%; border-collapse: collapse; margin: 1.5rem 0; }
  th, td { text-align: left; padding: 0.6rem 0.5rem; border-bottom: 1px solid #e2e5ea; vertical-align: top; }
  .tag { display: inline-block; font-size: 0.75rem; padding: 0 0.45rem; border-radius: 0.6rem; margin-left: 0.3rem; }
  .current { background: #dff3e4; color: #17603a; }
  .bound { background: #e3e9fb; color: #2a4796; }
  .support { background: #fdecd2; color: #8a4b00; }
  tr.support-access td { background: #fffaf2; }
  button { font: inherit; padding: 0.35rem 0.9rem; border-radius: 0.4rem; border: 1px solid #b9c0cc; background: #fff; cursor: pointer; }
  button.primary { background: #2a4796; color: #fff; border-color: #2a4796; }
  form { display: inline; }
  input { font: inherit; padding: 0.35rem; margin: 0 0.5rem 0.6rem 0; }
  h2 { font-size: 1.2rem; margin-top: 2.5rem; }
  #security-log { list-style: none; padding: 0; }
  #security-log li { display: grid; grid-template-columns: 1fr 11rem; gap: 0 1rem; padding: 0.45rem 0.5rem; border-bottom: 1px solid #e2e5ea; }
  #security-log time { grid-row: span 2; text-align: right; }
</style>`;

export function signInPage(users: string[]) {
  return html`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Sign in</title>${STYLE}</head>
<body>
  <h1>Sign in</h1>
  <p class="muted">Demo users: ${users.join(", ")} (password: wonderland).</p>
  <form id="signin">
    <input name="user" placeholder="user" value="alice" autocomplete="username">
    <input name="password" type="password" placeholder="password" autocomplete="current-password">
    <button class="primary" type="submit">Sign in</button>
  </form>
  <p id="error" class="muted"></p>
  <script>
    document.getElementById("signin").addEventListener("submit", async (event) => {
      event.preventDefault();
      const form = new FormData(event.target);
      const response = await fetch("/login", {
        method: "POST",
        headers: { "Content-Type": "application/json" },
        body: JSON.stringify({ user: form.get("user"), password: form.get("password") }),
      });
      if (response.ok) location.assign("/");
      else document.getElementById("error").textContent = (await response.json()).error;
    });
  </script>
</body></html>`;
}

/**
 * The devices page calls the service's API from the browser, with its cookies: the one way a
 * device-bound session can (its token alone is refused, its cookies, bound cookie included, are
 * not). The page is built with textContent, so nothing a session shows is read as HTML. Times
 * are the browser's to say: relative in words, the exact time in its locale and zone on hover.
 */
export function devicesPage(userId: string, supportAgent?: string, company?: Company) {
  return html`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Your devices</title>${STYLE}</head>
<body>
  ${supportAgent ? html`<p class="tag support" id="support-banner">Support access by ${supportAgent}: you act on ${userId}'s behalf</p>` : ""}
  <h1>Your devices</h1>
  <p class="muted">Signed in as <strong>${userId}</strong>. A device-bound session works only in the browser that holds its key: a copied cookie is refused anywhere else.</p>
  ${company ? html`<p id="organization">${policyLine(company)}</p>` : ""}
  <table><tbody id="devices"></tbody></table>
  <p id="error" class="muted"></p>
  <button id="sign-out-others" type="button">Sign out all other devices</button>
  <form method="post" action="/sign-out"><button class="primary" type="submit">Sign out</button></form>
  <h2>Security log</h2>
  <ol id="security-log"></ol>
  <script type="application/json" id="words">${raw(JSON.stringify(WORDS).replaceAll("<", "\\u003c"))}</script>
  <script>
    const api = (path, method) => fetch(path, { method, credentials: "same-origin" });
    const error = document.getElementById("error");
    const words = JSON.parse(document.getElementById("words").textContent);

    // In the page's language, as the rest of its words; the exact time in the browser's own.
    const relative = new Intl.RelativeTimeFormat(document.documentElement.lang, { numeric: "auto" });
    const exact = new Intl.DateTimeFormat(undefined, { dateStyle: "medium", timeStyle: "long" });
    const UNITS = [["year", 31536000], ["month", 2592000], ["week", 604800], ["day", 86400], ["hour", 3600], ["minute", 60]];

    function ago(time) {
      const seconds = (new Date(time.dateTime).getTime() - Date.now()) / 1000;
      const [unit, size] = UNITS.find(([, size]) => Math.abs(seconds) >= size) ?? [];
      // Whole units, never rounded up: 59 minutes is not "1 hour".
      time.textContent = unit ? relative.format(Math.trunc(seconds / size), unit) : "just now";
    }

    function timeOf(iso) {
      const time = document.createElement("time");
      time.dateTime = iso;
      time.title = exact.format(new Date(iso));
      ago(time);
      return time;
    }

    const label = (device) => [device.browser || "Unknown browser", device.os].filter(Boolean).join(" on ");

    function element(tag, className, text) {
      const made = document.createElement(tag);
      made.className = className;
      if (text !== undefined) made.textContent = text;
      return made;
    }

    function row(session, current) {
      const tr = document.createElement("tr");
      tr.dataset.session = session.id;
      const device = tr.insertCell();
      if (session.actor) {
        // Support access: someone else in the account, said plainly, with why and until when.
        tr.className = "support-access";
        device.append(element("strong", "", session.actor.sub), " ", element("span", "tag support", "support access"));
        const reason = element("div", "support-reason", "“" + session.actor.reason + "” · ends ");
        reason.append(timeOf(session.expires_at));
        device.append(reason);
      } else {
        device.append(element("strong", "", session.device.browser ?? "Unknown browser"));
        if (session.device.os) device.append(" on " + session.device.os);
      }
      if (current) device.append(" ", element("span", "tag current", "this device"));
      if (session.device_bound) device.append(" ", element("span", "tag bound", "device-bound"));
      const where = (session.location ?? "Unknown location") + " · " + (session.ip_address || "unknown IP");
      device.append(element("div", "muted", where));
      const activity = tr.insertCell();
      activity.className = "muted";
      activity.append("Last active", document.createElement("br"), timeOf(session.last_active_at));
      // Where it was last used from, as the service judges a copied cookie (browser, OS, network).
      const seen = session.last_seen;
      if (seen) {
        const from = [label(seen), seen.country, seen.asn === null ? null : "AS" + seen.asn].filter(Boolean).join(" · ");
        activity.append(document.createElement("br"), element("span", "last-seen", "from " + from));
      }
      const action = tr.insertCell();
      if (!current) {
        const button = element("button", "", session.actor ? "End access" : "Sign out");
        button.addEventListener("click", () => end("/auth/sessions/" + encodeURIComponent(session.id)));
        action.append(button);
      }
      return tr;
    }

    /**
     * What a session is called in the log: as listed while live; once ended, what the log itself
     * knows (events name no device: its agent, where a context change saw it, or its sign-in's IP).
     */
    function nameOf(id, body, events) {
      const live = body.sessions.find((session) => session.id === id);
      if (live) return live.actor ? "support access by " + live.actor.sub : label(live.device);
      const known = events.find((event) => event.session_id === id && (event.actor || event.context || event.type === "created"));
      if (known?.actor) return "support access by " + known.actor.sub;
      if (known?.context) return label(known.context.after);
      return known?.ip_address ? "a device signed in from " + known.ip_address : "an earlier session";
    }

    function logEntry(event, body, events) {
      const li = document.createElement("li");
      li.dataset.session = event.session_id;
      li.dataset.type = event.type;
      let what = words.events[event.type] ?? event.type;
      if (event.type === "created" && event.new_device) what += " " + words.newDevice;
      if (event.reason !== null) what += ": " + (words.reasons[event.type]?.[event.reason] ?? event.reason);
      // Who did it, unless the session itself (its own sign-in, sign-out, binding).
      const by =
        event.admin_key_id ? "an administrator"
        : event.type === "created" || event.actor_session_id === event.session_id ? null
        : event.actor_session_id === null ? (words.endedBy[event.reason] ?? "the service")
        : event.actor_session_id === body.currentSessionId ? "this device"
        : nameOf(event.actor_session_id, body, events);
      const session = event.session_id === body.currentSessionId ? "this device" : nameOf(event.session_id, body, events);
      li.append(element("strong", "what", what), timeOf(event.created_at));
      li.append(element("span", "muted", by ? session + " · by " + by : session));
      return li;
    }

    async function show() {
      const [response, logged] = await Promise.all([api("/auth/sessions", "GET"), api("/auth/events", "GET")]);
      // This session ended (here or on another device): back to the sign-in page.
      if (response.status === 401) return location.assign("/");
      const body = await response.json();
      if (!response.ok) {
        error.textContent = body.message;
        return;
      }
      const rows = body.sessions.map((session) => row(session, session.id === body.currentSessionId));
      document.getElementById("devices").replaceChildren(...rows);
      const { events, message } = await logged.json();
      if (!logged.ok) {
        error.textContent = message;
        return;
      }
      document.getElementById("security-log").replaceChildren(...events.map((event) => logEntry(event, body, events)));
    }

    async function end(path) {
      const response = await api(path, "DELETE");
      error.textContent = response.ok ? "" : (await response.json()).message;
      await show();
    }

    document.getElementById("sign-out-others").addEventListener("click", () => end("/auth/logout?scope=others"));
    show();
    // "just now" does not stay true while the page is open.
    setInterval(() => document.querySelectorAll("time").forEach(ago), 60_000);
  </script>
</body></html>`;
}

/** A "new sign-in" message as the demo's mailbox keeps it. */
export interface Notice {
  to: string;
  at: string;
  ip: string | null;
  link: string;
}

/**
 * The demo's stand-in for e-mail: every "Was this you?" message sent, newest first. A real
 * product mails each to its user; the link is the same.
 */
export function mailboxPage(notices: Notice[]) {
  return html`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Mailbox</title>${STYLE}</head>
<body>
  <h1>Mailbox</h1>
  <p class="muted">The demo's stand-in for e-mail: the messages the product sends when an account is signed in to from a new device.</p>
  ${notices.length === 0 ? html`<p class="muted" id="empty">No messages yet.</p>` : ""}
  ${notices.map(
    (notice) => html`<div class="notice">
    <p class="muted">To: ${notice.to} · <time datetime="${notice.at}">${notice.at.slice(0, 16).replace("T", " ")} UTC</time></p>
    <p><strong>New sign-in to your account</strong></p>
    <p>Your account was just signed in to from a device you have not used before${notice.ip ? ` (IP ${notice.ip})` : ""}. If this was you, there is nothing to do.</p>
    <p><a class="report-link" href="${notice.link}">This wasn't me</a></p>
  </div>`,
  )}
  <style>.notice { border: 1px solid #e2e5ea; border-radius: 0.5rem; padding: 0 1rem; margin: 1rem 0; }</style>
</body></html>`;
}

/**
 * "Was this you?": the page the message links to. The report token is in the URL's fragment,
 * which the browser never sends; the script takes it out of the address bar and history, reads
 * the sign-in (GET /auth/report, which ends nothing: a mail scanner may fetch it) and ends it on
 * the user's click (POST /auth/report), the token as Bearer.
 */
export function reportPage() {
  return html`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Was this you?</title>${STYLE}</head>
<body>
  <h1>Was this you?</h1>
  <div id="sign-in" hidden>
    <p>Your account was signed in to from:</p>
    <table><tbody>
      <tr><th>Device</th><td id="device"></td></tr>
      <tr><th>Where</th><td id="where"></td></tr>
      <tr><th>When</th><td id="when"></td></tr>
    </tbody></table>
    <p>If it was you, close this page. If not, sign that device out now:</p>
    <button id="confirm" class="primary" type="button">This wasn't me: sign it out</button>
  </div>
  <div id="done" hidden>
    <p><strong>That sign-in is signed out.</strong> Whoever used it has lost access.</p>
    <p>Next: <a href="/" id="change-password">change your password</a> (it signs out every other device too), and <a href="/" id="review-devices">review your devices</a>.</p>
  </div>
  <p id="error" class="muted"></p>
  <script>
    const token = location.hash.slice(1);
    history.replaceState(null, "", location.pathname);
    const headers = { Authorization: "Bearer " + token };
    const show = (id) => (document.getElementById(id).hidden = false);
    const refused = (body) => (document.getElementById("error").textContent = body.message);

    async function read() {
      if (!token) return refused({ message: "This page opens from the link in a new-sign-in message." });
      const response = await fetch("/auth/report", { headers });
      const body = await response.json();
      if (!response.ok) return refused(body);
      document.getElementById("device").textContent = body.name;
      document.getElementById("where").textContent = body.location ?? "Unknown location";
      const when = new Date(body.created_at);
      document.getElementById("when").textContent = when.toLocaleString();
      show("sign-in");
    }

    document.getElementById("confirm").addEventListener("click", async () => {
      const response = await fetch("/auth/report", { method: "POST", headers });
      const body = await response.json();
      document.getElementById("sign-in").hidden = true;
      if (!response.ok) return refused(body);
      show("done");
    });
    read();
  </script>
</body></html>`;
}
