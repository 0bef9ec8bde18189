/* Time and the model's run-length timeline: prefix sums, lookups at a second. */
import { pad } from "./state.js";

export function clock(s) {
  s = Math.max(0, Math.floor(s));
  var h = Math.floor(s / 3600), m = Math.floor((s % 3600) / 60), sec = s % 60;
  return (h ? h + ":" + pad(m) : pad(m)) + ":" + pad(sec);
}

export function derive(r) {
  var tl = r.timeline, prefix = {};
  ["dispatched", "executed", "duplicates", "missed"].forEach(function (k) {
    var acc = 0, out = new Array(tl.t.length + 1);
    out[0] = 0;
    for (var i = 0; i < tl.t.length; i++) { acc += tl[k][i] * tl.n[i]; out[i + 1] = acc; }
    prefix[k] = out;
  });
  var end = tl.t.length ? tl.t[tl.t.length - 1] + tl.n[tl.n.length - 1] : 0;
  return { tl: tl, prefix: prefix, end: Math.max(end, 1), peak: r.totals.backlog_peak };
}

function runAt(d, t) {
  var lo = 0, hi = d.tl.t.length - 1;
  while (lo < hi) {
    var mid = (lo + hi + 1) >> 1;
    if (d.tl.t[mid] <= t) lo = mid; else hi = mid - 1;
  }
  return lo;
}

/* Totals of a column over seconds 0..t inclusive. */
export function upto(d, key, t) {
  if (t < 0 || !d.tl.t.length) return 0;
  var i = runAt(d, t), k = Math.min(t - d.tl.t[i] + 1, d.tl.n[i]);
  return d.prefix[key][i] + d.tl[key][i] * k;
}

export function at(d, t) {
  var i = runAt(d, Math.min(t, d.end - 1)), tl = d.tl;
  var k = Math.min(t, d.end - 1) - tl.t[i];
  return {
    backlog: tl.backlog[i] + tl.backlog_step[i] * k,
    executed: t < d.end ? tl.executed[i] : 0,
    leader: tl.leader[i],
  };
}
