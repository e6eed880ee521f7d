// The status page: reads the controller's answers and draws them. No build
// step, no framework; every value is put in with textContent, never as HTML.
"use strict";

// shown is every value as the page puts it in, as the command line prints
// it (cmd/mesh/shown.go): text a page shows as it is stays; any other, with
// control or format characters or line breaks (a node's report may say
// anything), is quoted with them escaped, so no node draws a line of its own.
function shown(s) {
  s = String(s);
  const odd = /[\p{C}\p{Zl}\p{Zp}]/u;
  if (!odd.test(s)) return s;
  const named = { "\n": "\\n", "\r": "\\r", "\t": "\\t" };
  return '"' + s.replace(/[\\"]/g, (c) => "\\" + c).replace(/[\p{C}\p{Zl}\p{Zp}]/gu,
    (c) => named[c] || "\\u" + c.codePointAt(0).toString(16).padStart(4, "0")) + '"';
}

function el(tag, text, cls) {
  const e = document.createElement(tag);
  if (text !== undefined) e.textContent = shown(text);
  if (cls) e.className = cls;
  return e;
}

function textNode(text) { return document.createTextNode(shown(text)); }

function stateClass(s) { return "state-" + String(s).replace(/ /g, "-"); }

function fill(id, items, none) {
  const list = document.getElementById(id);
  list.replaceChildren(...(items.length || !none ? items : [el("li", none, "quiet")]));
}

async function fetchJSON(url) {
  // Bounded: a controller that takes a request and never answers must not
  // hold the page's loop, which then could not say it is stale.
  const r = await fetch(url, { cache: "no-store", signal: AbortSignal.timeout(staleAfter) });
  if (!r.ok) throw new Error(url + ": " + r.status + " " + (await r.text()));
  return r.json();
}

const seenStates = new Set();

// staleAfter: status is read every second, so an answer older than this
// means the controller (or mesh up) is not answering: the verdict must not
// go on saying "well" in green from what it said before (issue 28). A
// wall screen that wants to be told sooner (or later) gives ?stale=MS;
// under two reads it would call a live controller stale, so it is not
// taken below 2000.
const staleAfter = Math.max(2000, Number(new URLSearchParams(location.search).get("stale")) || 5000);
let heard = null; // when the controller last answered, null: never
let lastWell = null;

// stale says the page has not heard from the controller within
// staleAfter, in its element v, and answers whether it did.
function stale(v) {
  if (heard !== null && Date.now() - heard <= staleAfter) return false;
  const since = heard === null ? "since this page opened" : `since ${new Date(heard).toLocaleTimeString()} (${Math.round((Date.now() - heard) / 1000)} s ago)`;
  v.textContent = `unknown: not heard from the controller ${since}`;
  v.className = "verdict stale";
  return true;
}

function drawVerdict() {
  const v = document.getElementById("verdict");
  if (stale(v)) return;
  v.textContent = lastWell ? "well" : "not well";
  v.className = "verdict " + (lastWell ? "well" : "notwell");
}

// rowsOf is the nodes of a brief status (a table by column, as
// wire.StatusTable writes it: the names a line each; each node's state an
// index into states, a byte of base64 as Go writes []uint8; sequences as
// runs; moments as runs of seconds after since_from, in unix seconds;
// details each once, by row where there is one: detail_is, runs of
// indexes into detail, or, from a controller before it, one a row) as
// objects, one a node.
function rowsOf(t) {
  if (!t || !t.names) return [];
  const state = atob(t.state || "");
  const sequence = unrun(t.sequence), since = unrun(t.since).map((s) => s + (t.since_from || 0));
  const detail = {};
  const is = t.detail_is ? unrun(t.detail_is) : null;
  (t.detail_at || []).forEach((row, k) => { detail[row] = t.detail[is ? is[k] : k]; });
  return t.names.split("\n").map((name, i) => ({ name, state: t.states[state.charCodeAt(i)], sequence: sequence[i], since: since[i] * 1000, detail: detail[i] || "" }));
}

// unrun is a column written as runs ("value*rows" or a value alone, a
// comma between), a value a row.
function unrun(runs) {
  const out = [];
  if (!runs) return out;
  for (const run of runs.split(",")) {
    const [v, n] = run.split("*");
    for (let k = 0; k < Number(n || 1); k++) out.push(Number(v));
  }
  return out;
}

function drawStatus(s) {
  heard = Date.now();
  s.nodes = rowsOf(s.table);
  lastWell = s.well;
  drawVerdict();
  fill("causes", (s.causes || []).map((c) => el("li", c)), s.well ? "nothing: the mesh is well" : "only the nodes and standings below");
  const filter = document.getElementById("filter");
  const search = document.getElementById("search").value.trim();
  for (const n of s.nodes) {
    if (!seenStates.has(n.state)) {
      seenStates.add(n.state);
      filter.append(el("option", n.state));
    }
  }
  const rows = s.nodes
    .filter((n) => (!filter.value || n.state === filter.value) && (!search || n.name.includes(search)))
    .map((n) => {
      const tr = el("tr");
      tr.dataset.node = n.name;
      const link = el("a", n.name);
      link.href = "/node/" + encodeURIComponent(n.name);
      const name = el("td");
      name.append(link);
      tr.append(name, el("td", n.state, "state " + stateClass(n.state)), el("td", String(n.sequence)),
        el("td", new Date(n.since).toISOString()), el("td", n.detail || ""));
      return tr;
    });
  fill("nodes", rows);
  fill("rollouts", (s.rollouts || []).map((r) => {
    const wave = r.wave >= 0 ? `, wave ${r.wave + 1} of ${r.waves.length} (${r.waves[r.wave].name})` : "";
    const halt = r.node ? `: halted by ${r.node}: ${r.why}` : "";
    const li = el("li", `${r.id} ${r.module} build ${r.build.slice(0, 12)} `);
    li.append(el("span", r.state, stateClass(r.state)), textNode(`${wave}; ${r.applied} of ${r.total} node(s) applied its build${halt}`));
    return li;
  }), "none under way");
  fill("standings", s.standings.map((st) => el("li", `${st.provider} on ${st.machine} failing ${st.consumer} since ${st.since}: ${st.word}`)), "none");
  fill("runtimes", (s.runtimes || []).map((rt) => {
    const li = el("li", `${rt.module} on ${rt.node}: `);
    li.append(el("span", rt.state, stateClass(rt.state)), textNode(` since ${rt.since}: ${rt.detail}`));
    const h = health(rt);
    if (h) li.append(textNode("; "), el("span", rt.health, "health " + stateClass(rt.health)), textNode(h));
    return li;
  }), "no module runs a program");
}

// health is what follows a running program's health in status's line
// (cmd/mesh/text's HealthNote), null when it has none to say: a program
// without a check, or not running, whose last check says nothing of now.
function health(rt) {
  if (rt.state !== "running" || !rt.health) return null;
  if (rt.health === "healthy") return ` since ${rt.health_since}`;
  if (rt.health === "unhealthy") return ` since ${rt.health_since}: ${rt.health_detail || ""}`;
  return ": its health check has not passed yet";
}

let lastNode = null; // the node page's node as last read

// drawNodeState is the node page's verdict: its state, or stale as the
// status page's is, so a node shown "current" in green is never what a
// controller said minutes ago.
function drawNodeState() {
  const st = document.getElementById("state");
  if (stale(st) || lastNode === null) return;
  st.textContent = lastNode.state || (lastNode.retired ? "retired" : "");
  st.className = "verdict " + stateClass(lastNode.state);
}

function drawNode(p) {
  const n = p.node;
  heard = Date.now();
  lastNode = n;
  document.getElementById("name").textContent = shown(n.name);
  drawNodeState();
  const facts = [["capabilities", n.capabilities.join(", ")], ["labels", Object.entries(n.labels).map(([k, v]) => k + "=" + v).join(", ")],
    ["detail", n.detail || ""], ["would send", n.would_send || ""], ["last heard", n.last_heard || "not since the controller started"],
    ["facts", Object.entries(n.facts || {}).map(([k, v]) => k + "=" + v).join(", ")]];
  for (const a of n.assignments) facts.push(["module " + a.module, a.build.slice(0, 12)]);
  for (const rt of n.runtimes || []) {
    const h = health(rt);
    facts.push(["runs " + rt.module, rt.state + ": " + rt.detail + (h ? "; " + rt.health + h : "")]);
  }
  fill("facts", facts.map(([k, v]) => { const tr = el("tr"); tr.append(el("th", k), el("td", v)); return tr; }));
  fill("history", p.history.entries.slice().reverse().map((e) => {
    const li = el("li");
    li.append(el("span", `${e.at} ${e.kind} sequence ${e.sequence}`, stateClass(e.kind)));
    const extra = [e.by && "by " + e.by, e.operator && e.operator !== e.by && "asked by " + e.operator, e.reason, (e.paths || []).join(", "), e.failed && e.failed.map((f) => f.path + ": " + f.reason).join("; ")].filter(Boolean);
    if (extra.length) li.append(textNode(" — " + extra.join(" ")));
    for (const c of e.changes || []) {
      // The controller's diff of what it declared, a line each: its line
      // breaks and tabs are its own, not a node's, so it is put in as it is.
      const pre = el("pre");
      pre.textContent = `${c.change} ${c.path} (${c.module})${c.what ? " " + c.what.join(", ") : ""}\n${(c.lines || []).join("\n")}`;
      li.append(pre);
    }
    return li;
  }));
}

async function loop(url, draw, every) {
  const updated = document.getElementById("updated");
  for (;;) {
    try {
      draw(await fetchJSON(url));
      updated.textContent = "as of " + new Date().toLocaleTimeString();
    } catch (err) {
      updated.textContent = "cannot read the controller: " + err.message;
    }
    await new Promise((r) => setTimeout(r, every));
  }
}

if (document.body.dataset.page === "node") {
  const name = decodeURIComponent(location.pathname.split("/").pop());
  loop("/api/node/" + encodeURIComponent(name), drawNode, 2000);
  setInterval(() => { if (heard === null || Date.now() - heard > staleAfter) drawNodeState(); }, 1000);
} else {
  loop("/api/status?brief&details_once", drawStatus, 1000);
  // Apart from the loop, which may be waiting on an answer: the verdict
  // turns stale on time even while a read hangs.
  setInterval(() => { if (heard === null || Date.now() - heard > staleAfter) drawVerdict(); }, 1000);
}
