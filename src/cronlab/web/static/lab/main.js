/* Wiring and boot: buttons by data-action, form events, keyboard, resize; then the first run. */
import { DEFAULTS, $, noFaults, state } from "./state.js";
import { buildCompareKeys, readURL, readToken, syncForm, changed } from "./controls.js";
import { recompute } from "./model.js";
import { resizeCharts, moveCursors, zoom } from "./charts.js";
import { tick, setPlaying, seek } from "./playback.js";
import { particles } from "./particles.js";
import { download, csv, png, status } from "./share.js";
import { liveStart, liveListen, liveShow, liveStop, liveChaos } from "./live.js";
import { FAULT_ACTIONS } from "./faults.js";
import { TOUR_ACTIONS, buildTour, go, tourFromURL, closeTour } from "./tour.js";
import { openInspect, closeInspect } from "./inspect.js";
import { runRealsim } from "./realsim.js";
import { buildRunsTable } from "./runs.js";

var ACTIONS = Object.assign({
  reset: function () {
    state.scenario = Object.assign({}, DEFAULTS); state.faults = noFaults(); state.compare = "election=off";
    state.t = 0; setPlaying(false); changed();
  },
  play: function () { setPlaying(!state.playing); },
  restart: function () { seek(0); },
  "step-back": function () { seek(Math.floor(state.t) - 10); },
  "step-forward": function () { seek(Math.floor(state.t) + 10); },
  "copy-link": function () {
    var url = location.href.split("#")[0];
    (navigator.clipboard ? navigator.clipboard.writeText(url) : Promise.reject()).then(
      function () { status("link copied"); }, function () { status(url); });
  },
  "export-json": function () {
    download("cronlab-run.json", new Blob([JSON.stringify(state.result, null, 2)], { type: "application/json" }));
  },
  "export-csv": function () { download("cronlab-per-minute.csv", new Blob([csv(state.result)], { type: "text/csv" })); },
  "png-backlog": function () { png("backlog"); },
  "png-flow": function () { png("flow"); },
  "png-lanes": function () { png("lanes"); },
  "png-pods": function () { png("pods"); },
  "inspect-close": closeInspect,
  realsim: runRealsim,
  "live-start": liveStart,
  "live-stop": liveStop,
  "live-crash": function () { liveChaos("crash-leader"); },
  "live-pause": function () { liveChaos("pause-leader"); },
  "live-zombie": function () { liveChaos("pause-leader", true); },
  "live-kill-worker": function () { liveChaos("kill-worker"); },
}, FAULT_ACTIONS, TOUR_ACTIONS);

function inspectable(e) {
  var el = e.target.closest("[data-inspect]");
  if (el) openInspect(el.dataset.inspect, el);
  return !!el;
}

function onKey(e) {
  var tag = e.target.tagName, typing = tag === "INPUT" || tag === "SELECT" || tag === "TEXTAREA";
  if ((e.key === "Enter" || e.key === " ") && e.target.dataset && e.target.dataset.inspect) {
    e.preventDefault(); inspectable(e); return;
  }
  if (e.key === "Escape") { if (state.inspect) closeInspect(); else if (state.tour) closeTour(); return; }
  if (e.key === " " && !typing && tag !== "BUTTON" && tag !== "A") { e.preventDefault(); setPlaying(!state.playing); }
}

function wire() {
  document.addEventListener("click", function (e) {
    var el = e.target.closest("[data-action]");
    if (el && ACTIONS[el.dataset.action]) { e.preventDefault(); ACTIONS[el.dataset.action](); return; }
    inspectable(e);
  });
  var form = $("#controls");
  form.addEventListener("submit", function (e) { e.preventDefault(); });
  form.addEventListener("change", function (e) { if (!("param" in e.target.dataset)) changed(e); });
  form.addEventListener("input", function (e) { if (e.target.type === "range") changed(e); });
  $("#c-ab-key").addEventListener("change", changed);
  $("#c-ab-value").addEventListener("change", changed);
  $("#c-zoom").addEventListener("change", function (e) { zoom(Number(e.target.value)); });
  $("#c-speed").addEventListener("change", function (e) { state.speed = Number(e.target.value); });
  $("#c-scrub").addEventListener("input", function (e) { seek(Number(e.target.value)); });
  document.addEventListener("keydown", onKey);
  window.addEventListener("hashchange", function () {
    readToken();
    var k = tourFromURL();
    if (k && k !== state.tour) go(k);
  });
  window.addEventListener("resize", function () { particles.fit(); resizeCharts(); moveCursors(); });
}

buildCompareKeys();
readURL();
syncForm();
buildRunsTable();
buildTour();
wire();
if (tourFromURL()) go(tourFromURL()); else recompute();
fetch("/api/live").then(function (r) { return r.json(); }).then(function (snap) {
  if (snap.running) { liveShow(snap); liveListen(); }
}).catch(function () {});
requestAnimationFrame(tick);
