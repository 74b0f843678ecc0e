// The flow page: polls /api/status once a second and writes the counts into the graph the server
// drew (flowactors/ops/flow_graph.py); provenance search and the lineage viewer ask /api/*.
"use strict";

const POLL_MS = 1000;
const token = new URLSearchParams(location.search).get("token");
const headers = token ? { "X-Flowactors-Token": token } : {};
let expanded = new Set();   // lineage groups opened
let lineageUuid = null;

function api(path) {
  return fetch(path, { headers }).then(async (response) => {
    if (!response.ok) {
      let message = response.statusText;
      try { message = (await response.json()).error || message; } catch (e) { /* not JSON */ }
      throw new Error(message);
    }
    return response;
  });
}

// ------------------------------------------------------------------ numbers within STATS_CHARS
function count(n) {
  if (n < 1000) return String(Math.round(n * 10) / 10);
  for (const [limit, unit] of [[1e6, "k"], [1e9, "M"], [1e12, "G"]]) {
    if (n < limit) return (n / (limit / 1000)).toFixed(1) + unit;
  }
  return (n / 1e12).toFixed(1) + "T";
}

function size(bytes) {
  const units = ["B", "KB", "MB", "GB", "TB"];
  let i = 0;
  while (bytes >= 1024 && i < units.length - 1) { bytes /= 1024; i++; }
  return (i ? bytes.toFixed(1) : String(Math.round(bytes))) + " " + units[i];
}

function utc(ms) { return new Date(ms).toISOString().replace("T", " ").replace("Z", ""); }

// ------------------------------------------------------------------ views
document.querySelectorAll("header nav button").forEach((button) => {
  button.addEventListener("click", () => show(button.dataset.view));
});

function show(view) {
  document.querySelectorAll("header nav button").forEach((b) => b.classList.toggle("active", b.dataset.view === view));
  document.querySelectorAll(".view").forEach((v) => v.classList.toggle("active", v.id === "view-" + view));
}

// ------------------------------------------------------------------ the live graph
function setLines(group, lines) {
  group.querySelectorAll("text.stats").forEach((text) => { text.textContent = lines[Number(text.dataset.line)] || ""; });
}

function paint(status) {
  const graph = document.getElementById("graph");
  for (const p of status.processors) {
    const group = graph.querySelector(`g.processor[data-processor="${CSS.escape(p.name)}"]`);
    if (!group) continue;
    const stuck = p.stuck_seconds > 0;  // an on_trigger running past long_trigger_seconds
    setLines(group, [`in ${count(p.flowfiles_in)} · out ${count(p.flowfiles_out)}`,
                     stuck ? `in on_trigger ${Math.round(p.stuck_seconds)} s`
                           : `${count(p.out_per_second)}/s · ${size(p.bytes_per_second)}/s`]);
    group.classList.toggle("stuck", stuck);
    group.classList.toggle("has-errors", p.errors > 0);
    group.classList.toggle("running", !p.idle && p.running > 0);
  }
  for (const q of status.queues) {
    const group = graph.querySelector(`g.connection[data-connection="${CSS.escape(q.id)}"]`);
    if (!group) continue;
    setLines(group, [`queued ${count(q.count)} · ${size(q.bytes)}`,
                     `in ${count(q.in_per_second)}/s out ${count(q.out_per_second)}/s`]);
    group.classList.toggle("back-pressure", q.back_pressure);
    graph.querySelectorAll(`path.edge[data-connection="${CSS.escape(q.id)}"]`)
      .forEach((edge) => edge.classList.toggle("back-pressure", q.back_pressure));
  }
  paintBulletins(status.bulletins || []);
}

function paintBulletins(bulletins) {
  // the items already shown stay the same elements (an opened one stays open), new ones join them
  const list = document.getElementById("bulletin-list");
  document.getElementById("bulletin-count").textContent = bulletins.length;
  document.querySelector("#bulletins .empty").style.display = bulletins.length ? "none" : "";
  const shown = new Map([...list.children].map((li) => [li.dataset.key, li]));
  list.replaceChildren(...bulletins.slice().reverse().map((b) => {
    const key = `${b.processor}|${b.at}|${b.line}`;
    return shown.get(key) || bulletinItem(b, key);
  }));
}

