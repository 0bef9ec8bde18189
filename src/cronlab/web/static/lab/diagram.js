/* The diagram: replicas, the due column, the queue and the pods at second t. Each replica and
   pod is a button: it opens the inspector (inspect.js) on itself. */
import { $, fmt, pad, state } from "./state.js";
import { clock, upto, at } from "./timeline.js";
import { laneState, podAt } from "./lanes.js";

export const boxes = { replicas: [], pods: [] };

function node(cls, kind, who, label) {
  var el = document.createElement("div");
  el.className = cls;
  el.tabIndex = 0;
  el.setAttribute("role", "button");
  el.setAttribute("aria-label", "Inspect " + label);
  el.dataset.inspect = kind + ":" + who;
  return el;
}

export function buildDiagram(r) {
  var s = r.scenario, wrap = $("#replicas"), pods = $("#pods");
  wrap.textContent = "";
  wrap.classList.toggle("many", s.replicas > 4);
  boxes.replicas = [];
  for (var i = 0; i < s.replicas; i++) {
    var el = node("replica", "replica", i, "replica " + i);
    el.innerHTML = '<span class="name">replica ' + i + '</span><span class="role"></span><span class="detail"></span><div class="ttl"><div></div></div>';
    wrap.appendChild(el);
    boxes.replicas.push(el);
  }
  var shown = Math.min(s.workers, 60);
  pods.textContent = "";
  pods.classList.toggle("dense", s.workers > 15);
  boxes.pods = [];
  for (var p = 0; p < shown; p++) {
    var pod = node("pod", "pod", p, "pod " + p);
    pod.title = "pod " + p;
    pod.appendChild(document.createElement("div"));
    pods.appendChild(pod);
    boxes.pods.push(pod);
  }
  $("#pods-label").textContent = s.workers + " pods × " + fmt(s.rate) + "/s = " + fmt(s.workers * s.rate) + " tasks/s" +
    (s.workers > shown ? " (" + shown + " drawn)" : "");
  var b = $("#due-buckets"), counts = s.buckets.map(function (x) { return x[1]; });
  var max = Math.max.apply(null, counts.concat([1]));
  b.textContent = "";
  s.buckets.slice(0, 120).forEach(function (x) {
    var bar = document.createElement("i");
    bar.style.height = Math.max(4, (x[1] / max) * 100) + "%";
    bar.dataset.minute = x[0];
    b.appendChild(bar);
  });
  $("#due-label").textContent = s.timers === "durable" ? "PENDING rows in the store" : "timers armed in memory";
  $("#c-scrub").max = String(state.derived.end - 1);
}

/* Control-plane state at second t, replayed from the model's event log: who is alive, the
   lease's epoch, and when a lease its holder stopped renewing (crash, pause) expires. */
export function plane(r, t) {
  var n = r.scenario.replicas, alive = [], epoch = 1, freeAt = null, ttl = r.scenario.lease_ttl;
  for (var i = 0; i < n; i++) alive.push(true);
  r.log.forEach(function (e) {
    if (e.t > t) return;
    epoch = e.epoch;
    if (e.kind === "crash") { alive[e.replica] = false; if (/^leader/.test(e.text)) freeAt = e.t + ttl; }
    if (e.kind === "pause" && /^leader/.test(e.text)) freeAt = e.t + ttl;
    if (e.kind === "resume" && /within its lease/.test(e.text)) freeAt = null;
    if (e.kind === "restart") alive[e.replica] = true;
    if (e.kind === "acquire") freeAt = null;
  });
  return { alive: alive, epoch: epoch, freeAt: freeAt };
}

