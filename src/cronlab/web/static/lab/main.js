/* Wiring and boot: buttons by data-action, form events, keyboard, resize; then the first run. */
import { DEFAULTS, $, state } from "./state.js";
import { readURL, readToken, syncForm, changed } from "./controls.js";
import { recompute } from "./model.js";
import { resizeCharts, moveCursors } from "./charts.js";
import { tick, setPlaying, seek } from "./playback.js";
import { particles } from "./particles.js";
import { download, csv, png, status } from "./share.js";
import { liveStart, liveListen, liveShow, liveStop, liveChaos } from "./live.js";

var ACTIONS = {
  "crash-leader": function () { state.crashes.push("leader@" + Math.floor(state.t)); changed(); },
  "crash-replica": function () { state.crashes.push("replica:" + $("#c-crash-replica").value + "@" + Math.floor(state.t)); changed(); },
  reset: function () {
    state.scenario = Object.assign({}, DEFAULTS); state.crashes = []; state.compare = "election=off";
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
  "live-start": liveStart,
  "live-stop": liveStop,
  "live-crash": function () { liveChaos("crash-leader"); },
  "live-pause": function () { liveChaos("pause-leader"); },
};

function wire() {
  document.addEventListener("click", function (e) {
    var el = e.target.closest("[data-action]");
    if (el && ACTIONS[el.dataset.action]) { e.preventDefault(); ACTIONS[el.dataset.action](); }
  });
  var form = $("#controls");
  form.addEventListener("submit", function (e) { e.preventDefault(); });
  form.addEventListener("change", function (e) { if (e.target.id !== "c-crash-replica") changed(e); });
  form.addEventListener("input", function (e) { if (e.target.type === "range") changed(e); });
  $("#c-ab-key").addEventListener("change", changed);
  $("#c-ab-value").addEventListener("change", changed);
  $("#c-speed").addEventListener("change", function (e) { state.speed = Number(e.target.value); });
  $("#c-scrub").addEventListener("input", function (e) { seek(Number(e.target.value)); });
  document.addEventListener("keydown", function (e) {
    var tag = e.target.tagName;
    if (e.key === " " && tag !== "INPUT" && tag !== "SELECT" && tag !== "BUTTON" && tag !== "TEXTAREA") {
      e.preventDefault(); setPlaying(!state.playing);
    }
  });
  window.addEventListener("hashchange", readToken);
  window.addEventListener("resize", function () { particles.fit(); resizeCharts(); moveCursors(); });
}

readURL();
syncForm();
wire();
recompute();
fetch("/api/live").then(function (r) { return r.json(); }).then(function (snap) {
  if (snap.running) { liveShow(snap); liveListen(); }
}).catch(function () {});
requestAnimationFrame(tick);