function bulletinItem(b, key) {
  const li = document.createElement("li");
  li.className = "bulletin";
  li.dataset.key = key;
  li.dataset.processor = b.processor;
  const line = document.createElement("div");
  line.className = "line";
  line.title = "click for the full text";
  const when = document.createElement("span");
  when.className = "when";
  when.textContent = new Date(b.at * 1000).toISOString().substring(11, 19);
  const who = document.createElement("span");
  who.className = "who";
  who.textContent = b.processor;
  line.append(when, " ", who, " ", `${b.where}: ${b.line}`);
  const full = document.createElement("pre");
  full.textContent = b.text;
  li.append(line, full);
  li.addEventListener("click", () => li.classList.toggle("open"));
  return li;
}

async function poll() {
  const state = document.getElementById("run-state");
  try {
    const status = await (await api("api/status")).json();
    state.textContent = status.repairing ? "repairing" : status.started ? `running ${status.elapsed} s` : "starting";
    state.className = "state" + (status.started ? " running" : "");
    paint(status);
  } catch (err) {
    state.textContent = "flow stopped: page gone";
    state.className = "state gone";
  }
  setTimeout(poll, POLL_MS);
}

// ------------------------------------------------------------------ provenance search
function option(select, value) {
  const o = document.createElement("option");
  o.value = o.textContent = value;
  select.append(o);
}

document.getElementById("search").addEventListener("submit", async (event) => {
  event.preventDefault();
  const form = new FormData(event.target);
  const query = new URLSearchParams([...form].filter(([, v]) => v !== ""));
  const note = document.getElementById("search-note");
  const body = document.querySelector("#events tbody");
  note.className = "note";
  note.textContent = "searching...";
  try {
    const found = await (await api("api/provenance?" + query)).json();
    body.replaceChildren(...found.events.map(eventRow));
    note.textContent = `${found.events.length} event(s), newest first` + (found.more ? "; more match: raise the limit" : "");
  } catch (err) {
    body.replaceChildren();
    note.className = "note error";
    note.textContent = err.message;
  }
});

function eventRow(e) {
  const tr = document.createElement("tr");
  tr.dataset.eventId = e.event_id;
  const cells = [[e.event_id, "num"], [utc(e.timestamp)], [e.event_type], [e.component_name || e.component_id],
                 null, [e.filename || ""], [e.updated_size, "num"]];
  for (const cell of cells) {
    const td = document.createElement("td");
    if (cell === null) {
      const a = document.createElement("a");
      a.textContent = e.flowfile_uuid;
      a.title = "show its lineage";
      a.className = "uuid";
      a.addEventListener("click", () => openLineage(e.flowfile_uuid));
      td.append(a);
    } else {
      td.textContent = cell[0];
      if (cell[1]) td.className = cell[1];
    }
    tr.append(td);
  }
  return tr;
}

// ------------------------------------------------------------------ lineage
document.getElementById("lineage-form").addEventListener("submit", (event) => {
  event.preventDefault();
  openLineage(new FormData(event.target).get("uuid").trim());
});

function openLineage(uuid) {
  if (uuid !== lineageUuid) expanded = new Set();
  lineageUuid = uuid;
  document.querySelector("#lineage-form input[name=uuid]").value = uuid;
  show("lineage");
  drawLineage();
}

async function drawLineage() {
  const note = document.getElementById("lineage-note");
  const holder = document.getElementById("lineage");
  note.className = "note";
  note.textContent = "drawing...";
  try {
    const query = new URLSearchParams({ uuid: lineageUuid, expand: [...expanded].join(",") });
    holder.innerHTML = await (await api("api/lineage?" + query)).text();
    note.textContent = `lineage of FlowFile ${lineageUuid}`;
    holder.querySelectorAll("g.node.group").forEach((group) => {
      group.addEventListener("click", () => { expanded.add(group.dataset.node); drawLineage(); });
    });
  } catch (err) {
    holder.replaceChildren();
    note.className = "note error";
    note.textContent = err.message;
  }
}

// ------------------------------------------------------------------ start
async function start() {
  const meta = await (await api("api/meta")).json();
  document.getElementById("flow-name").textContent = meta.flow;
  document.title = `flowactors: ${meta.flow}`;
  const form = document.getElementById("search");
  meta.processors.forEach((name) => option(form.component, name));
  meta.event_types.forEach((name) => option(form.type, name));
  document.getElementById("graph").innerHTML = await (await api("api/graph.svg")).text();
  poll();
}

start().catch((err) => {
  const state = document.getElementById("run-state");
  state.textContent = err.message;
  state.className = "state gone";
});
