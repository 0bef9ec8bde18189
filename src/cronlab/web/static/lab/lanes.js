/* The lease timeline: one lane per replica (who held which epoch when, pauses, crashes,
   restarts, fenced and zombie writes) and one per worker pod plus the queue, drawn by uPlot on
   the charts' own x axis so a second sits at the same x as in the chart above it. */
import { $, fmt, state } from "./state.js";
import { clock } from "./timeline.js";
import { draw, charts, xMax } from "./charts.js";

const MAX_POD_LANES = 8;
const COLOURS = {
  leader: "#1c8c61", standby: "#c9d3e1", dispatcher: "#c93c3c", paused: "#e3a33b", down: "#f3c4c4", up: "#9fc0f5",
};
const GLYPH = {
  crash: ["✕", "#c93c3c"], restart: ["↑", "#1c8c61"], fenced: ["⊘", "#1c8c61"], zombie: ["⚠", "#c93c3c"],
  worker_crash: ["✕", "#c93c3c"], redeliver: ["↺", "#2d6cdf"], lose: ["▼", "#b7791f"], reconcile: ["↻", "#1c8c61"],
};
export const models = { lanes: null, pods: null };

/* The epoch a paused replica believes it holds: the lease's epoch when it stopped. */
function believed(r, span) {
  var e = r.log.filter(function (x) { return x.kind === "pause" && x.replica === span.who && x.t === span.start; })[0];
  var before = r.log.filter(function (x) { return x.kind === "pause" && x.replica === span.who && x.t <= span.start; });
  return (e || before[before.length - 1] || { epoch: 0 }).epoch;
}

export function replicaModel(r) {
  var lanes = [];
  for (var i = 0; i < r.scenario.replicas; i++) {
    lanes.push({ name: "r" + i, who: i, spans: r.lanes.replicas.filter(function (x) { return x.who === i; }).map(function (x) {
      return Object.assign({}, x, x.state === "paused" && x.held ? { epoch: believed(r, x) } : {});
    }) });
  }
  var marks = r.log.filter(function (e) { return /^(crash|restart|fenced|zombie)$/.test(e.kind) && e.replica != null; })
    .map(function (e) { return { kind: e.kind, t: e.t, lane: e.replica, count: e.count, text: e.text }; });
  return { lanes: lanes, marks: marks };
}

export function podModel(r) {
  var s = r.scenario, crashed = {};
  r.log.forEach(function (e) { if (e.kind === "worker_crash") crashed[e.replica] = true; });
  var ids = Object.keys(crashed).map(Number);
  for (var p = 0; ids.length < Math.min(MAX_POD_LANES, s.workers) && p < s.workers; p++) if (!crashed[p]) ids.push(p);
  ids = ids.slice(0, MAX_POD_LANES).sort(function (a, b) { return a - b; });
  var lanes = [{ name: "queue", who: -1, spans: [] }].concat(ids.map(function (p) {
    return { name: "pod " + p, who: p, spans: r.lanes.pods.filter(function (x) { return x.who === p; }) };
  }));
  var lane = function (pod) { return ids.indexOf(pod) + 1; }, marks = [];
  r.log.forEach(function (e) {
    if (e.kind === "worker_crash") {
      marks.push({ kind: "worker_crash", t: e.t, lane: lane(e.replica), count: e.count, text: e.text });
      marks.push({ kind: "redeliver", t: e.t + s.visibility, lane: 0, count: e.count, text: fmt(e.count) + " visible again" });
    }
    if (e.kind === "lose" || e.kind === "reconcile") marks.push({ kind: e.kind, t: e.t, lane: 0, count: e.count, text: e.text });
  });
  var more = s.workers - ids.length;
  return { lanes: lanes, marks: marks, more: more };
}

function laneHeight(n) { return n <= 6 ? 22 : Math.max(9, Math.floor(160 / n)); }

function drawLanes(name) {
  return function (u) {
    var m = models[name];
    if (!m) return;
    var ctx = u.ctx, n = m.lanes.length, dpr = devicePixelRatio, h = u.bbox.height / n;
    ctx.save();
    ctx.beginPath(); ctx.rect(u.bbox.left, u.bbox.top, u.bbox.width, u.bbox.height); ctx.clip();
    m.lanes.forEach(function (lane, i) {
      var y = u.bbox.top + i * h + h * 0.18, bh = h * 0.64;
      lane.spans.forEach(function (sp) { span(u, ctx, sp, y, bh); });
    });
    ctx.font = (Math.min(14, h * 0.8 / dpr) * dpr) + "px system-ui, sans-serif";
    ctx.textBaseline = "middle";
    ctx.textAlign = "center";
    m.marks.forEach(function (mk) {
      var g = GLYPH[mk.kind], x = u.valToPos(mk.t / 60, "x", true), y = u.bbox.top + (mk.lane + 0.5) * h;
      ctx.fillStyle = "#fff";
      ctx.beginPath(); ctx.arc(x, y, h * 0.36, 0, 6.283); ctx.fill();
      ctx.fillStyle = g[1];
      ctx.fillText(g[0], x, y);
    });
    ctx.restore();
  };
}

