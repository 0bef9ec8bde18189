/* Playback: the clock, one frame at second t, play/pause and seeking. */
import { $, fmt, pad, state } from "./state.js";
import { clock } from "./timeline.js";
import { renderDiagram } from "./diagram.js";
import { moveCursors } from "./charts.js";
import { particles } from "./particles.js";
import { renderInspect } from "./inspect.js";

export function frame(full) {
  if (!state.result) return;
  var t = Math.floor(state.t), d = state.derived, r = state.result;
  var now = renderDiagram(t);
  var pm = r.per_minute, m = Math.min(Math.floor(t / 60), pm.minute.length - 1);
  $("#ticker").textContent = "min " + pad(pm.minute[m]) + " · dispatched " + fmt(pm.dispatched[m]) +
    " · executed " + fmt(pm.executed[m]) + " · dup ×" + fmt(pm.duplicates[m]) +
    " · missed " + fmt(pm.missed[m]) + " · backlog " + fmt(pm.backlog[m]);
  $("#clock").textContent = clock(t) + " / " + clock(d.end);
  document.querySelectorAll(".at-now").forEach(function (el) { el.textContent = clock(t); });
  $("#c-scrub").value = String(t);
  $("#sub-backlog").textContent = "now " + fmt(now.backlog) + " at " + clock(t);
  var items = $("#event-log").children;
  for (var i = 0; i < items.length; i++) {
    items[i].classList.toggle("future", Number(items[i].dataset.t) > t);
  }
  moveCursors();
  renderInspect(t);
  if (full || !state.playing) {
    $("#stage-summary").textContent = "At " + clock(t) + ": queue " + fmt(now.backlog) +
      (now.leader >= 0 ? ", leader replica " + now.leader : ", no lease holder");
  }
}

var last = null;
export function tick(ts) {
  if (state.playing && state.result) {
    var dt = last == null ? 0 : Math.min(0.1, (ts - last) / 1000), before = state.t;
    state.t = Math.min(state.derived.end - 1, state.t + dt * state.speed);
    if (Math.floor(state.t) > state.spawned) {
      particles.spawn(state.spawned, Math.floor(state.t), dt);
      state.spawned = Math.floor(state.t);
    }
    if (Math.floor(state.t) !== Math.floor(before)) frame(false);
    if (state.t >= state.derived.end - 1) setPlaying(false);
  }
  last = ts;
  particles.step();
  requestAnimationFrame(tick);
}

export function setPlaying(on) {
  if (on && state.result && state.t >= state.derived.end - 1) state.t = 0;
  if (on) state.spawned = Math.floor(state.t) - 1;
  state.playing = on;
  var b = document.querySelector('[data-action="play"]');
  b.textContent = on ? "❚❚ Pause" : "▶ Play";
  b.setAttribute("aria-pressed", String(on));
  if (!on) frame(true);
}

export function seek(t) {
  if (!state.result) return;
  state.t = Math.max(0, Math.min(state.derived.end - 1, t));
  state.spawned = Math.floor(state.t) - 1;
  particles.clear();
  frame(true);
}
