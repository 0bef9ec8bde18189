/* Live mode: a real cluster started by the lab, its snapshots next to the model's prediction. */
import { DEFAULTS, $, fmt, state } from "./state.js";
import { clock } from "./timeline.js";
import { setColumn } from "./runs.js";
import { renderVerdict } from "./verdict.js";

const LIVE_ACTIONS = ["live-crash", "live-pause", "live-zombie", "live-kill-worker", "live-stop"];

function liveHeaders() {
  var h = { "Content-Type": "application/json" };
  if (state.token) h["X-Cronlab-Token"] = state.token;
  return h;
}

function livePost(path, body) {
  return fetch("/api/live/" + path, { method: "POST", headers: liveHeaders(), body: JSON.stringify(body || {}) })
    .then(function (res) { return res.json().then(function (b) { return { ok: res.ok, status: res.status, body: b }; }); });
}

/* A refusal is shown as the engine's own words: a mode it cannot run is never faked. */
function refused(res) {
  $("#live-status").textContent = (res.status === 422 ? "the real engine refuses: " : "") + res.body.error;
  $("#live-status").className = "status bad";
}

/* What the engine's live run keeps as its own (lab/web/live.py passes none of these to the cluster). */
const ENGINE_OWN = [
  ["pod-restart", "pod restart", secs, "a killed worker is back after 300 s"],
  ["restart-after", "restart after", secs, "300 s"],
  ["batch", "batch", function (v) { return fmt(Number(v)); }, "10,000"],
  ["reconcile", "reconcile", function (v) { return v === "off" ? "off" : "every " + v + " s"; }, "its leader reconciles every 10 s"],
];
const LIVE_MOST = [["replicas", 7, " replicas"], ["workers", 16, " pods"], ["ttl", 120, " s TTL"],
  ["visibility", 600, " s visibility"]];

function secs(v) { return v === "never" ? "never" : v + " s"; }

/* What the page's scenario asks that a live run will not do, and why: said, never ignored. */
export function liveGaps(s, faults) {
  var out = [];
  if (faults.lose.length) out.push("lost messages (lose " + faults.lose.join(", ") + "): a live run has no queue failover to lose them with");
  if (s.effects === "external") out.push("external effects: the live invoices commit their effect with the ack (transactional)");
  var own = ENGINE_OWN.filter(function (k) { return s[k[0]] !== DEFAULTS[k[0]]; }).map(function (k) {
    return k[1] + " " + k[2](s[k[0]]) + " (live: " + k[3] + ")";
  });
  if (own.length) out.push(own.join(", ") + ": the engine runs with its own settings");
  var most = LIVE_MOST.filter(function (k) { return Number(s[k[0]]) > k[1]; }).map(function (k) {
    return s[k[0]] + k[2] + " (live: " + k[1] + ")";
  });
  if (most.length) out.push(most.join(", ") + ": the most a live run starts");
  var timed = [].concat(
    faults.crash.map(function (v) { return "crash " + v; }), faults.pause.map(function (v) { return "pause " + v; }),
    faults["worker-crash"].map(function (v) { return "worker crash " + v; }));
  if (timed.length) out.push(timed.join(", ") + ": not sent by themselves — send them with the buttons above while it runs");
  return out;
}

export function renderLiveGaps() {
  var gaps = liveGaps(state.scenario, state.faults), el = $("#live-gaps");
  el.hidden = !gaps.length;
  el.textContent = gaps.length ? "Not run live — " + gaps.join("; ") + "." : "";
}

export function liveBody() {
  var s = state.scenario;
  return {
    replicas: Math.min(7, Number(s.replicas)), workers: Math.min(16, Number(s.workers)), election: s.election,
    timers: s.timers, ttl: Math.min(120, Number(s.ttl)), count: Number($("#c-live-count").value),
    drain_s: Number($("#c-live-drain").value), lead_s: Number($("#c-live-lead").value), fencing: $("#c-live-fencing").checked ? "on" : "off",
    visibility: Math.min(600, Number(s.visibility)),
  };
}

export function liveStart() {
  $("#live-status").textContent = "starting…";
  $("#live-status").className = "status";
  livePost("start", liveBody()).then(function (res) {
    if (!res.ok) return refused(res);
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

export function liveShow(snap) {
  state.live = snap;
  var on = !!snap.running;
  LIVE_ACTIONS.forEach(function (a) { document.querySelector('[data-action="' + a + '"]').disabled = !on; });
  document.querySelector('[data-action="live-start"]').disabled = on;
  if (!on) { $("#live-status").textContent = state.liveNote || "idle"; return; }
  state.liveNote = "";
  var st = snap.status || {}, lead = st.leader || {}, cfg = snap.config || {};
  $("#live-status").className = "status";
  $("#live-status").textContent = "running · t = " + snap.t + " s · worker rate " + cfg.worker_rate + "/s" +
    (lead.replica != null ? " · leader replica " + lead.replica + " (epoch " + lead.epoch + ")" : "") +
    (snap.cluster_exit != null ? " · cluster exited " + snap.cluster_exit : "");
  $("#live-scale").textContent = cfg.count ? cfg.count.toLocaleString("en-US") + " invoices" + (cfg.fencing === "off" ? " · fencing off" : "") : "";
  setColumn("measured", snap.report || {});
  setColumn("live-model", (snap.prediction || {}).totals);
  /* The checker runs on the store's ledger as the run goes: until its first answer, say so. */
  var checked = snap.verdict && snap.verdict.counts;
  renderVerdict($("#verdict-live"), checked ? snap.verdict : null, "Live run");
  $("#verdict-live-none").hidden = !!checked;
  renderLiveLog(snap.events || []);
}

function renderLiveLog(events) {
  var ol = $("#live-log");
  ol.textContent = "";
  events.forEach(function (e) {
    var li = document.createElement("li"), tm = document.createElement("time"), k = document.createElement("span"), tx = document.createElement("span");
    tm.textContent = (e.t < 0 ? "−" : "") + clock(Math.abs(e.t));
    k.className = "kind " + e.kind; k.textContent = e.kind; tx.textContent = e.text;
    li.append(tm, k, tx);
    ol.appendChild(li);
  });
}

export function liveStop() {
  $("#live-status").textContent = "stopping…";
  livePost("stop").then(function (res) {
    state.liveNote = res.ok ? "stopped; processes killed, folder removed" : res.body.error;
    liveShow({ running: false });
  });
}

/* `mid`: the zombie — the leader stops between reading its batch and writing it. */
export function liveChaos(action, mid) {
  var body = { action: action };
  if (action === "pause-leader") body["for"] = 15;
  if (mid) body.mid_dispatch = true;
  livePost("chaos", body).then(function (res) { if (!res.ok) refused(res); });
}