function span(u, ctx, sp, y, bh) {
  var dpr = devicePixelRatio, x0 = u.valToPos(sp.start / 60, "x", true), x1 = u.valToPos(sp.end / 60, "x", true);
  var w = Math.max(dpr, x1 - x0);
  ctx.fillStyle = COLOURS[sp.state] || "#ddd";
  ctx.fillRect(x0, y, w, bh);
  if (sp.state === "paused") stripes(ctx, x0, y, w, bh);
  if (sp.state === "down") { ctx.strokeStyle = "#c93c3c"; ctx.setLineDash([3 * dpr, 2 * dpr]); ctx.strokeRect(x0, y, w, bh); ctx.setLineDash([]); }
  var labels = sp.state === "leader" ? ["epoch " + sp.epoch, "e" + sp.epoch]
    : sp.state === "paused" && sp.held ? ["paused · holds " + fmt(sp.held) + " (epoch " + sp.epoch + ")", "holds " + fmt(sp.held)] : [];
  ctx.font = (10.5 * dpr) + "px system-ui, sans-serif";
  var label = labels.filter(function (l) { return ctx.measureText(l).width + 8 * dpr < w; })[0];
  if (label && bh > 11 * dpr) {
    ctx.fillStyle = sp.state === "leader" ? "#fff" : "#5b3a00";
    ctx.textBaseline = "middle";
    ctx.textAlign = "left";
    ctx.fillText(label, x0 + 4 * dpr, y + bh / 2);
  }
}

function stripes(ctx, x, y, w, h) {
  ctx.save();
  ctx.beginPath(); ctx.rect(x, y, w, h); ctx.clip();
  ctx.strokeStyle = "rgba(255,255,255,.55)";
  ctx.lineWidth = 2 * devicePixelRatio;
  for (var k = -h; k < w; k += 7 * devicePixelRatio) { ctx.beginPath(); ctx.moveTo(x + k, y + h); ctx.lineTo(x + k + h, y); ctx.stroke(); }
  ctx.restore();
}

function laneOpts(name) {
  return {
    height: 0, legend: { show: false }, cursor: { drag: { x: false, y: false }, points: { show: false }, y: false },
    scales: { x: { time: false, range: function () { return [0, xMax()]; } },
      y: { range: function () { return [0, models[name].lanes.length]; } } },
    hooks: { draw: [drawLanes(name)] },
  };
}

function axes(name) {
  return [
    { label: "minute", size: 36, labelSize: 16, font: "11px system-ui", labelFont: "11px system-ui" },
    { size: 62, font: "11px system-ui", grid: { show: false }, ticks: { show: false },
      splits: function () { var n = models[name].lanes.length; return models[name].lanes.map(function (_, i) { return n - i - 0.5; }); },
      values: function () { return models[name].lanes.map(function (l) { return l.name; }); } },
  ];
}

function render(name, m) {
  models[name] = m;
  var opts = laneOpts(name);
  opts.axes = axes(name);
  opts.height = 56 + m.lanes.length * laneHeight(m.lanes.length);
  draw(name, [[0, 1], [null, null]], [{}, { label: name, stroke: "transparent", points: { show: false } }], opts);
  charts[name].redraw(false);
}

export function renderLanes(r) {
  if (typeof uPlot === "undefined") return;
  render("lanes", replicaModel(r));
  render("pods", podModel(r));
  describe("#chart-lanes", models.lanes);
  describe("#chart-pods", models.pods);
  $("#pods-more").textContent = models.pods.more > 0 ? "(" + (r.scenario.workers - models.pods.more) + " of " + fmt(r.scenario.workers) + " drawn)" : "";
  window.cronlabLab.lanes = models;
}

/* The same content as words, for screen readers (the canvas is an image). */
function describe(sel, m) {
  var parts = m.lanes.map(function (l) {
    return l.name + ": " + (l.spans.length ? l.spans.map(function (sp) {
      return sp.state + (sp.state === "leader" || (sp.state === "paused" && sp.held) ? " epoch " + sp.epoch : "") +
        (sp.held ? " holding " + fmt(sp.held) : "") + " " + clock(sp.start) + "–" + clock(sp.end);
    }).join(", ") : "events only");
  });
  var marks = m.marks.map(function (mk) { return mk.kind + " at " + clock(mk.t); });
  $(sel).setAttribute("aria-label", parts.join("; ") + (marks.length ? ". Marks: " + marks.join(", ") : "") +
    (m.more ? ". " + m.more + " more pods not drawn, up all along unless listed" : ""));
}

export function laneState(r, kind, who, t) {
  var list = kind === "pod" ? r.lanes.pods : r.lanes.replicas, hit = null;
  list.forEach(function (sp) { if (sp.who === who && sp.start <= t && t < sp.end) hit = sp; });
  if (!hit) list.forEach(function (sp) { if (sp.who === who && sp.start <= t) hit = sp; });
  return hit;
}

/* A pod at second t: a crash at t happens at the end of t, after its share ran and before
   its ack — that second it is "crashing", down from the next. */
export function podAt(r, p, t) {
  var sp = laneState(r, "pod", p, t) || { who: p, state: "up", start: 0, end: Infinity };
  var crash = r.log.filter(function (e) { return e.kind === "worker_crash" && e.replica === p && e.t === t; })[0];
  return crash ? Object.assign({}, sp, { state: "crashing", crash: crash }) : sp;
}
