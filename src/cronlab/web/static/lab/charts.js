/* Charts (uPlot, the classic script loaded before this module: the global uPlot). */
import { $, fmt, pad, state } from "./state.js";

export const charts = {};

function markers(u) {
  var r = state.result;
  if (!r) return;
  var ctx = u.ctx, top = u.bbox.top, h = u.bbox.height;
  ctx.save();
  ctx.font = (11 * devicePixelRatio) + "px system-ui, sans-serif";
  ctx.textAlign = "left";
  ctx.textBaseline = "top";
  r.log.forEach(function (e) {
    if (e.kind !== "crash" && e.kind !== "acquire" && e.kind !== "missed") return;
    var x = Math.round(u.valToPos(e.t / 60, "x", true));
    ctx.strokeStyle = ctx.fillStyle = e.kind === "acquire" ? "#1c8c61" : e.kind === "crash" ? "#c93c3c" : "#b7791f";
    ctx.setLineDash(e.kind === "crash" ? [5, 4] : []);
    ctx.lineWidth = devicePixelRatio * 1.5;
    ctx.beginPath(); ctx.moveTo(x, top); ctx.lineTo(x, top + h); ctx.stroke();
    var label = e.kind === "crash" ? "crash r" + e.replica : e.kind === "acquire" ? "takeover r" + e.replica : "missed";
    ctx.fillText(label, x + 4 * devicePixelRatio, top + devicePixelRatio * (e.kind === "acquire" ? 16 : 3));
  });
  ctx.restore();
}

function chartOpts(el, series, yFmt, extra) {
  return Object.assign({
    width: Math.max(300, el.clientWidth), height: 210,
    scales: { x: { time: false, range: function (u, lo, hi) { return [0, Math.max(hi, 1)]; } } },
    axes: [
      { label: "minute", size: 36, labelSize: 16, font: "11px system-ui", labelFont: "11px system-ui" },
      { size: 62, font: "11px system-ui", values: function (u, vals) { return vals.map(yFmt); } },
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

export function renderCharts(r) {
  if (typeof uPlot === "undefined") return;
  var pm = r.per_minute;
  var flow = [pm.minute.map(function (m) { return m + 0.5; }), pm.dispatched, pm.executed];
  var bars = uPlot.paths.bars;
  var minute = { label: "minute", value: function (u, v) { return v == null ? "–" : v.toFixed(1); } };
  draw("backlog", backlogData(r), [
    minute, { label: "backlog", stroke: "#2d6cdf", fill: "rgba(45,108,223,.12)", width: 2, points: { show: false }, value: function (u, v) { return v == null ? "–" : fmt(v); } },
  ]);
  draw("flow", flow, [
    { label: "minute", value: function (u, v) { return v == null ? "–" : "min " + pad(Math.floor(v)); } },
    { label: "dispatched", stroke: "#c93c3c", fill: "rgba(201,60,60,.28)", paths: bars({ size: [0.9, 60] }), points: { show: false }, value: function (u, v) { return v == null ? "–" : fmt(v); } },
    { label: "executed", stroke: "#1c8c61", fill: "rgba(28,140,97,.55)", paths: bars({ size: [0.45, 30] }), points: { show: false }, value: function (u, v) { return v == null ? "–" : fmt(v); } },
  ]);
}

function draw(name, data, series) {
  var el = $("#chart-" + name), old = charts[name];
  if (old && old.series.length === series.length) {
    old.setData(data);
    return;
  }
  if (old) old.destroy();
  charts[name] = new uPlot(chartOpts(el, series, short), data, el);
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
    charts[k].setSize({ width: Math.max(300, el.clientWidth), height: 210 });
  });
}
