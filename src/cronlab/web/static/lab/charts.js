/* Charts (uPlot, the classic script loaded before this module: the global uPlot). Every chart,
   the lease timeline's lanes included, shares one x axis: minutes 0 .. xMax(). */
import { $, fmt, pad, state } from "./state.js";

export const charts = {};

/* The x range of every chart: whole minutes, at least one, past the last simulated second —
   or the first state.zoom minutes of it. */
export function xMax() {
  var whole = state.derived ? Math.max(1, Math.ceil(state.derived.end / 60)) : 1;
  return state.zoom ? Math.min(state.zoom, whole) : whole;
}

export function zoom(minutes) {
  state.zoom = minutes;
  Object.keys(charts).forEach(function (k) { charts[k].setScale("x", { min: 0, max: xMax() }); });
  moveCursors();
}

const MARKS = {
  crash: ["#c93c3c", [5, 4], function (e) { return "crash r" + e.replica; }],
  acquire: ["#1c8c61", [], function (e) { return "takeover r" + e.replica; }],
  missed: ["#b7791f", [], function () { return "missed"; }],
  pause: ["#b7791f", [2, 3], function (e) { return "pause r" + e.replica; }],
  zombie: ["#c93c3c", [], function () { return "zombie write"; }],
  fenced: ["#1c8c61", [2, 3], function () { return "fenced"; }],
  worker_crash: ["#c93c3c", [1, 3], function (e) { return "pod " + e.replica + " crash"; }],
  lose: ["#b7791f", [1, 3], function () { return "lost"; }],
  reconcile: ["#1c8c61", [1, 3], function () { return "reconcile"; }],
};

function markers(u) {
  var r = state.result;
  if (!r) return;
  var ctx = u.ctx, top = u.bbox.top, h = u.bbox.height, row = 0;
  ctx.save();
  ctx.beginPath(); ctx.rect(u.bbox.left, top, u.bbox.width, h); ctx.clip();
  ctx.font = (11 * devicePixelRatio) + "px system-ui, sans-serif";
  ctx.textAlign = "left";
  ctx.textBaseline = "top";
  var labels = [];
  r.log.forEach(function (e) {
    var m = MARKS[e.kind];
    if (!m) return;
    var x = Math.round(u.valToPos(e.t / 60, "x", true));
    ctx.strokeStyle = m[0];
    ctx.setLineDash(m[1].map(function (v) { return v * devicePixelRatio; }));
    ctx.lineWidth = devicePixelRatio * 1.5;
    ctx.beginPath(); ctx.moveTo(x, top); ctx.lineTo(x, top + h); ctx.stroke();
    if (row < 6) labels.push([m[0], m[2](e), x + 4 * devicePixelRatio, top + devicePixelRatio * (3 + 13 * row++)]);
  });
  /* Labels after every line, on a white halo: a later mark's line never crosses a label. */
  ctx.setLineDash([]);
  ctx.lineWidth = 3 * devicePixelRatio;
  ctx.lineJoin = "round";
  ctx.strokeStyle = "rgba(255,255,255,.9)";
  labels.forEach(function (l) { ctx.strokeText(l[1], l[2], l[3]); ctx.fillStyle = l[0]; ctx.fillText(l[1], l[2], l[3]); });
  ctx.restore();
}

export function chartOpts(el, series, extra) {
  return Object.assign({
    width: Math.max(300, el.clientWidth), height: 210,
    scales: {
      x: { time: false, range: function () { return [0, xMax()]; } },
      y: { range: function (u, lo, hi) { return [0, Math.max(1, hi * 1.04)]; } },
    },
    axes: [
      { label: "minute", size: 36, labelSize: 16, font: "11px system-ui", labelFont: "11px system-ui" },
      { size: 62, font: "11px system-ui", values: function (u, vals) { return vals.map(short); } },
    ],
    cursor: { drag: { x: false, y: false } },
    legend: { live: true },
    series: series,
    hooks: { draw: [markers] },
  }, extra || {});
}

function short(v) {
  if (v == null) return "";
  var a = Math.abs(v);
  return a >= 1e9 ? (v / 1e9).toFixed(1) + "B" : a >= 1e6 ? (v / 1e6).toFixed(1) + "M" : a >= 1e3 ? (v / 1e3).toFixed(0) + "k" : String(v);
}

function backlogData(r) {
  var tl = r.timeline, xs = [], ys = [];
  for (var i = 0; i < tl.t.length; i++) {
    xs.push(tl.t[i] / 60); ys.push(tl.backlog[i]);
    if (tl.n[i] > 1) {
      var last = tl.t[i] + tl.n[i] - 1;
      xs.push(last / 60); ys.push(tl.backlog[i] + tl.backlog_step[i] * (tl.n[i] - 1));
    }
  }
  return [xs, ys];
}

function count(u, v) { return v == null ? "–" : fmt(v); }

export function renderCharts(r) {
  if (typeof uPlot === "undefined") return;
  var pm = r.per_minute;
  var flow = [pm.minute.map(function (m) { return m + 0.5; }), pm.dispatched, pm.executed];
  var bars = uPlot.paths.bars;
  var minute = { label: "minute", value: function (u, v) { return v == null ? "–" : v.toFixed(1); } };
  draw("backlog", backlogData(r), [
    minute, { label: "backlog", stroke: "#2d6cdf", fill: "rgba(45,108,223,.12)", width: 2, points: { show: false }, value: count },
  ]);
  draw("flow", flow, [
    { label: "minute", value: function (u, v) { return v == null ? "–" : "min " + pad(Math.floor(v)); } },
    { label: "dispatched", stroke: "#c93c3c", fill: "rgba(201,60,60,.28)", paths: bars({ size: [0.9, 400] }), points: { show: false }, value: count },
    { label: "executed", stroke: "#1c8c61", fill: "rgba(28,140,97,.55)", paths: bars({ size: [0.45, 200] }), points: { show: false }, value: count },
  ]);
}

/* Create chart `name` in #chart-NAME, or give it new data (and a new height) if it exists. */
export function draw(name, data, series, extra) {
  var el = $("#chart-" + name), old = charts[name], height = (extra && extra.height) || 210;
  if (old && old.series.length === series.length) {
    if (old.height !== height) old.setSize({ width: Math.max(300, el.clientWidth), height: height });
    old.setData(data);
    return;
  }
  if (old) old.destroy();
  charts[name] = new uPlot(chartOpts(el, series, extra), data, el);
  var cur = document.createElement("div");
  cur.className = "cursor";
  charts[name].over.appendChild(cur);
}

export function moveCursors() {
  Object.keys(charts).forEach(function (k) {
    var u = charts[k], cur = u.over.querySelector(".cursor");
    if (cur) cur.style.left = u.valToPos(state.t / 60, "x") + "px";
  });
}

export function resizeCharts() {
  Object.keys(charts).forEach(function (k) {
    var el = $("#chart-" + k);
    charts[k].setSize({ width: Math.max(300, el.clientWidth), height: charts[k].height });
  });
}

/* Page x (CSS px) of second `t` on chart `name`: the browser tests check the lanes line up. */
export function pageX(name, t) {
  var u = charts[name], box = u.over.getBoundingClientRect();
  return box.left + window.scrollX + u.valToPos(t / 60, "x");
}
window.cronlabLab.pageX = pageX;
window.cronlabLab.xRange = function (name) { return [charts[name].scales.x.min, charts[name].scales.x.max]; };
window.cronlabLab.chart = function (name) { return charts[name]; };
