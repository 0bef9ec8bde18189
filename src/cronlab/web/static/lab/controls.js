/* Controls and the URL: scenario from and to the query string, the form kept in sync. */
import { DEFAULTS, FAULT_KINDS, NEXT_B, $, noFaults, state } from "./state.js";
import { recompute } from "./model.js";
import { pruneFaults, syncFaults } from "./faults.js";
import { renderLiveGaps } from "./live.js";

/* Knobs shown as a select, a number or a range: [query name, element id]. */
const FIELDS = [
  ["preset", "c-preset"], ["tasks", "c-tasks"], ["minutes", "c-minutes"], ["replicas", "c-replicas"],
  ["ttl", "c-ttl"], ["timers", "c-timers"], ["restart-after", "c-restart"], ["workers", "c-workers"],
  ["rate", "c-rate"], ["batch", "c-batch"], ["effects", "c-effects"], ["visibility", "c-visibility"],
  ["pod-restart", "c-pod-restart"], ["reconcile", "c-reconcile"],
];
/* Knobs shown as a switch: [query name, element id, value when checked, when not]. */
const SWITCHES = [["election", "c-election", "lease", "off"], ["fencing", "c-fencing", "on", "off"]];
/* Empty number inputs fall back to these while the person is typing. */
const FLOOR = { tasks: "0", minutes: "1", rate: "1", batch: "1", visibility: "1" };

/* The scenario of a query string (or a tour step's), over the defaults. */
export function loadQuery(q) {
  state.scenario = Object.assign({}, DEFAULTS);
  Object.keys(DEFAULTS).forEach(function (k) {
    var v = q.get(k) || (k === "ttl" && q.get("lease-ttl"));
    if (v) state.scenario[k] = v;
  });
  state.faults = noFaults();
  FAULT_KINDS.forEach(function (k) { state.faults[k] = q.getAll(k).filter(Boolean); });
  state.compare = q.get("compare") || "election=off";
}

export function readURL() {
  loadQuery(new URLSearchParams(location.search));
  readToken();
}

/* The token rides in the fragment: never sent to the server in the URL, never in shared links. */
export function readToken() {
  var m = /token=([^&]+)/.exec(location.hash);
  state.token = m ? decodeURIComponent(m[1]) : "";
}

export function query(withCompare) {
  var q = new URLSearchParams();
  Object.keys(DEFAULTS).forEach(function (k) {
    if (state.scenario[k] !== DEFAULTS[k]) q.set(k, state.scenario[k]);
  });
  FAULT_KINDS.forEach(function (k) { state.faults[k].forEach(function (v) { q.append(k, v); }); });
  if (withCompare && state.compare) q.set("compare", state.compare);
  return q;
}

function writeURL() {
  var q = query(false);
  if (state.compare !== "election=off") q.set("compare", state.compare);
  var s = q.toString();
  history.replaceState(null, "", location.pathname + (s ? "?" + s : "") + location.hash);
}

export function syncForm() {
  var s = state.scenario;
  FIELDS.forEach(function (f) { setValue($("#" + f[1]), s[f[0]]); });
  SWITCHES.forEach(function (f) { $("#" + f[1]).checked = s[f[0]] === f[2]; });
  $("#minutes-row").hidden = s.preset === "midnight";
  $("#tasks-label").textContent = s.preset === "steady" ? "Tasks due per minute" : "Tasks due";
  $("#o-replicas").textContent = s.replicas;
  $("#o-ttl").textContent = s.ttl + " s";
  $("#o-workers").textContent = s.workers;
  var kv = state.compare.split("=");
  $("#c-ab-key").value = kv[0];
  $("#c-ab-value").value = kv.slice(1).join("=");
  syncFaults();
  renderLiveGaps();
  /* The live form's fencing switch follows the scenario's when that changes (a tour step). */
  if (s.fencing !== lastFencing) { $("#c-live-fencing").checked = s.fencing === "on"; lastFencing = s.fencing; }
}
var lastFencing = null;

/* The A/B panel's keys: one option per key NEXT_B knows what to change to. */
export function buildCompareKeys() {
  var select = $("#c-ab-key");
  if (select.options.length) return;
  Object.keys(NEXT_B).forEach(function (k) {
    var o = document.createElement("option");
    o.value = o.textContent = k;
    select.appendChild(o);
  });
}

/* A shared link may hold a value the select does not list (restart-after=120): list it. */
function setValue(el, v) {
  if (el.tagName === "SELECT" && ![].some.call(el.options, function (o) { return o.value === v; })) {
    var o = document.createElement("option");
    o.value = v;
    o.textContent = /^\d+$/.test(v) ? v + " s" : v;
    el.appendChild(o);
  }
  el.value = v;
}

function readForm(e) {
  var s = state.scenario, id = e && e.target && e.target.id;
  FIELDS.forEach(function (f) { s[f[0]] = $("#" + f[1]).value || FLOOR[f[0]] || s[f[0]]; });
  SWITCHES.forEach(function (f) { s[f[0]] = $("#" + f[1]).checked ? f[2] : f[3]; });
  pruneFaults(s);
  if (id === "c-ab-key") $("#c-ab-value").value = NEXT_B[$("#c-ab-key").value](s);
  state.compare = $("#c-ab-key").value + "=" + $("#c-ab-value").value.trim();
}

var urlTimer = null;
export function changed(e) {
  state.changeAt = performance.now();
  if (e) readForm(e);
  syncForm();
  recompute();
  /* history.replaceState costs Chromium 5–15 ms: write the URL once the redraw is done. */
  clearTimeout(urlTimer);
  urlTimer = setTimeout(writeURL, 120);
}