/* Role, detail line and lease bar (0..1) of replica i at second t. */
export function replicaView(r, i, t, cp) {
  var s = r.scenario, sp = laneState(r, "replica", i, t) || { state: s.election === "off" ? "dispatcher" : "standby" };
  var left = cp.freeAt != null ? Math.max(0, cp.freeAt - t) : null;
  if (sp.state === "down") {
    if (left != null && i === stoppedLeader(r, t)) return ["crashed", "lease expires in " + left + " s (epoch " + cp.epoch + ")", left / s.lease_ttl];
    return ["crashed", "down" + restartNote(r, i, t), 0];
  }
  if (sp.state === "paused") {
    var held = sp.held ? " · holds " + fmt(sp.held) : "";
    if (left != null && i === stoppedLeader(r, t)) return ["paused", "paused" + held + " · lease expires in " + left + " s", left / s.lease_ttl];
    return ["paused", "paused" + held + (sp.held ? " · lease lost (epoch " + cp.epoch + " now)" : ""), 0];
  }
  if (sp.state === "dispatcher") return ["dispatcher", "no lease: dispatches on its own", 0];
  if (sp.state === "leader") return ["leader", "holds lease · epoch " + sp.epoch + " · TTL " + s.lease_ttl + " s", 1];
  return ["standby", left != null ? "lease free in " + left + " s" : "standby · watching the lease", 0];
}

export function renderDiagram(t) {
  var r = state.result, d = state.derived, s = r.scenario, now = at(d, t), cp = plane(r, t);
  boxes.replicas.forEach(function (el, i) {
    var v = replicaView(r, i, t, cp);
    el.className = "replica " + v[0] + (state.inspect === "replica:" + i ? " inspected" : "");
    el.children[1].textContent = v[0];
    el.children[2].textContent = v[1];
    el.children[3].firstChild.style.width = (v[2] * 100) + "%";
  });
  var due = upto(d, "dispatched", t) - upto(d, "duplicates", t) + upto(d, "missed", t);
  var triggered = 0;
  s.buckets.forEach(function (b) { if (b[0] * 60 <= t) triggered += b[1]; });
  $("#due-pending").textContent = fmt(Math.max(0, triggered - due));
  var nb = s.buckets.filter(function (b) { return b[0] * 60 > t; })[0];
  $("#due-next").textContent = nb ? "next: min " + pad(nb[0]) + " · " + fmt(nb[1]) + " due" : "no more buckets";
  var bars = $("#due-buckets").children;
  for (var k = 0; k < bars.length; k++) {
    var m = Number(bars[k].dataset.minute);
    bars[k].className = m === Math.floor(t / 60) ? "now" : m * 60 < t ? "past" : "";
  }
  $("#queue-depth").textContent = fmt(now.backlog);
  $("#queue-fill").style.width = (d.peak ? (100 * now.backlog / d.peak) : 0) + "%";
  renderPods(r, t, now);
  return now;
}

function renderPods(r, t, now) {
  var s = r.scenario, up = podsUp(r, t), busy = up ? now.executed / (up * s.rate) : 0;
  boxes.pods.forEach(function (p, i) {
    var sp = podAt(r, i, t), down = sp.state === "down";
    p.className = "pod" + (down ? " down" : sp.state === "crashing" ? " crashing" : "") + (state.inspect === "pod:" + i ? " inspected" : "");
    p.firstChild.style.height = (down ? 0 : busy * 100) + "%";
  });
  $("#pods-busy").textContent = fmt(now.executed) + "/s executing · " + Math.round(Math.min(1, busy) * 100) + "% busy" +
    (up < s.workers ? " · " + (s.workers - up) + " down" : "");
}

/* Pods up at second t (the lanes list only pods that changed; the rest are up). */
export function podsUp(r, t) {
  var down = 0;
  r.lanes.pods.forEach(function (sp) { if (sp.state === "down" && sp.start <= t && t < sp.end) down++; });
  r.log.forEach(function (e) { if (e.kind === "worker_crash" && e.t === t) down--; });
  return r.scenario.workers - down;
}

/* The replica whose lease is counting down after it stopped (crashed or paused leader). */
function stoppedLeader(r, t) {
  var who = null;
  r.log.forEach(function (e) {
    if (e.t <= t && (e.kind === "crash" || e.kind === "pause") && /^leader/.test(e.text)) who = e.replica;
    if (e.t <= t && e.kind === "acquire") who = null;
  });
  return who;
}

function restartNote(r, i, t) {
  var next = r.log.filter(function (e) { return e.kind === "restart" && e.replica === i && e.t > t; })[0];
  return next ? " · restarts in " + clock(next.t - t) : " · no restart";
}
