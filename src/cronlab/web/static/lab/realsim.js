/* The real code, simulated: GET /api/realsim runs the page's scenario through the
   deterministic simulator of the engine's own code (seconds, at a smaller scale). On demand
   and when a tour step loads; a newer request aborts the older one. */
import { $, fmt, state } from "./state.js";
import { query } from "./controls.js";
import { setColumn, setStale } from "./runs.js";
import { renderVerdict } from "./verdict.js";

var ticker = null;

export function runRealsim() {
  if (state.realsimCtl) state.realsimCtl.abort();
  clearTimeout(retry);
  var ctl = new AbortController(), q = query(false).toString(), t0 = performance.now();
  state.realsimCtl = ctl;
  progress(true, t0);
  ask(ctl, q);
}

var retry = null;

/* One simulated run at a time on the server: a 429 (an earlier, aborted one still running
   there) is asked again a second later, as long as this one is still wanted. */
function ask(ctl, q) {
  fetch("/api/realsim?" + q, { signal: ctl.signal })
    .then(function (res) { return res.json().catch(function () { return {}; }).then(function (b) { return [res, b]; }); })
    .then(function (pair) {
      if (state.realsimCtl !== ctl) return;
      if (pair[0].status === 429) { waiting = true; retry = setTimeout(function () { ask(ctl, q); }, 1000); return; }
      state.realsimCtl = null;
      progress(false);
      if (pair[0].status === 404) return note("This lab has no simulator endpoint (GET /api/realsim): nothing to show.", "bad");
      if (!pair[0].ok) return note((pair[1].field ? pair[1].field + ": " : "") + (pair[1].error || "HTTP " + pair[0].status), "bad");
      state.realsim = { query: q, body: pair[1] };
      window.cronlabLab.realsims += 1;
      renderRealsim();
    })
    .catch(function (err) {
      if (err.name === "AbortError") return;
      if (state.realsimCtl === ctl) { state.realsimCtl = null; progress(false); note(String(err), "bad"); }
    });
}

var waiting = false;

function progress(on, t0) {
  clearInterval(ticker);
  $("#realsim-progress").hidden = !on;
  $('[data-action="realsim"]').setAttribute("aria-busy", String(on));
  if (!on) return;
  waiting = false;
  var tick = function () {
    var what = waiting ? "waiting for the simulator (an earlier run is finishing)… " : "running the real code in the simulator… ";
    note(what + ((performance.now() - t0) / 1000).toFixed(1) + " s", "busy");
  };
  tick();
  ticker = setInterval(tick, 200);
}

function note(text, kind) {
  var el = $("#realsim-status");
  el.textContent = text;
  el.className = "status " + (kind || "");
}

export function renderRealsim() {
  var rs = state.realsim, b = rs.body;
  if (!b.supported) {
    setColumn("sim-model", null); setColumn("code", null);
    renderVerdict($("#verdict-realsim"), null);
    $("#realsim-disagree").textContent = "";
    $("#realsim-scale").textContent = "";
    return note("The simulated code cannot run this scenario: " + (b.why || "no reason given") + ". Nothing is shown rather than a guess.", "bad");
  }
  var off = (b.disagree || []).map(function (d) { return d.metric; }), near = differ(b, off);
  setColumn("sim-model", b.model && b.model.totals, off, near);
  setColumn("code", b.totals, off, near);
  $("#realsim-scale").textContent = fmt(b.scale.tasks) + " of " + fmt(b.scale.of) + " tasks · seed " + b.seed;
  $("#realsim-replay").textContent = b.replay || "";
  renderVerdict($("#verdict-realsim"), b.verdict, "Simulated code");
  $("#realsim-disagree").textContent = off.length
    ? "Model and simulated code disagree — " + b.disagree.map(function (d) {
      return d.metric + ": model " + fmt(d.model) + ", code " + fmt(d.code);
    }).join("; ") + "."
    : near.length ? "Model and simulated code agree within what the simulator allows for the scaling; they differ by a little on " +
      near.map(function (k) { return k + " (model " + fmt(b.model.totals[k]) + ", code " + fmt(b.totals[k]) + ")"; }).join(", ") + "."
    : "Model and simulated code agree on every total at this scale.";
  $("#realsim-disagree").className = "small " + (off.length ? "disagree" : "agree");
  note("simulated in " + fmt(b.elapsed_ms) + " ms", "");
  markRealsimStale();
}

/* After a change the column belongs to an earlier scenario: say so until it is run again. */
export function markRealsimStale() {
  var rs = state.realsim, stale = !!rs && rs.query !== query(false).toString();
  setStale(["sim-model", "code"], stale);
  $("#realsim-stale").hidden = !stale;
}

/* Totals that differ without being a disagreement (the simulator's tolerance for scaling):
   said too, never hidden. */
function differ(b, off) {
  var m = (b.model && b.model.totals) || {}, c = b.totals || {};
  return Object.keys(c).filter(function (k) { return k in m && m[k] !== c[k] && off.indexOf(k) < 0; });
}
