/* The model: ask /api/simulate for the scenario, then redraw everything from its answer. */
import { $, state } from "./state.js";
import { derive } from "./timeline.js";
import { query } from "./controls.js";
import { renderCards, renderSentence, renderAB, renderLog } from "./cards.js";
import { renderExplain } from "./explain.js";
import { renderCharts } from "./charts.js";
import { renderLanes } from "./lanes.js";
import { buildDiagram } from "./diagram.js";
import { frame } from "./playback.js";
import { openInspect } from "./inspect.js";
import { markRealsimStale } from "./realsim.js";
import { outline } from "./tour.js";

export function recompute() {
  if (state.inflight) state.inflight.abort();
  var ctl = new AbortController(), started = state.changeAt || performance.now();
  state.inflight = ctl;
  fetch("/api/simulate?" + query(true).toString(), { signal: ctl.signal })
    .then(function (res) { return res.json().then(function (body) { return [res, body]; }); })
    .then(function (pair) {
      if (state.inflight !== ctl) return;
      state.inflight = null;
      if (!pair[0].ok) return showError(pair[1]);
      showError(null);
      window.cronlabLab.fetchMs = performance.now() - started;
      apply(pair[1], started);
    })
    .catch(function (err) { if (err.name !== "AbortError") showError({ error: String(err) }); });
}

function showError(body) {
  $("#form-error").textContent = body ? (body.field ? body.field + ": " : "") + body.error : "";
}

function apply(r, started) {
  state.result = r;
  state.derived = derive(r);
  state.t = Math.min(state.t, state.derived.end - 1);
  renderCards(r);
  renderSentence(r);
  renderAB(r);
  renderExplain(r);
  renderLog(r);
  renderCharts(r);
  renderLanes(r);
  buildDiagram(r);
  frame(true);
  markRealsimStale();
  if (state.pendingInspect) { openInspect(state.pendingInspect); state.pendingInspect = null; }
  outline();
  /* From the change event to everything redrawn (cards, charts, lanes, diagram). */
  var ms = performance.now() - started, api = window.cronlabLab;
  api.recomputes += 1;
  api.lastRecomputeMs = ms;
  $("#perf").textContent = "recomputed in " + ms.toFixed(0) + " ms";
}
