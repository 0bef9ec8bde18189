/* Click-to-inspect: a replica's or a pod's state at the scrubbed second — its lease, epoch,
   what it holds in flight and its clock — derived from the model's lanes, log and timeline. */
import { $, fmt, state } from "./state.js";
import { clock, at } from "./timeline.js";
import { laneState, podAt } from "./lanes.js";
import { plane, podsUp } from "./diagram.js";

/* Opened by a person (focusBack: the node they used), the focus moves into the panel and
   comes back on close; opened by a tour step, the focus stays on the tour's buttons. */
export function openInspect(key, focusBack) {
  state.inspect = key;
  state.inspectFrom = focusBack || null;
  $("#inspect").hidden = false;
  renderInspect(Math.floor(state.t));
  if (focusBack) $("#inspect-close").focus({ preventScroll: true });
}

export function closeInspect() {
  var back = state.inspectFrom;
  state.inspect = null;
  $("#inspect").hidden = true;
  document.querySelectorAll(".inspected").forEach(function (el) { el.classList.remove("inspected"); });
  if (back && back.isConnected) back.focus({ preventScroll: true });
}

export function renderInspect(t) {
  var r = state.result, key = state.inspect;
  if (!r || !key) return;
  var kind = key.split(":")[0], who = Number(key.split(":")[1]);
  if ((kind === "replica" && who >= r.scenario.replicas) || (kind === "pod" && who >= r.scenario.workers)) return closeInspect();
  var rows = kind === "replica" ? replicaRows(r, who, t) : podRows(r, who, t);
  $("#inspect-title").textContent = kind + " " + who + " at " + clock(t);
  var dl = $("#inspect-body");
  dl.textContent = "";
  rows.forEach(function (row) {
    var dt = document.createElement("dt"), dd = document.createElement("dd");
    dt.textContent = row[0];
    dd.textContent = row[1];
    dd.dataset.field = row[0];
    dl.append(dt, dd);
  });
  place(document.querySelector('[data-inspect="' + key + '"]'));
}

/* The panel sits under the playback row (lab.css); the node inspected is outlined. */
function place(el) {
  if (el) el.classList.add("inspected");
}

function span(sp) {
  return sp.state + " since " + clock(sp.start) + (sp.end < state.derived.end ? ", until " + clock(sp.end) : "");
}

const IDLE = "nothing: it reads and writes a batch inside one second";

function replicaRows(r, i, t) {
  var sp = laneState(r, "replica", i, t) || { state: "standby", start: 0, end: state.derived.end };
  var v = (VIEWS[sp.state] || standbyView)(r, i, t, sp);
  return [["state", span(sp)], ["lease", v.lease], ["epoch", v.epoch], ["in flight", v.flight || IDLE],
    ["clock", v.clock || "reads " + clock(t) + " — the page's second is its wall clock"]];
}

const VIEWS = {
  leader: function (r, i, t, sp) {
    return { lease: "held, renewed every second (TTL " + r.scenario.lease_ttl + " s)", epoch: String(sp.epoch) };
  },
  dispatcher: function () { return { lease: "none: election off — it dispatches on its own", epoch: "–" }; },
  down: function () {
    return { lease: "none: the process is down", epoch: "–", flight: "nothing: a dead process holds nothing", clock: "none: not running" };
  },
  paused: pausedView,
};

function standbyView(r, i, t) {
  var holder = currentHolder(r, t), leader = at(state.derived, t).leader;
  var who = holder ? "; replica " + holder.replica + " holds it (epoch " + holder.epoch + ")" : leader >= 0 ? "; replica " + leader + " holds it" : "; nobody holds it";
  return { lease: "not held" + who, epoch: "sees " + plane(r, t).epoch };
}

