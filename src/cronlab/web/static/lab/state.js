/* cronlab lab: the page. Every change asks /api/simulate (the model, exact) and redraws.
   Playback walks the model's run-length timeline; particles are a sample, never one per task.
   This module: defaults, small helpers, the one shared state and the window.cronlabLab hook. */

export const DEFAULTS = {
  preset: "midnight", tasks: "1000000", minutes: "60", election: "lease", replicas: "3",
  ttl: "10", timers: "durable", "restart-after": "300", workers: "5", rate: "200",
  fencing: "on", batch: "10000", effects: "transactional", visibility: "30", "pod-restart": "30",
  reconcile: "60",
};
/* The repeatable faults, by their query names (the same words as cronlab simulate's flags). */
export const FAULT_KINDS = ["crash", "pause", "worker-crash", "lose"];
export function noFaults() { return { crash: [], pause: [], "worker-crash": [], lose: [] }; }

/* The keys the A/B panel offers, in its order (controls.buildCompareKeys lists them), and
   what B changes to when one is picked: the interesting other side. */
export const NEXT_B = {
  election: function (s) { return s.election === "off" ? "lease" : "off"; },
  replicas: function (s) { return String(Number(s.replicas) + 2); },
  workers: function (s) { return String(Number(s.workers) * 2); },
  rate: function (s) { return String(Number(s.rate) * 2); },
  "lease-ttl": function () { return "30"; },
  timers: function (s) { return s.timers === "durable" ? "in-memory" : "durable"; },
  "restart-after": function () { return "never"; },
  crash: function () { return "leader@0"; },
  fencing: function (s) { return s.fencing === "on" ? "off" : "on"; },
  batch: function (s) { return String(Math.max(1, Math.round(Number(s.batch) / 10))); },
  effects: function (s) { return s.effects === "external" ? "transactional" : "external"; },
  visibility: function (s) { return String(Number(s.visibility) * 2); },
  "pod-restart": function (s) { return s["pod-restart"] === "never" ? "30" : "never"; },
  reconcile: function (s) { return s.reconcile === "off" ? "60" : "off"; },
  pause: function () { return "leader@0:30"; },
  "worker-crash": function () { return "0@30"; },
  lose: function () { return "1000@30"; },
};
export function $(sel) { return document.querySelector(sel); }
export function fmt(n) { return Math.round(n).toLocaleString("en-US"); }
export function pad(n) { return String(n).padStart(2, "0"); }

export const state = {
  scenario: Object.assign({}, DEFAULTS), faults: noFaults(), compare: "election=off",
  result: null, derived: null, t: 0, playing: false, speed: 60, changeAt: 0, spawned: -1,
  inflight: null, token: "", live: null, source: null, liveNote: "",
  tour: 0, inspect: null, realsim: null, zoom: 0,
};
window.cronlabLab = { state: state, recomputes: 0, lastRecomputeMs: null, realsims: 0 };
