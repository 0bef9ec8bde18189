/* The guided tour: each step sets a scenario (a query string, the same words as a shared
   link), a playback second, what to look at, and runs the simulated real code. A step opens
   directly from #tour=K (or ?tour=K). */
import { $, state } from "./state.js";
import { changed, loadQuery } from "./controls.js";
import { setPlaying } from "./playback.js";
import { closeInspect } from "./inspect.js";
import { runRealsim } from "./realsim.js";

export const STEPS = [
  { title: "The midnight run", q: "", t: 0, look: [".card.backlog", ".card.drain", "#chart-flow"],
    text: "1,000,000 invoices fall due at 00:00. One leader dispatches them in one scan; 5 pods × 200/s drain them in 1,000 s = 16.7 min. 0 duplicates, 0 missed, the backlog peaks at 999,000." },
  { title: "Election off", q: "election=off", t: 0, look: [".card.dup", "#replicas"],
    text: "Every replica runs the cron and dispatches its own copy: 2,000,000 duplicates = 1,000,000 × (3 − 1), and the pods drain 3,000,000 copies in 50.0 min." },
  { title: "Crash the leader", zoom: 2, q: "crash=leader@0", t: 5, look: [".card.missed", "#lease-timeline", "#event-log"],
    text: "The leader dies at 00:00. Its lease runs out after the 10 s TTL and replica 1 takes epoch 2. The PENDING rows are still in the store: 0 missed, takeover 10 s, drain 16.8 min." },
  { title: "In-memory timers", q: "timers=in-memory&crash=leader@0", t: 5, look: [".card.missed", "#sentence"],
    text: "The same crash with the timers in the leader's memory: they die with it. 1,000,000 missed — the standby only fires what falls due after it takes over." },
  { title: "A zombie leader, no fencing", zoom: 2, q: "pause=leader@0:30&fencing=off&compare=fencing=on", t: 20, inspect: "replica:0",
    look: [".card.dup", "#lease-timeline", "#inspect"],
    text: "The leader freezes at 00:00 for 30 s (a GC pause) after reading its first batch. At 00:10 replica 1 takes epoch 2 and dispatches everything; at 00:30 the zombie wakes and publishes what it held: 10,000 duplicates = min(batch 10,000, due 1,000,000). The inspector shows what it believes at 00:20." },
  { title: "The same zombie, fenced", zoom: 2, q: "pause=leader@0:30&compare=fencing=off", t: 30, inspect: "replica:0",
    look: ['[data-chip="fenced_writes"]', ".card.dup", "#lease-timeline"],
    text: "With fencing every write carries the epoch and the store refuses a stale one: the zombie's 10,000 are fenced writes, 0 duplicates. The A/B panel shows the difference." },
  { title: "A worker crash, external effects", zoom: 2, q: "worker-crash=0@30&effects=external&compare=effects=transactional", t: 30, inspect: "pod:0",
    look: [".card.dup", '[data-chip="redelivered"]', "#pod-timeline"],
    text: "Pod 0 dies at 00:30 after running its share of that second (200 tasks) and before acking them. They come back after the 30 s visibility timeout: 200 redelivered; the e-mails were sent already, so 200 duplicates." },
  { title: "A worker crash, transactional effects", zoom: 2, q: "worker-crash=0@30&compare=effects=external", t: 30, inspect: "pod:0",
    look: [".card.dup", '[data-chip="redelivered"]', "#pod-timeline"],
    text: "The same crash when the effect commits with the ack: the 200 unacked took no effect, so their redelivery is their first run. 200 redelivered, 0 duplicates." },
  { title: "Lost messages, no reconciler", zoom: 2, q: "lose=1000@30&reconcile=off&compare=reconcile=60", t: 30, look: ['[data-chip="stuck"]', "#verdict-model", "#pod-timeline"],
    text: "A queue failover at 00:30 loses the newest 1,000 messages. Their rows say DISPATCHED, so no scan sends them again: 1,000 stuck for ever. B turns the reconciler on: 0 stuck." },
];

