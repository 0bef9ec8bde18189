/* "Why": each principle's formula with this scenario's numbers. The results printed are the
   model's own (its totals and log), so a formula line never disagrees with the cards. */
import { $, fmt, state } from "./state.js";
import { clock, upto } from "./timeline.js";

export function renderExplain(r) {
  var s = r.scenario, t = r.totals, cap = s.workers * s.rate, formula = s.due * (s.replicas - 1);
  $("#x-dup").textContent = fmt(s.due) + " × (" + s.replicas + " − 1) = " + fmt(formula) +
    (s.election === "off" && t.duplicates !== formula ? " with every replica up; this run: " + fmt(t.duplicates) : "");
  var tk = t.takeover_delays_s;
  $("#x-ttl").textContent = s.lease_ttl + " s" + (tk.length ? " (this run: " + tk.join(", ") + " s)" : "");
  $("#x-loss").textContent = s.timers === "durable"
    ? "PENDING rows are durable, so the new leader dispatches them: " + fmt(t.missed) + " missed."
    : "timers lived in the dead leader's memory: " + fmt(t.missed) + " missed in this run.";
  $("#x-drain").textContent = fmt(t.dispatched) + " / (" + s.workers + " × " + fmt(s.rate) + ") = " +
    fmt(Math.ceil(t.dispatched / cap)) + " s ≈ " + (t.dispatched / cap / 60).toFixed(1) + " min";
  lines($("#x-zombie"), zombieLines(r), "no pause in this scenario: “Pause leader” adds one at the playback time.");
  lines($("#x-redeliver"), redeliverLines(r), "no worker crash in this scenario: “Crash pod” adds one.");
  lines($("#x-stuck"), stuckLines(r), "no lost messages in this scenario: “Lose” drops the newest queued.");
  lines($("#x-faults"), r.faults || [], "");
  $("#x-faults-box").hidden = !(r.faults || []).length;
}

function lines(el, items, none) {
  el.textContent = "";
  (items.length ? items : [none]).forEach(function (text) {
    var li = document.createElement("li");
    li.textContent = text;
    if (!items.length) li.className = "none";
    el.appendChild(li);
  });
}

/* The first event after `e` that settles what happened to replica e.replica's pause. */
function outcome(r, e) {
  return r.log.filter(function (x) {
    return x.t > e.t && x.replica === e.replica && /^(zombie|fenced|resume|crash)$/.test(x.kind);
  }).sort(function (a, b) { return order(a) - order(b); })[0];
}
function order(x) { return x.t * 10 + (x.kind === "resume" ? 1 : 0); }

/* PENDING rows at second T: triggered by T, less the first copies dispatched before T. */
export function pendingAt(r, T) {
  var d = state.derived, triggered = 0;
  r.scenario.buckets.forEach(function (b) { if (b[0] * 60 <= T) triggered += b[1]; });
  var firsts = upto(d, "dispatched", T - 1) - upto(d, "duplicates", T - 1) + upto(d, "missed", T - 1);
  return Math.max(0, triggered - firsts);
}

function zombieLines(r) {
  var s = r.scenario;
  return r.log.filter(function (e) { return e.kind === "pause"; }).map(function (e) {
    var end = outcome(r, e), head = "replica " + e.replica + " paused at " + clock(e.t);
    if (!e.count) return head + ": it held no batch (not the leader, or nothing due) — no count changes.";
    var held = head + ", holding min(batch " + fmt(s.batch) + ", due at the pause " + fmt(pendingAt(r, e.t)) + ") = " + fmt(e.count);
    if (!end || end.kind === "crash") return held + "; it never woke as a zombie.";
    if (end.kind === "resume") return held + "; back at " + clock(end.t) + ", within its " + s.lease_ttl + " s lease: written once, 0 duplicates.";
    if (end.kind === "fenced") return held + "; back at " + clock(end.t) + " after a takeover: fencing on → its write refused, fenced writes " + fmt(end.count) + ", 0 duplicates.";
    return held + "; back at " + clock(end.t) + " after a takeover: fencing off → it published them, " + fmt(end.count) + " duplicates.";
  });
}

function redeliverLines(r) {
  var s = r.scenario;
  return r.log.filter(function (e) { return e.kind === "worker_crash"; }).map(function (e) {
    var dup = s.effects === "external" ? "external effects ran already → " + fmt(e.count) + " duplicates"
      : "transactional effects rolled back with the unacked claim → 0 duplicates";
    return "pod " + e.replica + " crashed at " + clock(e.t) + " before acking: redelivered = its unacked share of that second = min(rate " +
      fmt(s.rate) + ", what it claimed) = " + fmt(e.count) + ", visible again at " + clock(e.t + s.visibility) +
      " (visibility " + s.visibility + " s); " + dup + ".";
  });
}

function stuckLines(r) {
  var s = r.scenario, t = r.totals, lost = 0, back = 0;
  var losses = r.log.filter(function (e) { return e.kind === "lose"; });
  if (!losses.length) return [];
  losses.forEach(function (e) { lost += e.count; });
  r.log.forEach(function (e) { if (e.kind === "reconcile") back += e.count; });
  var how = s.reconcile === "off" || s.election !== "lease"
    ? "no reconciler" + (s.election !== "lease" ? " (it runs on the leader: none without election)" : "") + " → stuck = the lost first copies = " + fmt(t.stuck)
    : "the leader's reconcile every " + s.reconcile + " s enqueued " + fmt(back) + " again → stuck " + fmt(t.stuck) + ", late " + fmt(t.late);
  return [fmt(lost) + " queued messages lost (" + losses.map(function (e) { return clock(e.t); }).join(", ") + "); " + how + "."];
}
