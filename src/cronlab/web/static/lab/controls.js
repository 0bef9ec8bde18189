/* Controls and the URL: scenario from and to the query string, the form kept in sync. */
import { DEFAULTS, NEXT_B, $, state } from "./state.js";
import { recompute } from "./model.js";

export function readURL() {
  var q = new URLSearchParams(location.search);
  Object.keys(DEFAULTS).forEach(function (k) {
    var v = q.get(k) || (k === "ttl" && q.get("lease-ttl"));
    if (v) state.scenario[k] = v;
  });
  state.crashes = q.getAll("crash");
  if (q.get("compare")) state.compare = q.get("compare");
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
  state.crashes.forEach(function (c) { q.append("crash", c); });
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
  $("#c-preset").value = s.preset;
  $("#c-tasks").value = s.tasks;
  $("#c-minutes").value = s.minutes;
  $("#minutes-row").hidden = s.preset === "midnight";
  $("#tasks-label").textContent = s.preset === "steady" ? "Tasks due per minute" : "Tasks due";
  $("#c-election").checked = s.election === "lease";
  $("#c-replicas").value = s.replicas;
  $("#c-ttl").value = s.ttl;
  $("#c-timers").value = s.timers;
  $("#c-restart").value = s["restart-after"];
  $("#c-workers").value = s.workers;
  $("#c-rate").value = s.rate;
  $("#o-replicas").textContent = s.replicas;
  $("#o-ttl").textContent = s.ttl + " s";
  $("#o-workers").textContent = s.workers;
  var kv = state.compare.split("=");
  $("#c-ab-key").value = kv[0];
  $("#c-ab-value").value = kv.slice(1).join("=");
  syncCrashes();
}

function syncCrashes() {
  var list = $("#crash-list");
  list.textContent = "";
  state.crashes.forEach(function (c, i) {
    var li = document.createElement("li"), b = document.createElement("button");
    li.textContent = "crash " + c;
    b.type = "button";
    b.textContent = "✕";
    b.setAttribute("aria-label", "Remove crash " + c);
    b.addEventListener("click", function () { state.crashes.splice(i, 1); changed(); });
    li.appendChild(b);
    list.appendChild(li);
  });
  var sel = $("#c-crash-replica"), n = Number(state.scenario.replicas), keep = sel.value;
  sel.textContent = "";
  for (var r = 0; r < n; r++) {
    var o = document.createElement("option");
    o.value = String(r);
    o.textContent = "replica " + r;
    sel.appendChild(o);
  }
  if (keep && Number(keep) < n) sel.value = keep;
}

function readForm(e) {
  var s = state.scenario, id = e && e.target && e.target.id;
  s.preset = $("#c-preset").value;
  s.tasks = $("#c-tasks").value || "0";
  s.minutes = $("#c-minutes").value || "1";
  s.election = $("#c-election").checked ? "lease" : "off";
  s.replicas = $("#c-replicas").value;
  s.ttl = $("#c-ttl").value;
  s.timers = $("#c-timers").value;
  s["restart-after"] = $("#c-restart").value;
  s.workers = $("#c-workers").value;
  s.rate = $("#c-rate").value || "1";
  /* Fewer replicas: a crash of one that no longer exists would only be a 422. */
  state.crashes = state.crashes.filter(function (c) {
    var m = /^replica:(\d+)@/.exec(c);
    return !m || Number(m[1]) < Number(s.replicas);
  });
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
