/* The diagram: replicas, the due column, the queue and the pods at second t. */
import { $, fmt, pad, state } from "./state.js";
import { clock, upto, at } from "./timeline.js";

export const boxes = { replicas: [], pods: [] };

export function buildDiagram(r) {
  var s = r.scenario, wrap = $("#replicas"), pods = $("#pods");
  wrap.textContent = "";
  wrap.classList.toggle("many", s.replicas > 4);
  boxes.replicas = [];
  for (var i = 0; i < s.replicas; i++) {
    var el = document.createElement("div");
    el.className = "replica";
    el.innerHTML = '<span class="name">replica ' + i + '</span><span class="role"></span><span class="detail"></span><div class="ttl"><div></div></div>';
    wrap.appendChild(el);
    boxes.replicas.push(el);
  }
  var shown = Math.min(s.workers, 60);
  pods.textContent = "";
  pods.classList.toggle("dense", s.workers > 15);
  boxes.pods = [];
  for (var p = 0; p < shown; p++) {
    var pod = document.createElement("div");
    pod.className = "pod";
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

/* Control-plane state at second t, replayed from the model's event log. */
export function plane(r, t) {
  var n = r.scenario.replicas, alive = [], epoch = 1, freeAt = null;
  for (var i = 0; i < n; i++) alive.push(true);
  r.log.forEach(function (e) {
    if (e.t > t) return;
    epoch = e.epoch;
    if (e.kind === "crash") { alive[e.replica] = false; if (/^leader/.test(e.text)) freeAt = e.t + r.scenario.lease_ttl; }
    if (e.kind === "restart") alive[e.replica] = true;
    if (e.kind === "acquire") freeAt = null;
  });
  return { alive: alive, epoch: epoch, freeAt: freeAt };
}

export function renderDiagram(t) {
  var r = state.result, d = state.derived, s = r.scenario, now = at(d, t), cp = plane(r, t);
  var lease = s.election === "lease";
  boxes.replicas.forEach(function (el, i) {
    var up = cp.alive[i], leader = lease && now.leader === i, role, detail, ttl = 0;
    if (!up) { role = "crashed"; detail = "down" + restartNote(r, i, t); }
    else if (!lease) { role = "dispatcher"; detail = "no lease: dispatches on its own"; }
    else if (leader) { role = "leader"; detail = "holds lease · epoch " + cp.epoch + " · TTL " + s.lease_ttl + " s"; ttl = 1; }
    else {
      role = "standby";
      detail = cp.freeAt != null ? "lease free in " + Math.max(0, cp.freeAt - t) + " s" : "standby · watching the lease";
    }
    if (lease && !up && cp.freeAt != null && i === crashedLeader(r, t)) {
      ttl = Math.max(0, cp.freeAt - t) / s.lease_ttl;
      detail = "lease expires in " + Math.max(0, cp.freeAt - t) + " s (epoch " + cp.epoch + ")";
    }
    el.className = "replica " + role;
    el.children[1].textContent = role;
    el.children[2].textContent = detail;
    el.children[3].firstChild.style.width = (ttl * 100) + "%";
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
  var busy = now.executed / (s.workers * s.rate);
  boxes.pods.forEach(function (p) { p.firstChild.style.height = (busy * 100) + "%"; });
  $("#pods-busy").textContent = fmt(now.executed) + "/s executing · " + Math.round(busy * 100) + "% busy";
  return now;
}

function crashedLeader(r, t) {
  var who = null;
  r.log.forEach(function (e) { if (e.t <= t && e.kind === "crash" && /^leader/.test(e.text)) who = e.replica; });
  return who;
}

function restartNote(r, i, t) {
  var next = r.log.filter(function (e) { return e.kind === "restart" && e.replica === i && e.t > t; })[0];
  return next ? " · restarts in " + clock(next.t - t) : " · no restart";
}
