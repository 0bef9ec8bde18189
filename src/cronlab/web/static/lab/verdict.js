/* A checker's verdict, the same shape from the model, the simulated code and the live run:
   {ok, counts: {lost, duplicated, unexpected, late, stuck}, samples?: {kind: [task keys]}}. */
import { fmt } from "./state.js";

export const KINDS = ["lost", "duplicated", "unexpected", "late", "stuck"];

/* Render `v` into `el` as "who: ✓ ok" or "who: ✗ …" with every count and a sample of each. */
export function renderVerdict(el, v, who) {
  el.textContent = "";
  if (!v) { el.className = "verdict none"; el.hidden = true; return; }
  el.hidden = false;
  el.className = "verdict " + (v.ok ? "ok" : "bad");
  el.dataset.ok = String(!!v.ok);
  var head = document.createElement("strong");
  head.textContent = who + ": " + (v.ok ? "✓ ok" : "✗ not ok");
  el.appendChild(head);
  KINDS.forEach(function (k) {
    var n = (v.counts || {})[k] || 0, span = document.createElement("span");
    span.className = "count" + (n ? " hit" : "");
    span.dataset.kind = k;
    span.textContent = k + " " + fmt(n);
    var sample = ((v.samples || {})[k] || []).slice(0, 3);
    if (n && sample.length) span.title = "e.g. " + sample.join(", ");
    el.appendChild(span);
    if (n && sample.length) {
      var s = document.createElement("small");
      s.className = "sample";
      s.textContent = "e.g. " + sample.join(", ");
      el.appendChild(s);
    }
  });
}
