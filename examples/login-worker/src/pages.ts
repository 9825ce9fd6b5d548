import { html } from "hono/html";
import type { SessionView } from "../../../src/domain/session-view.ts";

// The demo's two pages. Plain HTML forms, a few lines of script for the JSON sign-in: what a
// product's own account pages would render from SessionService.listUserSessions.

const STYLE = html`<style>
  body { font: 16px/1.5 system-ui, sans-serif; max-width: 46rem; margin: 3rem auto; padding: 0 1rem; color: #1d2330; }
  h1 { font-size: 1.6rem; margin-bottom: 0.2rem; }
  .muted { color: #5b6475; }
  table { width: 100%; border-collapse: collapse; margin: 1.5rem 0; }
  th, td { text-align: left; padding: 0.6rem 0.5rem; border-bottom: 1px solid #e2e5ea; vertical-align: top; }
  .tag { display: inline-block; font-size: 0.75rem; padding: 0 0.45rem; border-radius: 0.6rem; margin-left: 0.3rem; }
  .current { background: #dff3e4; color: #17603a; }
  .bound { background: #e3e9fb; color: #2a4796; }
  button { font: inherit; padding: 0.35rem 0.9rem; border-radius: 0.4rem; border: 1px solid #b9c0cc; background: #fff; cursor: pointer; }
  button.primary { background: #2a4796; color: #fff; border-color: #2a4796; }
  form { display: inline; }
  input { font: inherit; padding: 0.35rem; margin: 0 0.5rem 0.6rem 0; }
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

export function devicesPage(userId: string, currentSessionId: string, sessions: SessionView[]) {
  const rows = sessions.map(
    (session) => html`<tr data-session="${session.id}">
      <td>
        <strong>${session.device.browser ?? "Unknown browser"}</strong>${session.device.os ? ` on ${session.device.os}` : ""}
        ${session.id === currentSessionId ? html`<span class="tag current">this device</span>` : ""}
        ${session.device_bound ? html`<span class="tag bound">device-bound</span>` : ""}
        <div class="muted">${session.location ?? "Unknown location"} · ${session.ip_address || "unknown IP"}</div>
      </td>
      <td class="muted">Last active<br><time datetime="${session.last_active_at}">${session.last_active_at.slice(0, 16).replace("T", " ")} UTC</time></td>
      <td>${
        session.id === currentSessionId
          ? ""
          : html`<form method="post" action="/devices/sign-out"><input type="hidden" name="id" value="${session.id}"><button type="submit">Sign out</button></form>`
      }</td>
    </tr>`,
  );
  return html`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Your devices</title>${STYLE}</head>
<body>
  <h1>Your devices</h1>
  <p class="muted">Signed in as <strong>${userId}</strong>. A device-bound session works only in the browser that holds its key: a copied cookie is refused anywhere else.</p>
  <table><tbody>${rows}</tbody></table>
  <form method="post" action="/devices/sign-out-others"><button type="submit">Sign out all other devices</button></form>
  <form method="post" action="/sign-out"><button class="primary" type="submit">Sign out</button></form>
</body></html>`;
}
