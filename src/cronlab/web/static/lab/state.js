/* cronlab lab: the page. Every change asks /api/simulate (the model, exact) and redraws.
   Playback walks the model's run-length timeline; particles are a sample, never one per task.
   This module: defaults, small helpers, the one shared state and the window.cronlabLab hook. */

export const DEFAULTS = {
  preset: "midnight", tasks: "1000000", minutes: "60", election: "lease", replicas: "3",
  ttl: "10", timers: "durable", "restart-after": "300", workers: "5", rate: "200",
};
export const NEXT_B = {
  election: function (s) { return s.election === "off" ? "lease" : "off"; },
  timers: function (s) { return s.timers === "durable" ? "in-memory" : "durable"; },
  replicas: function (s) { return String(Number(s.replicas) + 2); },
  workers: function (s) { return String(Number(s.workers) * 2); },
  rate: function (s) { return String(Number(s.rate) * 2); },
  "lease-ttl": function () { return "30"; },
  "restart-after": function () { return "never"; },
  crash: function () { return "leader@0"; },
};
export function $(sel) { return document.querySelector(sel); }
export function fmt(n) { return Math.round(n).toLocaleString("en-US"); }
export function pad(n) { return String(n).padStart(2, "0"); }

export const state = {
  scenario: Object.assign({}, DEFAULTS), crashes: [], compare: "election=off",
  result: null, derived: null, t: 0, playing: false, speed: 60, changeAt: 0, spawned: -1,
  inflight: null, token: "", live: null, source: null, liveNote: "",
};
window.cronlabLab = { state: state, recomputes: 0, lastRecomputeMs: null };
