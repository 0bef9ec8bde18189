/* The result as text: metric cards, the sentence, the A/B table, the worked numbers, the event log. */
import { $, fmt } from "./state.js";
import { clock } from "./timeline.js";

function setMetric(name, text) {
  var el = document.querySelector('[data-metric="' + name + '"]');
  el.textContent = text;
  /* Billions must still fit the card: shrink long numbers instead of clipping them. */
  el.parentNode.className = "value" + (text.length > 11 ? " longer" : text.length > 9 ? " long" : "");
}

export function renderCards(r) {
  var t = r.totals, s = r.scenario;
  setMetric("duplicates", fmt(t.duplicates));
  setMetric("missed", fmt(t.missed));
  setMetric("backlog", fmt(t.backlog_peak));
  setMetric("drain", (t.drain_time_s / 60).toLocaleString("en-US", { minimumFractionDigits: 1, maximumFractionDigits: 1 }));
  $(".card.dup").className = "card dup " + (t.duplicates ? "bad" : "good");
  $(".card.missed").className = "card missed " + (t.missed ? "bad" : "good");
  $("#sub-duplicates").textContent = "of " + fmt(t.due) + " due · " + fmt(t.dispatched) + " dispatched";
  var tk = t.takeover_delays_s;
  $("#sub-missed").textContent = tk.length
    ? "takeover " + tk.map(function (x) { return x + " s"; }).join(", ")
    : (s.election === "off" ? "no lease: no takeover" : "no takeover");
  $("#sub-drain").textContent = fmt(t.drain_time_s) + " s · " + fmt(t.executed) + " executed";
}

export function renderSentence(r) {
  var el = $("#sentence"), s = r.scenario;
  el.textContent = r.sentence;
  el.className = "sentence" + (s.election === "off" ? " bad" : s.timers === "in-memory" ? " warn" : "");
}

export function renderAB(r) {
  var body = $("#ab-table tbody");
  body.textContent = "";
  if (!r.compare) return;
  var a = r.totals, b = r.compare.b.totals, rows = [
    ["Duplicate executions", "duplicates"], ["Missed triggers", "missed"],
    ["Queue backlog peak", "backlog_peak"], ["Drain time (s)", "drain_time_s"],
    ["Dispatched", "dispatched"], ["Executed", "executed"],
  ];
  rows.forEach(function (row) {
    var d = b[row[1]] - a[row[1]], tr = document.createElement("tr");
    [row[0], fmt(a[row[1]]), fmt(b[row[1]]), (d > 0 ? "+" : "") + fmt(d)].forEach(function (v, i) {
      var td = document.createElement(i ? "td" : "th");
      if (!i) td.scope = "row";
      td.textContent = v;
      if (i === 3 && d) td.className = d > 0 ? "up" : "down";
      tr.appendChild(td);
    });
    body.appendChild(tr);
  });
  $("#ab-sentence").textContent = "B (" + r.compare.changes.join(", ") + "): " + r.compare.b.sentence;
}

export function renderExplain(r) {
  var s = r.scenario, t = r.totals, cap = s.workers * s.rate;
  $("#x-dup").textContent = fmt(s.due) + " × (" + s.replicas + " − 1) = " + fmt(s.due * (s.replicas - 1));
  var tk = t.takeover_delays_s;
  $("#x-ttl").textContent = s.lease_ttl + " s" + (tk.length ? " (this run: " + tk.join(", ") + " s)" : "");
  $("#x-loss").textContent = s.timers === "durable"
    ? "PENDING rows are durable, so the new leader dispatches them: " + fmt(t.missed) + " missed."
    : "timers lived in the dead leader's memory: " + fmt(t.missed) + " missed in this run.";
  $("#x-drain").textContent = fmt(t.dispatched) + " / (" + s.workers + " × " + fmt(s.rate) + ") = " +
    fmt(Math.ceil(t.dispatched / cap)) + " s ≈ " + (t.dispatched / cap / 60).toFixed(1) + " min";
}

export function renderLog(r) {
  var ol = $("#event-log");
  ol.textContent = "";
  r.log.forEach(function (e) {
    var li = document.createElement("li"), tm = document.createElement("time"), k = document.createElement("span");
    var txt = document.createElement("span");
    tm.textContent = clock(e.t);
    k.className = "kind " + e.kind;
    k.textContent = e.kind === "acquire" ? "takeover" : e.kind;
    txt.textContent = e.text + (e.kind === "acquire" ? "" : "");
    li.dataset.t = e.t;
    li.append(tm, k, txt);
    ol.appendChild(li);
  });
  if (!r.log.length) ol.innerHTML = "<li><span></span><span></span><span>No events.</span></li>";
}