/* A paused process: its lease runs out while it cannot know; its clock stopped with it. */
function pausedView(r, i, t, sp) {
  var s = r.scenario, holder = currentHolder(r, t), pause = pauseOf(r, i, sp.start);
  var believes = pause ? pause.epoch : plane(r, t).epoch, lost = holder && holder.replica !== i && holder.t >= sp.start;
  var lease = lost ? "lost: replica " + holder.replica + " took it at " + clock(holder.t) + " (epoch " + holder.epoch + ") — it does not know"
    : sp.held ? "on paper: it stopped renewing at " + clock(sp.start) + ", it expires at " + clock(sp.start + s.lease_ttl) : "none (a paused standby)";
  return {
    lease: lease,
    epoch: sp.held ? "believes " + believes + (lost ? "; the store's is " + holder.epoch : "") : String(plane(r, t).epoch),
    flight: sp.held ? fmt(sp.held) + " rows read at " + clock(sp.start) + ", not yet written" + heldFate(r, i, sp) : "nothing",
    clock: "stopped at " + clock(sp.start) + ": from its own view no time has passed — it believes it is " + clock(sp.start) +
      (sp.held ? " and it leads with epoch " + believes : "") + "; it is really " + clock(t),
  };
}

function pauseOf(r, i, t) {
  return r.log.filter(function (e) { return e.kind === "pause" && e.replica === i && e.t === t; })[0];
}

/* What becomes of a held batch when the zombie wakes: refused (fencing) or published. */
function heldFate(r, i, sp) {
  var e = r.log.filter(function (x) { return x.replica === i && x.t === sp.end && (x.kind === "fenced" || x.kind === "zombie"); })[0];
  if (!e) return "; it writes them once when it wakes";
  return e.kind === "fenced" ? "; at " + clock(e.t) + " fencing refuses its write" : "; at " + clock(e.t) + " it publishes them: " + fmt(e.count) + " duplicates";
}

/* The last lease acquisition at or before t (epoch 1 is replica 0's from the start). */
function currentHolder(r, t) {
  if (r.scenario.election !== "lease") return null;
  var h = { replica: 0, epoch: 1, t: 0 };
  r.log.forEach(function (e) { if (e.kind === "acquire" && e.t <= t) h = { replica: e.replica, epoch: e.epoch, t: e.t }; });
  return h;
}

function podRows(r, p, t) {
  var s = r.scenario, sp = podAt(r, p, t), now = at(state.derived, t), up = Math.max(1, podsUp(r, t));
  var share = Math.min(s.rate, Math.round(now.executed / up)), last = lastCrash(r, p, t), flight, what;
  if (sp.state === "crashing") {
    what = "up, and dies at the end of this second, before its ack" + (s["pod_restart"] === "never" ? "; no restart" : "; back at " + clock(t + Number(s.pod_restart)));
    flight = fmt(sp.crash.count) + " claimed and run, not acked: invisible until " + clock(t + s.visibility) + ", then redelivered";
  } else if (sp.state === "down") {
    what = span(sp);
    flight = "nothing — the " + fmt(last ? last.count : 0) + " it had not acked are " +
      (last && t < last.t + s.visibility ? "invisible until " + clock(last.t + s.visibility) : "back in the queue");
  } else {
    what = span(sp);
    flight = share ? "about " + fmt(share) + " claimed this second (its share of " + fmt(now.executed) + "/s), acked as each finishes" : "nothing: the queue is empty";
  }
  var effects = s.effects === "external" ? "external: sent before the ack, so a redelivery sends them again" : "transactional: commit with the ack, so an unacked task took no effect";
  return [
    ["state", what], ["lease", "none: workers hold no lease, only claims with a " + s.visibility + " s visibility timeout"],
    ["in flight", flight], ["effects", effects], ["clock", sp.state === "down" ? "none: not running" : "reads " + clock(t) + " — the page's second"],
  ];
}

function lastCrash(r, p, t) {
  return r.log.filter(function (e) { return e.kind === "worker_crash" && e.replica === p && e.t <= t; }).pop();
}