export function tourFromURL() {
  var m = /(?:^|[#&])tour=(\d+)/.exec(location.hash) || /[?&]tour=(\d+)/.exec(location.search);
  return m ? Math.max(1, Math.min(STEPS.length, Number(m[1]))) : 0;
}

export function go(k) {
  k = Math.max(1, Math.min(STEPS.length, k));
  var step = STEPS[k - 1];
  state.tour = k;
  closeInspect();
  setPlaying(false);
  loadQuery(new URLSearchParams(step.q));
  state.t = step.t;
  state.pendingInspect = step.inspect || null;
  state.zoom = step.zoom || 0;
  $("#c-zoom").value = String(state.zoom);
  changed();
  show(step, k);
  writeHash(k);
  runRealsim();
}

function show(step, k) {
  $("#tour").hidden = false;
  $("#tour-progress").textContent = "Step " + k + " of " + STEPS.length;
  $("#tour-title").textContent = step.title;
  $("#tour-text").textContent = step.text;
  $("#tour-link").href = "#tour=" + k;
  $("#tour-link").textContent = "Link to step " + k;
  $('[data-action="tour-back"]').disabled = k === 1;
  $('[data-action="tour-next"]').textContent = k === STEPS.length ? "Done" : "Next →";
  outline();
  $("#tour-look").textContent = step.look.map(describe).join(", ");
  document.querySelectorAll("#tour-steps button").forEach(function (b, i) { b.setAttribute("aria-current", String(i + 1 === k)); });
  var first = $(step.look[0]);
  if (first && first.id !== "inspect") first.scrollIntoView({ block: "nearest" });
}

/* Outline what the step points at (again after each redraw: renders reset class names). */
export function outline() {
  document.querySelectorAll(".tour-target").forEach(function (el) { el.classList.remove("tour-target"); });
  if (!state.tour) return;
  STEPS[state.tour - 1].look.forEach(function (sel) { var el = $(sel); if (el) el.classList.add("tour-target"); });
}

const NAMES = {
  ".card.backlog": "the Queue backlog card", ".card.drain": "the Drain time card", "#chart-flow": "the per-minute chart",
  ".card.dup": "the Duplicate executions card", "#replicas": "the scheduler replicas", ".card.missed": "the Missed triggers card",
  "#lease-timeline": "the lease timeline", "#event-log": "the event log", "#sentence": "the sentence",
  "#inspect": "the inspector", '[data-chip="fenced_writes"]': "fenced writes", '[data-chip="redelivered"]': "redelivered",
  '[data-chip="stuck"]': "stuck", "#verdict-model": "the model's verdict", "#pod-timeline": "the pod timeline",
};
function describe(sel) { return NAMES[sel] || sel; }

function writeHash(k) {
  var h = location.hash.replace(/^#/, "").split("&").filter(function (p) { return p && !/^tour=/.test(p); });
  if (k) h.push("tour=" + k);
  var q = location.search.replace(/([?&])tour=\d+&?/, "$1").replace(/[?&]$/, "");
  history.replaceState(null, "", location.pathname + q + (h.length ? "#" + h.join("&") : ""));
}

export function closeTour() {
  state.tour = 0;
  $("#tour").hidden = true;
  document.querySelectorAll(".tour-target").forEach(function (el) { el.classList.remove("tour-target"); });
  writeHash(0);
}

export function buildTour() {
  var ol = $("#tour-steps");
  STEPS.forEach(function (step, i) {
    var li = document.createElement("li"), b = document.createElement("button");
    b.type = "button";
    b.textContent = String(i + 1);
    b.setAttribute("aria-label", "Step " + (i + 1) + ": " + step.title);
    b.addEventListener("click", function () { go(i + 1); });
    li.appendChild(b);
    ol.appendChild(li);
  });
}

export const TOUR_ACTIONS = {
  tour: function () { go(state.tour || 1); },
  "tour-next": function () { if (state.tour >= STEPS.length) closeTour(); else go(state.tour + 1); },
  "tour-back": function () { go(state.tour - 1); },
  "tour-close": closeTour,
};
window.cronlabLab.tourSteps = STEPS;
