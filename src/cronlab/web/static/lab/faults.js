/* Faults: the buttons that add one at the playback second, the list that removes one, and the
   replica and pod pickers. Values use the query's words: leader@T, replica:I@T:D, POD@T, N@T. */
import { $, state } from "./state.js";
import { changed } from "./controls.js";
import { clock } from "./timeline.js";

const MAX_PODS_LISTED = 64;

function now() { return Math.floor(state.t); }
function add(kind, value) { state.faults[kind].push(value); changed(); }
function whole(sel, fallback) {
  var v = Math.floor(Number($(sel).value));
  return v >= 1 ? v : fallback;
}

export const FAULT_ACTIONS = {
  "crash-leader": function () { add("crash", "leader@" + now()); },
  "crash-replica": function () { add("crash", "replica:" + $("#c-crash-replica").value + "@" + now()); },
  "pause-leader": function () { add("pause", "leader@" + now() + ":" + whole("#c-pause-for", 30)); },
  "pause-replica": function () {
    add("pause", "replica:" + $("#c-crash-replica").value + "@" + now() + ":" + whole("#c-pause-for", 30));
  },
  "crash-worker": function () { add("worker-crash", $("#c-crash-pod").value + "@" + now()); },
  lose: function () { add("lose", whole("#c-lose-count", 1000) + "@" + now()); },
};

/* What a fault says in the list, e.g. "pause leader@0:30" → "pause leader 00:00 for 30 s". */
export function describe(kind, v) {
  var m;
  if (kind === "crash") return "crash " + v;
  if (kind === "pause" && (m = /^(.+)@(\d+):(\d+)$/.exec(v))) return "pause " + m[1] + " at " + clock(+m[2]) + " for " + m[3] + " s";
  if (kind === "worker-crash" && (m = /^(\d+)@(\d+)$/.exec(v))) return "pod " + m[1] + " crashes at " + clock(+m[2]);
  if (kind === "lose" && (m = /^(\d+)@(\d+)$/.exec(v))) return "lose " + Number(m[1]).toLocaleString("en-US") + " at " + clock(+m[2]);
  return kind + " " + v;
}

/* Fewer replicas or pods: a fault on one that no longer exists would only be a 422. */
export function pruneFaults(s) {
  var keep = function (re, n) {
    return function (v) { var m = re.exec(v); return !m || Number(m[1]) < n; };
  };
  state.faults.crash = state.faults.crash.filter(keep(/^replica:(\d+)@/, Number(s.replicas)));
  state.faults.pause = state.faults.pause.filter(keep(/^replica:(\d+)@/, Number(s.replicas)));
  state.faults["worker-crash"] = state.faults["worker-crash"].filter(keep(/^(\d+)@/, Number(s.workers)));
}

export function syncFaults() {
  renderList();
  fillSelect($("#c-crash-replica"), Number(state.scenario.replicas), "replica ");
  fillSelect($("#c-crash-pod"), Math.min(MAX_PODS_LISTED, Number(state.scenario.workers)), "pod ");
  var t = clock(now());
  document.querySelectorAll(".at-now").forEach(function (el) { el.textContent = t; });
}

function renderList() {
  var list = $("#fault-list");
  list.textContent = "";
  Object.keys(state.faults).forEach(function (kind) {
    state.faults[kind].forEach(function (v, i) {
      var li = document.createElement("li"), b = document.createElement("button"), text = describe(kind, v);
      li.textContent = text;
      li.className = "fault " + kind;
      li.dataset.fault = kind + "=" + v;
      b.type = "button";
      b.textContent = "✕";
      b.setAttribute("aria-label", "Remove " + text);
      b.addEventListener("click", function () { state.faults[kind].splice(i, 1); changed(); });
      li.appendChild(b);
      list.appendChild(li);
    });
  });
  $("#fault-none").hidden = list.children.length > 0;
}

function fillSelect(sel, n, label) {
  var keep = sel.value;
  if (sel.options.length === n) return;
  sel.textContent = "";
  for (var r = 0; r < n; r++) {
    var o = document.createElement("option");
    o.value = String(r);
    o.textContent = label + r;
    sel.appendChild(o);
  }
  if (keep && Number(keep) < n) sel.value = keep;
}
