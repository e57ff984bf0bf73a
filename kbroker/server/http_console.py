"""The web console: one HTML page with a little JavaScript, no build step, reading ``/api/...``.

Views (hash routes): ``#/`` cluster and brokers, ``#/topics``, ``#/topic/<name>`` (partitions,
offsets, configs, the latest messages), ``#/groups``, ``#/group/<id>`` (members, offsets with lag,
lag over time drawn as an SVG line, refreshed every two seconds), ``#/share-groups``,
``#/share-group/<id>`` (members and their partitions; per share partition its start offset,
in-flight and acquired records and lag, refreshed every two seconds), ``#/clients`` (every client
connection with its client id, software and the telemetry instance it pushes metrics as,
KIP-714), ``#/client/<instance id>`` (that client's pushed metrics, one plotted over time,
refreshed every two seconds), ``#/subjects`` (the schema registry's subjects with their versions
and latest id), ``#/subject/<name>`` (every version's id, type, references and schema).
"""

PAGE = r"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>kbroker console</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>
body{font:14px/1.4 system-ui,sans-serif;margin:0;color:#222}
header{background:#1f2937;color:#fff;padding:8px 16px;display:flex;gap:16px;align-items:center}
header a{color:#cbd5e1;text-decoration:none}header a:hover{color:#fff}
main{padding:16px}table{border-collapse:collapse;margin:8px 0 16px}
td,th{border:1px solid #ddd;padding:4px 8px;text-align:left;vertical-align:top}
th{background:#f3f4f6}code,.mono{font-family:ui-monospace,monospace}
.muted{color:#6b7280}svg{border:1px solid #ddd;background:#fafafa}
</style></head><body>
<header><strong>kbroker</strong><a href="#/">Cluster</a><a href="#/topics">Topics</a>
<a href="#/groups">Consumer groups</a><a href="#/share-groups">Share groups</a><a href="#/clients">Clients</a><a href="#/subjects">Schemas</a><a href="/metrics">Metrics</a></header>
<main id="view">Loading…</main>
<script>
"use strict";
const view = document.getElementById("view");
let timer = null;
const esc = s => String(s ?? "").replace(/[&<>"']/g, c => ({"&":"&amp;","<":"&lt;",">":"&gt;",'"':"&quot;","'":"&#39;"}[c]));
const enc = encodeURIComponent;
async function api(path) {
  const r = await fetch("/api/" + path);
  if (!r.ok) throw new Error((await r.text()) || r.status);
  return r.json();
}
function table(id, cols, rows) {
  return `<table id="${id}"><thead><tr>${cols.map(c => `<th>${esc(c)}</th>`).join("")}</tr></thead><tbody>` +
    rows.map(r => `<tr>${r.map(c => `<td>${c}</td>`).join("")}</tr>`).join("") + "</tbody></table>";
}
async function cluster() {
  const c = await api("cluster");
  view.innerHTML = `<h2>Cluster <span class="mono" id="cluster-id">${esc(c.cluster_id)}</span></h2>` +
    `<p>Controller: ${c.controller_id} · connections: ${c.connections} · up ${c.uptime_s} s` +
    (c.dev_mode ? " · <strong>dev mode</strong>" : "") + "</p><h3>Brokers</h3>" +
    table("brokers", ["Node", "Host", "Port", "Rack"], c.brokers.map(b => [b.node_id, esc(b.host), b.port, esc(b.rack ?? "")])) +
    "<h3>Listeners</h3>" + table("listeners", ["Name", "Bound"], Object.entries(c.listeners).map(([n, a]) => [esc(n), esc(a)]));
}
async function topics() {
  const ts = await api("topics");
  view.innerHTML = "<h2>Topics</h2>" + table("topics", ["Topic", "Partitions", "Messages", "Bytes"],
    ts.map(t => [`<a href="#/topic/${enc(t.name)}">${esc(t.name)}</a>` + (t.internal ? ' <span class="muted">internal</span>' : ""),
                 t.partitions, t.messages, t.size]));
}
async function topic(name, limit) {
  const [t, m] = await Promise.all([api("topics/" + enc(name)), api(`topics/${enc(name)}/messages?limit=${limit}`)]);
  view.innerHTML = `<h2>Topic <span class="mono">${esc(t.name)}</span></h2><p class="muted mono">${esc(t.topic_id)}</p>` +
    "<h3>Partitions</h3>" + table("partitions", ["Partition", "Leader", "Epoch", "Replicas", "ISR", "Here", "Log start", "Log end", "High watermark", "Bytes"],
      t.partitions.map(p => [p.partition, p.leader, p.leader_epoch, p.replicas.join(", "), p.isr.join(", "),
                             esc(p.role ?? "-"), p.log_start_offset, p.log_end_offset, p.high_watermark, p.size])) +
    `<h3>Latest messages</h3><label>Show <select id="limit">${[10, 20, 50, 100, 500].map(n =>
      `<option ${n == limit ? "selected" : ""}>${n}</option>`).join("")}</select></label>` +
    table("messages", ["Partition", "Offset", "Timestamp", "Key", "Value", "Headers"],
      m.records.map(r => [r.partition, r.offset, esc(new Date(r.timestamp).toISOString()), `<span class="mono">${esc(r.key ?? "null")}</span>`,
        `<span class="mono">${esc(r.value ?? "null")}</span>`, r.headers.map(h => esc(h[0] + "=" + (h[1] ?? "null"))).join("<br>")])) +
    "<h3>Configs</h3>" + table("configs", ["Name", "Value", "Source"], t.configs.map(c => [esc(c.name), `<span class="mono">${esc(c.value)}</span>`, esc(c.source)]));
  document.getElementById("limit").onchange = e => { location.hash = `#/topic/${enc(name)}?limit=${e.target.value}`; };
}
async function groups() {
  const gs = await api("groups");
  view.innerHTML = "<h2>Consumer groups</h2>" + table("groups", ["Group", "State", "Members", "Lag"],
    gs.map(g => [`<a href="#/group/${enc(g.group_id)}">${esc(g.group_id)}</a>`, esc(g.state), g.members, g.lag]));
}
function lagPlot(points, id = "lag-plot") {
  const w = 600, h = 160, pad = 24;
  if (!points.length) return `<svg id="${id}" width="${w}" height="${h}"><text x="${pad}" y="${h / 2}">no samples yet</text></svg>`;
  const t0 = points[0][0], t1 = Math.max(points[points.length - 1][0], t0 + 1);
  const max = Math.max(1, ...points.map(p => p[1]));
  const xy = points.map(([t, v]) => [pad + (t - t0) / (t1 - t0) * (w - 2 * pad), h - pad - v / max * (h - 2 * pad)]);
  return `<svg id="${id}" width="${w}" height="${h}" data-points="${points.length}" data-last="${points[points.length - 1][1]}">` +
    `<text x="4" y="14">${max}</text><text x="4" y="${h - 6}">0</text>` +
    `<polyline fill="none" stroke="#2563eb" stroke-width="2" points="${xy.map(p => p.join(",")).join(" ")}"/></svg>`;
}
async function group(id) {
  const g = await api("groups/" + enc(id));
  view.innerHTML = `<h2>Group <span class="mono">${esc(g.group_id)}</span></h2>` +
    `<p>State <strong id="group-state">${esc(g.state)}</strong> · protocol ${esc(g.protocol ?? "-")} · generation ${g.generation}</p>` +
    "<h3>Members</h3>" + table("members", ["Member", "Client id", "Host", "Instance id"],
      g.members.map(m => [`<span class="mono">${esc(m.member_id)}</span>` + (m.member_id === g.leader ? " (leader)" : ""), esc(m.client_id), esc(m.client_host), esc(m.group_instance_id ?? "")])) +
    "<h3>Offsets</h3>" + table("offsets", ["Topic", "Partition", "Committed", "Lag"],
      g.offsets.map(o => [esc(o.topic), o.partition, o.committed_offset, o.lag ?? "?"])) +
    "<h3>Lag over time</h3>" + lagPlot(g.lag_history);
  timer = setTimeout(() => route(), 2000);
}
async function shareGroups() {
  const gs = await api("share-groups");
  view.innerHTML = "<h2>Share groups</h2>" + table("share-groups", ["Group", "State", "Members", "In flight", "Lag"],
    gs.map(g => [`<a href="#/share-group/${enc(g.group_id)}">${esc(g.group_id)}</a>`, esc(g.state), g.members, g.in_flight, g.lag]));
  timer = setTimeout(() => route(), 2000);
}
async function shareGroup(id) {
  const g = await api("share-groups/" + enc(id));
  view.innerHTML = `<h2>Share group <span class="mono">${esc(g.group_id)}</span></h2>` +
    `<p>State <strong id="share-group-state">${esc(g.state)}</strong> · epoch ${g.group_epoch}</p>` +
    "<h3>Members</h3>" + table("share-members", ["Member", "Client id", "Host", "Epoch", "Assigned"],
      g.members.map(m => [`<span class="mono">${esc(m.member_id)}</span>`, esc(m.client_id), esc(m.client_host), m.member_epoch,
        esc(m.assigned.map(a => a.topic + " " + a.partitions.join(",")).join("; "))])) +
    "<h3>Share partitions</h3>" + table("share-partitions", ["Topic", "Partition", "Start offset", "In flight", "Acquired", "Lag"],
      g.partitions.map(p => [esc(p.topic), p.partition, p.start_offset, p.in_flight, p.acquired, p.lag]));
  timer = setTimeout(() => route(), 2000);
}
async function clients() {
  const cs = await api("clients");
  view.innerHTML = "<h2>Client connections</h2>" +
    '<p class="muted">Clients push their own metrics (KIP-714) once a client-metrics subscription matches them, e.g. <code>kafka-client-metrics.sh --bootstrap-server HOST:PORT --alter --name all --metrics \'*\' --interval 10000</code>.</p>' +
    table("clients", ["Peer", "Listener", "Principal", "Client id", "Software", "Connected (s)", "Telemetry instance", "Pushes", "Series"],
      cs.map(c => [esc(c.peer), esc(c.listener ?? ""), esc(c.principal), esc(c.client_id ?? ""), esc(c.software), c.connected_s,
        c.telemetry ? `<a class="mono" href="#/client/${enc(c.telemetry.instance_id)}">${esc(c.telemetry.instance_id)}</a>` : '<span class="muted">none</span>',
        c.telemetry ? c.telemetry.pushes : "", c.telemetry ? c.telemetry.series : ""]));
  timer = setTimeout(() => route(), 2000);
}
async function client(id, chosen) {
  const first = await api("clients/" + enc(id));
  const key = chosen || (first.series.find(s => s.name.endsWith("request.latency.avg")) || first.series[0] || {}).key;
  const c = key ? await api(`clients/${enc(id)}?series=${enc(key)}`) : first;
  const i = c.instance;
  view.innerHTML = `<h2>Client <span class="mono" id="client-id">${esc(i.client_id ?? "")}</span></h2>` +
    `<p class="mono muted">${esc(i.instance_id)}</p><p>${esc(i.software)} · subscription ${i.subscription_id} · ` +
    `metrics <span class="mono">${esc(i.requested_metrics.join(", ") || "none")}</span> every ${i.push_interval_ms} ms · ` +
    `<span id="client-pushes">${i.pushes}</span> pushes` +
    (Object.keys(i.refused).length ? " · refused " + esc(Object.entries(i.refused).map(([e, n]) => e + " " + n).join(", ")) : "") + "</p>" +
    (key ? `<h3>Over time</h3><label>Metric <select id="series">${c.series.map(s =>
      `<option value="${esc(s.key)}" ${s.key === key ? "selected" : ""}>${esc(s.key)}</option>`).join("")}</select></label><br>` +
      lagPlot(c.points || [], "client-metric-plot") : '<p class="muted">no metrics pushed yet</p>') +
    "<h3>Metrics</h3>" + table("client-metrics", ["Metric", "Attributes", "Value"],
      c.series.map(s => [`<span class="mono">${esc(s.name)}</span>`, esc(Object.entries(s.attributes).map(([k, v]) => k + "=" + v).join(" ")),
                         esc(s.value)]));
  const select = document.getElementById("series");
  if (select) select.onchange = e => { location.hash = `#/client/${enc(id)}?series=${enc(e.target.value)}`; };
  timer = setTimeout(() => route(), 2000);
}
function registryNote(r) {
  if (!r.enabled) return '<p class="muted">The schema registry is off (set schema.registry.listeners).</p>';
  return `<p>Schema registry at <span class="mono" id="registry-url">${esc(r.url)}</span>` +
    (r.served_by ? ` · its state is on broker ${r.leader}: <a href="${esc(r.served_by)}/subjects">${esc(r.served_by)}</a>` : "") +
    (r.error ? ` · ${esc(r.error)}` : "") + "</p>";
}
async function subjects() {
  const r = await api("subjects");
  view.innerHTML = "<h2>Schemas</h2>" + registryNote(r) + table("subjects", ["Subject", "Versions", "Soft-deleted", "Latest id", "Type", "Compatibility", "Mode"],
    r.subjects.map(s => [`<a href="#/subject/${enc(s.subject)}">${esc(s.subject)}</a>`, s.versions.join(", "),
      s.deleted_versions.join(", "), s.latest_id, esc(s.schema_type), esc(s.compatibility), esc(s.mode)]));
}
async function subject(name) {
  const s = await api("subjects/" + enc(name));
  view.innerHTML = `<h2>Subject <span class="mono">${esc(s.subject)}</span></h2>` + registryNote(s) +
    `<p>Compatibility ${esc(s.compatibility ?? "-")} · mode ${esc(s.mode ?? "-")}</p>` +
    table("versions", ["Version", "Id", "Type", "References", "Schema"],
      s.versions.map(v => [v.version + (v.deleted ? ' <span class="muted">deleted</span>' : ""), v.id, esc(v.schema_type),
        esc(v.references.map(x => `${x.name} → ${x.subject} v${x.version}`).join("; ")),
        `<pre class="mono">${esc(v.schema)}</pre>`]));
}
async function route() {
  clearTimeout(timer);
  const [path, query] = location.hash.slice(1).split("?");
  const params = new URLSearchParams(query || "");
  const parts = (path || "/").split("/").filter(Boolean).map(decodeURIComponent);
  try {
    if (parts[0] === "topics") await topics();
    else if (parts[0] === "topic") await topic(parts[1], Number(params.get("limit") || 20));
    else if (parts[0] === "groups") await groups();
    else if (parts[0] === "group") await group(parts[1]);
    else if (parts[0] === "share-groups") await shareGroups();
    else if (parts[0] === "share-group") await shareGroup(parts[1]);
    else if (parts[0] === "clients") await clients();
    else if (parts[0] === "subjects") await subjects();
    else if (parts[0] === "subject") await subject(parts[1]);
    else if (parts[0] === "client") await client(parts[1], params.get("series"));
    else await cluster();
  } catch (e) {
    view.innerHTML = `<p id="error">Error: ${esc(e.message)}</p>`;
  }
}
window.addEventListener("hashchange", route);
route();
</script></body></html>
""".encode()
