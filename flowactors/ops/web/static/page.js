// The flow page: polls /api/status once a second and writes the counts into the graph the server
// drew (flowactors/ops/flow_graph.py) and the controller services' states into their listing; a
// processor clicked on the graph shows the services it uses; provenance search and the lineage
// viewer ask /api/*.
"use strict";

const POLL_MS = 1000;
const token = new URLSearchParams(location.search).get("token");
const headers = token ? { "X-Flowactors-Token": token } : {};
let expanded = new Set();   // lineage groups opened
let lineageUuid = null;
let processorDetails = {};  // /api/meta's processor_details: name -> {type, group, services}
let enabledIn = new Map();  // service path -> executors it is enabled in, from the last status

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
    setLines(group, [p.disabled ? "disabled" : `in ${count(p.flowfiles_in)} · out ${count(p.flowfiles_out)}`,
                     stuck ? `in on_trigger ${Math.round(p.stuck_seconds)} s`
                           : p.disabled ? "" : `${count(p.out_per_second)}/s · ${size(p.bytes_per_second)}/s`]);
    group.classList.toggle("disabled", Boolean(p.disabled));
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
  enabledIn = new Map((status.services || []).map((s) => [s.name, s.enabled]));
  document.querySelectorAll("td.service-state").forEach(paintState);
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

// ------------------------------------------------------------------ controller services
function element(tag, className, text) {
  const e = document.createElement(tag);
  if (className) e.className = className;
  if (text !== undefined) e.textContent = text;
  return e;
}

function link(text, title, action) {
  const a = element("a", "", text);
  a.title = title;
  a.addEventListener("click", (event) => { event.stopPropagation(); action(); });
  return a;
}

function paintState(cell) {
  // as the terminal's status says it (flowactors/ops/status_view.py)
  const n = enabledIn.get(cell.dataset.service) || 0;
  cell.textContent = n ? `enabled in ${n} executor${n === 1 ? "" : "s"}` : "not enabled";
  cell.classList.toggle("enabled", n > 0);
}

function stateCell(path) {
  const cell = element("td", "service-state");
  cell.dataset.service = path;
  paintState(cell);
  return cell;
}

function drawServices(services) {
  document.getElementById("service-count").textContent = services.length;
  document.querySelector("#services .empty").style.display = services.length ? "none" : "";
  document.getElementById("service-table").style.display = services.length ? "" : "none";
  document.querySelector("#service-table tbody").replaceChildren(...services.flatMap(serviceRows));
}

function serviceRows(s) {
  // a row, and the row under it its click opens: what it is and its properties
  const row = element("tr", "service");
  row.dataset.service = s.path;
  row.title = "click for its properties";
  const users = element("td", "used-by");
  s.used_by.forEach((name, i) => {
    users.append(...(i ? [", "] : []), link(name, "show this processor", () => selectProcessor(name)));
  });
  if (!s.used_by.length) users.append(element("span", "muted", "no processor"));
  const group = s.group ? element("td", "", s.group) : element("td", "muted", "(the flow)");
  row.append(element("td", "name", s.path), element("td", "", s.type), group, stateCell(s.path), users);
  row.addEventListener("click", () => row.classList.toggle("open"));
  const detail = element("tr", "service-detail");
  detail.dataset.service = s.path;
  const cell = element("td");
  cell.colSpan = 5;
  cell.append(element("div", "muted", `${s.type_name}: provides ${s.apis.join(", ") || "no service API"}`),
              propertyTable(s.properties));
  detail.append(cell);
  return [row, detail];
}

function propertyTable(properties) {
  const table = element("table", "properties");
  for (const p of properties) {
    const value = element("td");
    if (p.sensitive || !p.set) {   // a sensitive value never reaches the page: only whether it is set
      value.append(element("span", "muted", p.sensitive && p.set ? "sensitive value set" : "no value set"));
    } else if (p.service) {
      value.append(link(p.service, "show this service", () => showService(p.service)));
    } else {
      value.append(p.value, ...(p.default ? [" ", element("span", "muted", "(default)")] : []));
    }
    const row = element("tr");
    row.dataset.property = p.name;
    row.append(element("th", "", p.name), value);
    table.append(row);
  }
  return table;
}

function showService(path) {
  document.querySelectorAll("tr.service.selected").forEach((r) => r.classList.remove("selected"));
  const row = document.querySelector(`tr.service[data-service="${CSS.escape(path)}"]`);
  row.classList.add("open", "selected");
  row.scrollIntoView({ block: "nearest" });
}

function selectProcessor(name) {
  const detail = processorDetails[name];
  const graph = document.getElementById("graph");
  graph.querySelectorAll("g.processor.selected").forEach((g) => g.classList.remove("selected"));
  const box = graph.querySelector(`g.processor[data-processor="${CSS.escape(name)}"]`);
  if (box) box.classList.add("selected");
  const panel = document.getElementById("processor-detail");
  panel.hidden = false;
  panel.dataset.processor = name;
  document.getElementById("detail-name").textContent = name;
  document.getElementById("detail-type").textContent = detail.type + (detail.group ? ` in group ${detail.group}` : "");
  panel.querySelector(".empty").style.display = detail.services.length ? "none" : "";
  const table = document.getElementById("detail-services");
  table.style.display = detail.services.length ? "" : "none";
  table.tBodies[0].replaceChildren(...detail.services.map((ref) => {
    const row = element("tr");
    row.dataset.property = ref.property;
    const service = element("td");
    if (ref.service) service.append(link(ref.service, "show it in the controller services", () => showService(ref.service)));
    else service.append(ref.reference, " ", element("span", "muted", "(not in reach)"));
    row.append(element("td", "", ref.property), service, ref.service ? stateCell(ref.service) : element("td"));
    return row;
  }));
}

document.querySelector("#processor-detail .close").addEventListener("click", () => {
  document.getElementById("processor-detail").hidden = true;
  document.querySelectorAll("#graph g.processor.selected").forEach((g) => g.classList.remove("selected"));
});

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
  processorDetails = meta.processor_details;
  drawServices(meta.services);
  const graph = document.getElementById("graph");
  graph.innerHTML = await (await api("api/graph.svg")).text();
  graph.querySelectorAll("g.processor").forEach((box) => {
    box.addEventListener("click", () => selectProcessor(box.dataset.processor));
  });
  poll();
}

start().catch((err) => {
  const state = document.getElementById("run-state");
  state.textContent = err.message;
  state.className = "state gone";
});
