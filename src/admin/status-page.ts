/**
 * `GET /status`: one self-contained HTML page (inline CSS and JavaScript, no external assets, so it
 * works on an air-gapped box) that shows every route with its strategy and every upstream with its
 * state, weights, active requests, totals, last probe and the strategy's live state — the numbers a
 * learner wants to watch while the balancing algorithms and health checks run — the DNS discovery
 * lines (SPEC 7) with their last lookup, each route's access and limits with what they refused in
 * the last minute (SPEC 8), each discovered upstream tagged with the name and the
 * `pass` line it came from, and the HTTPS listener's certificates with their names and expiry.
 *
 * The page arrives with the current snapshot embedded (so it is complete without JavaScript and for
 * `chromium --dump-dom`), then polls `GET /status.json` every second, redraws the tables and keeps a
 * 60-point request-rate history per upstream, drawn as an inline SVG sparkline (requests/s from the
 * difference of `requestsTotal` between polls).
 */
import type { StatusSnapshot } from './status-snapshot.js';

/** The page, with `snapshot` embedded as its first data. */
export function renderStatusPage(snapshot: StatusSnapshot): string {
  // `<` escaped so the JSON cannot close the script element (HTML spec, "script data" state).
  const data = JSON.stringify(snapshot).replace(/</g, '\\u003c');
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>proxy status</title>
<style>
  :root { color-scheme: light; --bg: #f6f7f9; --card: #fff; --line: #dde1e6; --text: #1d2329; --muted: #66707a; }
  * { box-sizing: border-box; }
  body { margin: 0; padding: 16px 20px; font: 13px/1.4 system-ui, -apple-system, "Segoe UI", Roboto, "DejaVu Sans", sans-serif; background: var(--bg); color: var(--text); }
  header { display: flex; align-items: baseline; gap: 16px; flex-wrap: wrap; margin-bottom: 12px; }
  h1 { font-size: 18px; margin: 0; }
  .muted { color: var(--muted); }
  section.route { background: var(--card); border: 1px solid var(--line); border-radius: 8px; margin-bottom: 14px; overflow: hidden; }
  section.route h2 { font-size: 14px; margin: 0; padding: 8px 12px; border-bottom: 1px solid var(--line); display: flex; gap: 12px; align-items: baseline; flex-wrap: wrap; }
  table { border-collapse: collapse; width: 100%; }
  th, td { text-align: left; padding: 5px 10px; border-bottom: 1px solid var(--line); white-space: nowrap; }
  th { font-weight: 600; color: var(--muted); font-size: 12px; }
  td.num { text-align: right; font-variant-numeric: tabular-nums; }
  tr:last-child td { border-bottom: 0; }
  .state { display: inline-block; min-width: 64px; text-align: center; padding: 1px 8px; border-radius: 10px; font-weight: 600; font-size: 12px; }
  .state-UP { background: #d9f2e1; color: #11652e; }
  .state-DOWN { background: #fbd9d9; color: #9c1515; }
  .state-down { background: #e4e6e9; color: #4a525a; }
  .state-ejected { background: #ffe7c2; color: #8a4b00; }
  .state-draining, .state-leaving { background: #dde7ff; color: #23408e; }
  .tag { display: inline-block; margin-left: 4px; padding: 0 6px; border-radius: 8px; font-size: 11px; background: #efe6ff; color: #52308a; }
  .probe-ok { color: #11652e; } .probe-fail { color: #9c1515; }
  svg.spark { display: block; }
  code { font-size: 12px; }
  .warn { background: #fbd9d9; color: #9c1515; border-radius: 8px; padding: 6px 12px; margin: 0 0 12px; }
  .warn:empty { display: none; }
</style>
</head>
<body>
<header>
  <h1>proxy status</h1>
  <span id="summary" class="muted"></span>
  <span id="updated" class="muted"></span>
</header>
<div id="worker-failures" class="warn"></div>
<main id="routes"></main>
<section id="discovery" class="route"></section>
<section id="certificates" class="route"></section>
<script id="initial-status" type="application/json">${data}</script>
<script>
"use strict";
const HISTORY = 60;
const history = new Map(); // "route origin" -> { last: {total, at}, rates: [] }
const esc = (text) => String(text).replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]);

function remember(route, upstream, atMs) {
  const key = route + " " + upstream.origin;
  let entry = history.get(key);
  if (!entry) { entry = { last: undefined, rates: [] }; history.set(key, entry); }
  if (entry.last && atMs > entry.last.at) {
    const rate = Math.max(0, (upstream.requestsTotal - entry.last.total) / ((atMs - entry.last.at) / 1000));
    entry.rates.push(rate);
    if (entry.rates.length > HISTORY) entry.rates.shift();
  }
  entry.last = { total: upstream.requestsTotal, at: atMs };
  return entry.rates;
}

function sparkline(rates) {
  const width = 120, height = 24;
  if (rates.length < 2) return '<svg class="spark" width="' + width + '" height="' + height + '" aria-label="request rate"><line x1="0" y1="' + (height - 1) + '" x2="' + width + '" y2="' + (height - 1) + '" stroke="#ccd2d8"/></svg>';
  const max = Math.max(1, ...rates);
  // Few points spread over at least a sixth of the width; the history fills it up to HISTORY points.
  const step = width / (Math.max(rates.length, HISTORY / 6) - 1);
  const offset = width - step * (rates.length - 1);
  const points = rates.map((r, i) => (offset + i * step).toFixed(1) + "," + (height - 1 - (r / max) * (height - 3)).toFixed(1)).join(" ");
  return '<svg class="spark" width="' + width + '" height="' + height + '" aria-label="request rate"><polyline fill="none" stroke="#2f6fdb" stroke-width="1.5" points="' + points + '"/></svg>';
}

function describeState(state) {
  if (!state) return "";
  return Object.entries(state).map(([k, v]) => esc(k) + "=" + esc(v)).join(" ");
}

function probeCell(probe, healthCheck) {
  if (!healthCheck.isEnabled) return '<span class="muted">checks off</span>';
  if (!probe) return '<span class="muted">pending</span>';
  const verdict = probe.ok ? '<span class="probe-ok">ok</span>' : '<span class="probe-fail">fail</span>';
  const detail = probe.status !== undefined ? " " + probe.status : probe.error ? " " + esc(probe.error) : "";
  return verdict + detail + ' <span class="muted">' + Math.round(probe.ageMs / 1000) + "s ago</span>";
}

function limitsCell(limits) {
  const parts = [];
  if (limits.accessRules > 0) parts.push("access " + limits.accessRules + " rule(s)");
  if (limits.rateLimit !== null) parts.push("rate_limit " + esc(limits.rateLimit));
  if (limits.connLimit !== null) parts.push("conn_limit " + limits.connLimit);
  if (parts.length === 0) return "";
  const m = limits.lastMinute;
  return '<span class="limits">' + parts.join(", ") + '; last minute: denied ' + m.denied + ", rate-limited " + m.rateLimited + ", conn-limited " + m.connLimited + "</span>";
}

function render(snapshot) {
  const atMs = Date.parse(snapshot.generatedAt);
  const classes = Object.entries(snapshot.totals.byStatusClass).sort().map(([k, v]) => k + ": " + v).join(", ");
  document.getElementById("summary").textContent =
    snapshot.mode + " mode, " + snapshot.workers.length + " worker(s)" + (snapshot.silentWorkers.length > 0 ? " answering, " + snapshot.silentWorkers.length + " silent" : "") + ", " + snapshot.totals.requests + " requests" + (classes ? " (" + classes + ")" : "");
  document.getElementById("updated").textContent = "updated " + new Date(atMs).toLocaleTimeString();
  document.getElementById("worker-failures").innerHTML = snapshot.workerStartFailures.map((f) =>
    "worker " + f.slot + " cannot start: " + esc(f.reason) + " (" + f.failedStarts + " failed start(s) in a row; next attempt in " + Math.ceil(f.nextAttemptInMs / 1000) + " s)").concat(
    snapshot.silentWorkers.map((w) => "worker pid " + w.pid + " did not answer within 1 s (stopped or stuck): its counts are not shown per worker")).join("<br>");
  const html = snapshot.routes.map((route) => {
    const rows = route.upstreams.map((u) => {
      const tags = (u.isBackup ? '<span class="tag">backup</span>' : "") + (u.registry ? '<span class="tag">registered</span>' : "") +
        (u.discoveredFrom ? '<span class="tag">' + esc(u.discoveredFrom.name) + '</span> <span class="muted">from ' + esc(u.discoveredFrom.line) + "</span>" : "");
      const perWorker = snapshot.mode === "cluster" ? '<div class="muted">' + u.workers.map((w) => "pid " + w.pid + ": " + w.healthState.toUpperCase() + ", " + w.requestsTotal + " req").join("; ") + "</div>" : "";
      return "<tr>" +
        "<td><code>" + esc(u.address) + "</code>" + tags + perWorker + "</td>" +
        '<td><span class="state state-' + esc(u.state) + '">' + esc(u.state) + "</span></td>" +
        '<td class="num">' + u.weight + '</td><td class="num">' + u.effectiveWeight + "</td>" +
        '<td class="num">' + u.activeRequests + '</td><td class="num">' + u.requestsTotal + '</td><td class="num">' + u.failuresTotal + "</td>" +
        "<td>" + probeCell(u.lastProbe, route.healthCheck) + "</td>" +
        '<td class="num">' + (u.lastProbe ? u.lastProbe.latencyMs + " ms" : "") + "</td>" +
        "<td><code>" + describeState(u.strategyState) + "</code></td>" +
        "<td>" + sparkline(remember(route.name, u, atMs)) + "</td>" +
        "</tr>";
    }).join("");
    return '<section class="route"><h2>' + esc(route.name) + ' <code class="muted">' + esc(route.match) + "</code> <span>" + esc(route.strategy) + "</span>" +
      '<span class="muted">' + (route.healthCheck.isEnabled ? "health " + esc(route.healthCheck.method) + " " + esc(route.healthCheck.path) + " every " + route.healthCheck.intervalMs + " ms" : "health checks off") + "</span>" + limitsCell(route.limits) + "</h2>" +
      "<table><thead><tr><th>upstream</th><th>state</th><th>weight</th><th>eff. weight</th><th>active</th><th>requests</th><th>failures</th><th>last probe</th><th>latency</th><th>strategy state</th><th>req/s</th></tr></thead>" +
      "<tbody>" + rows + "</tbody></table></section>";
  }).join("");
  document.getElementById("routes").innerHTML = html || '<p class="muted">no routes</p>';
  const lines = snapshot.discovery.map((d) =>
    "<tr><td>" + esc(d.route) + "</td><td><code>" + esc(d.name) + "</code></td><td>" + esc(d.kind) + '</td><td><code class="muted">' + esc(d.line) + "</code></td>" +
    '<td class="num">' + d.upstreams + "</td><td>" + (d.lastResult === null ? '<span class="muted">pending</span>' : esc(d.lastResult)) + "</td>" +
    "<td>" + (d.lastAnswerAt === null ? '<span class="muted">none yet</span>' : esc(new Date(d.lastAnswerAt).toLocaleTimeString()) + ' <span class="muted">' + Math.max(0, Math.round((atMs - Date.parse(d.lastAnswerAt)) / 1000)) + "s ago</span>") + "</td>" +
    "<td>" + (d.lastError === null ? "" : esc(d.lastError)) + "</td></tr>").join("");
  const discovery = document.getElementById("discovery");
  discovery.hidden = snapshot.discovery.length === 0;
  discovery.innerHTML = "<h2>DNS discovery</h2><table><thead><tr><th>route</th><th>name</th><th>kind</th><th>line</th><th>upstreams</th><th>last result</th><th>last answer</th><th>last error</th></tr></thead><tbody>" + lines + "</tbody></table>";
  const certificates = snapshot.certificates.map((c) =>
    "<tr><td><code>" + esc(c.file === null ? "acme" : c.file) + "</code>" + (c.isDefault ? '<span class="tag">default</span>' : "") + "</td>" +
    "<td>" + esc(c.names.join(", ")) + "</td><td>" + esc(c.notAfter) + '</td><td class="num">' + Math.floor((c.notAfterSeconds * 1000 - atMs) / 86400000) + "</td></tr>").join("");
  const section = document.getElementById("certificates");
  section.hidden = snapshot.certificates.length === 0;
  section.innerHTML = "<h2>certificates</h2><table><thead><tr><th>certificate</th><th>names</th><th>expires</th><th>days left</th></tr></thead><tbody>" + certificates + "</tbody></table>";
}

render(JSON.parse(document.getElementById("initial-status").textContent));
async function poll() {
  try {
    const response = await fetch("status.json", { cache: "no-store", credentials: "same-origin" });
    if (response.ok) render(await response.json());
    else document.getElementById("updated").textContent = "status.json answered " + response.status;
  } catch (error) {
    document.getElementById("updated").textContent = "proxy unreachable: " + error.message;
  }
}
setInterval(poll, 1000);
</script>
</body>
</html>
`;
}
