/* Particles: a sample of the flow, drawn on one canvas. */
import { $, state } from "./state.js";
import { upto, at } from "./timeline.js";
import { boxes, plane } from "./diagram.js";

export const particles = (function () {
  var canvas = $("#particles"), ctx = canvas.getContext("2d"), list = [], W = 0, H = 0;

  function fit() {
    var box = canvas.getBoundingClientRect();
    W = box.width; H = box.height;
    canvas.width = Math.round(W * devicePixelRatio);
    canvas.height = Math.round(H * devicePixelRatio);
    ctx.setTransform(devicePixelRatio, 0, 0, devicePixelRatio, 0, 0);
  }

  function centre(el, side) {
    var a = canvas.getBoundingClientRect(), b = el.getBoundingClientRect();
    var x = side === "l" ? b.left : side === "r" ? b.right : b.left + b.width / 2;
    return { x: x - a.left, y: b.top - a.top + b.height / 2 };
  }

  function add(from, to, color, life) {
    var j = (Math.random() - 0.5) * 14;
    list.push({ x0: from.x, y0: from.y + j, x1: to.x, y1: to.y + j, age: 0, life: life, color: color });
  }

  /* A handful per frame whatever the volume: the dots show where work flows, not how much. */
  function howMany(n, dt) { return n <= 0 ? 0 : Math.min(3, 1 + Math.floor(Math.log10(n + 1) * 0.6 * Math.min(1, dt * 8 + 0.3))); }

  function spawn(a, b, dt) {
    var d = state.derived, r = state.result;
    if (!d || b < a || list.length > 160) return;
    /* Seconds a+1 .. b were crossed in this frame. */
    var disp = upto(d, "dispatched", b) - upto(d, "dispatched", a);
    var dup = upto(d, "duplicates", b) - upto(d, "duplicates", a);
    var miss = upto(d, "missed", b) - upto(d, "missed", a);
    var exec = upto(d, "executed", b) - upto(d, "executed", a);
    var due = $("#col-due .box"), queue = $("#col-queue .box"), cp = plane(r, b);
    var senders = boxes.replicas.filter(function (el, i) {
      return cp.alive[i] && (r.scenario.election === "off" || at(d, b).leader === i);
    });
    for (var i = 0; i < howMany(disp, dt) && senders.length; i++) {
      var s = senders[i % senders.length], isDup = dup > 0 && i % senders.length > 0;
      add(centre(due, "r"), centre(s, "l"), "#7a8aa6", 0.35);
      add(centre(s, "r"), centre(queue, "l"), isDup ? "#c93c3c" : "#2d6cdf", 0.45);
    }
    for (var k = 0; k < howMany(miss, dt); k++) {
      var from = centre(due, "c");
      list.push({ x0: from.x, y0: from.y, x1: from.x + (Math.random() - 0.5) * 60, y1: H + 10, age: 0, life: 0.8, color: "#b7791f" });
    }
    for (var e = 0; e < howMany(exec, dt) && boxes.pods.length; e++) {
      var pod = boxes.pods[Math.floor(Math.random() * boxes.pods.length)];
      add(centre(queue, "r"), centre(pod, "c"), "#1c8c61", 0.5);
    }
  }

  function step() {
    if (!W) fit();
    ctx.clearRect(0, 0, W, H);
    var dt = 1 / 60;
    list = list.filter(function (p) { p.age += dt; return p.age < p.life; });
    list.forEach(function (p) {
      var k = p.age / p.life, e = k * (2 - k);
      ctx.globalAlpha = 1 - k * 0.5;
      ctx.fillStyle = p.color;
      ctx.beginPath();
      ctx.arc(p.x0 + (p.x1 - p.x0) * e, p.y0 + (p.y1 - p.y0) * e, 3, 0, 6.283);
      ctx.fill();
    });
    ctx.globalAlpha = 1;
  }

  return { spawn: spawn, step: step, fit: fit, clear: function () { list = []; } };
})();
