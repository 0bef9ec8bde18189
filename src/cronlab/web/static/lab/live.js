/* Live mode: a real cluster started by the lab, its snapshots next to the model's prediction. */
import { $, fmt, state } from "./state.js";
import { clock } from "./timeline.js";

function liveHeaders() {
  var h = { "Content-Type": "application/json" };
  if (state.token) h["X-Cronlab-Token"] = state.token;
  return h;
}

function livePost(path, body) {
  return fetch("/api/live/" + path, { method: "POST", headers: liveHeaders(), body: JSON.stringify(body || {}) })
    .then(function (res) { return res.json().then(function (b) { return { ok: res.ok, body: b }; }); });
}

export function liveStart() {
  var s = state.scenario;
  var body = {
    replicas: Math.min(7, Number(s.replicas)), workers: Math.min(16, Number(s.workers)), election: s.election,
    timers: s.timers, ttl: Math.min(120, Number(s.ttl)), count: Number($("#c-live-count").value),
    drain_s: Number($("#c-live-drain").value),
  };
  $("#live-status").textContent = "starting…";
  livePost("start", body).then(function (res) {
    if (!res.ok) { $("#live-status").textContent = res.body.error; return; }
    liveShow(res.body);
    liveListen();
  });
}

export function liveListen() {
  if (state.source) state.source.close();
  var src = new EventSource("/api/live/events");
  state.source = src;
  src.addEventListener("snapshot", function (ev) { liveShow(JSON.parse(ev.data)); });
  src.addEventListener("end", function () { src.close(); state.source = null; });
  src.onerror = function () { src.close(); state.source = null; };
}

var LIVE_ROWS = [
  ["due", "Due"], ["dispatched", "Dispatched"], ["executed", "Executed"],
  ["duplicates", "Duplicate executions"], ["missed", "Missed triggers"],
  ["backlog_peak", "Queue backlog peak"], ["drain_time_s", "Drain time (s)"],
  ["takeover_delays_s", "Takeovers"],
];

export function liveShow(snap) {
  state.live = snap;
  var on = !!snap.running;
  ["live-crash", "live-pause", "live-stop"].forEach(function (a) {
    document.querySelector('[data-action="' + a + '"]').disabled = !on;
  });
  document.querySelector('[data-action="live-start"]').disabled = on;
  if (!on) { $("#live-status").textContent = state.liveNote || "idle"; return; }
  state.liveNote = "";
  $("#live-body").hidden = false;
  var st = snap.status || {}, lead = st.leader || {};
  $("#live-status").textContent = "running · t = " + snap.t + " s · worker rate " + snap.config.worker_rate + "/s" +
    (lead.replica != null ? " · leader replica " + lead.replica + " (epoch " + lead.epoch + ")" : "") +
    (snap.cluster_exit != null ? " · cluster exited " + snap.cluster_exit : "");
  var body = $("#live-table tbody"), rep = snap.report || {}, pred = snap.prediction.totals;
  body.textContent = "";
  LIVE_ROWS.forEach(function (row) {
    var k = row[0], tr = document.createElement("tr");
    [row[1], show(rep[k]), show(pred[k])].forEach(function (v, i) {
      var td = document.createElement(i ? "td" : "th");
      td.textContent = v;
      tr.appendChild(td);
    });
    tr.dataset.live = k;
    body.appendChild(tr);
  });
  var ol = $("#live-log");
  ol.textContent = "";
  snap.events.forEach(function (e) {
    var li = document.createElement("li"), tm = document.createElement("time"), k = document.createElement("span"), tx = document.createElement("span");
    tm.textContent = (e.t < 0 ? "−" : "") + clock(Math.abs(e.t));
    k.className = "kind " + e.kind; k.textContent = e.kind; tx.textContent = e.text;
    li.append(tm, k, tx);
    ol.appendChild(li);
  });
}

function show(v) {
  if (v == null) return "–";
  if (Array.isArray(v)) return v.length ? v.map(function (x) { return show(x) + " s"; }).join(", ") : "none";
  if (typeof v !== "number") return String(v);
  return Number.isInteger(v) ? fmt(v) : v.toFixed(1);
}

export function liveStop() {
  $("#live-status").textContent = "stopping…";
  livePost("stop").then(function (res) {
    state.liveNote = res.ok ? "stopped; processes killed, folder removed" : res.body.error;
    liveShow({ running: false });
  });
}

export function liveChaos(action) {
  livePost("chaos", { action: action, for: 15 }).then(function (res) {
    if (!res.ok) $("#live-status").textContent = res.body.error;
  });
}
