/* The result as text: metric cards, the sentence, the A/B table and the event log. */
import { $, fmt } from "./state.js";
import { clock } from "./timeline.js";
import { renderVerdict } from "./verdict.js";

export const FAULT_TOTALS = ["fenced_writes", "redelivered", "stuck", "late"];
const KIND_LABEL = {
  acquire: "takeover", worker_crash: "pod crash", worker_restart: "pod back", lose: "lost",
};

function setMetric(name, text) {
  var el = document.querySelector('[data-metric="' + name + '"]');
  el.textContent = text;
  /* Billions must still fit the card: shrink long numbers instead of clipping them. */
  if (el.parentNode.classList.contains("value")) {
    el.parentNode.className = "value" + (text.length > 11 ? " longer" : text.length > 9 ? " long" : "");
  }
}

function minutes(s) {
  return (s / 60).toLocaleString("en-US", { minimumFractionDigits: 1, maximumFractionDigits: 1 });
}

/* Where the duplicates came from, when a fault made them (the log says how many). */
function dupSources(r) {
  var zombie = 0;
  r.log.forEach(function (e) { if (e.kind === "zombie") zombie += e.count; });
  var out = [];
  if (zombie) out.push(fmt(zombie) + " from a zombie");
  if (r.scenario.effects === "external" && r.totals.redelivered) out.push(fmt(r.totals.redelivered) + " redelivered, sent again");
  return out.length ? " · " + out.join(" · ") : "";
}

export function renderCards(r) {
  var t = r.totals, s = r.scenario;
  setMetric("duplicates", fmt(t.duplicates));
  setMetric("missed", fmt(t.missed));
  setMetric("backlog", fmt(t.backlog_peak));
  setMetric("drain", minutes(t.drain_time_s));
  $(".card.dup").className = "card dup " + (t.duplicates ? "bad" : "good");
  $(".card.missed").className = "card missed " + (t.missed || t.stuck ? "bad" : "good");
  $("#sub-duplicates").textContent = "of " + fmt(t.due) + " due · " + fmt(t.dispatched) + " dispatched" + dupSources(r);
  var tk = t.takeover_delays_s;
  $("#sub-missed").textContent = (tk.length
    ? "takeover " + tk.map(function (x) { return x + " s"; }).join(", ")
    : (s.election === "off" ? "no lease: no takeover" : "no takeover")) + (t.stuck ? " · " + fmt(t.stuck) + " stuck" : "");
  $("#sub-drain").textContent = fmt(t.drain_time_s) + " s · " + fmt(t.executed) + " executed";
  FAULT_TOTALS.forEach(function (k) {
    setMetric(k, fmt(t[k]));
    document.querySelector('[data-chip="' + k + '"]').classList.toggle("hit", t[k] > 0);
  });
  renderVerdict($("#verdict-model"), r.verdict, "Model verdict");
  renderVerdict($("#verdict-model-run"), r.verdict, "Model (this page's scenario)");
}

/* The sentence for a mode, with the run's own numbers: the server's sentence states the
   formula with every replica up (due × (replicas − 1)); a crash makes fewer dispatchers. */
export function sentenceOf(s, t, said) {
  if (s.election !== "off") return said;
  var formula = s.due * (s.replicas - 1), tail = s.timers === "in-memory" ? ", and a trigger due while none is up is lost" : "";
  var how = t.duplicates === formula
    ? " = due × (replicas − 1)"
    : " in this run (due × (replicas − 1) = " + fmt(formula) + " only with every replica up all along)";
  return "no election: every replica dispatches its own copy — " + fmt(t.duplicates) + " duplicates" + how + tail + ".";
}

export function renderSentence(r) {
  var el = $("#sentence"), s = r.scenario;
  /* The mode's sentence, then what each production fault did, in the model's words. */
  var mode = s.election === "off" || s.timers === "in-memory" || !(r.faults || []).length;
  el.textContent = (mode ? [sentenceOf(s, r.totals, r.sentence)] : []).concat(r.faults || []).join(" ");
  el.className = "sentence" + (s.election === "off" || !r.verdict.ok ? " bad" : s.timers === "in-memory" ? " warn" : "");
}

const AB_ROWS = [
  ["Duplicate executions", "duplicates"], ["Missed triggers", "missed"],
  ["Queue backlog peak", "backlog_peak"], ["Drain time (s)", "drain_time_s"],
  ["Dispatched", "dispatched"], ["Executed", "executed"], ["Fenced writes", "fenced_writes"],
  ["Redelivered", "redelivered"], ["Stuck", "stuck"], ["Late", "late"],
];

function abRow(label, a, b) {
  var d = b - a, tr = document.createElement("tr");
  [label, fmt(a), fmt(b), (d > 0 ? "+" : "") + fmt(d)].forEach(function (v, i) {
    var td = document.createElement(i ? "td" : "th");
    if (!i) td.scope = "row";
    td.textContent = v;
    if (i === 3 && d) td.className = d > 0 ? "up" : "down";
    tr.appendChild(td);
  });
  return tr;
}

export function renderAB(r) {
  var body = $("#ab-table tbody");
  body.textContent = "";
  if (!r.compare) { $("#ab-sentence").textContent = ""; return; }
  var a = r.totals, b = r.compare.b.totals;
  AB_ROWS.forEach(function (row) {
    /* Rows that are 0 on both sides only when no such fault is in play: keep the table short. */
    if (row[1] in a && (a[row[1]] || b[row[1]] || AB_ROWS.indexOf(row) < 6)) body.appendChild(abRow(row[0], a[row[1]], b[row[1]]));
  });
  /* Every number in the sentence is B's own total, the same as the table's B column. */
  var bs = r.compare.b;
  $("#ab-sentence").textContent = "B (" + r.compare.changes.join(", ") + "): " + fmt(b.duplicates) +
    " duplicate executions, " + fmt(b.missed) + " missed, drain " + minutes(b.drain_time_s) + " min — " +
    sentenceOf(bs.scenario, b, bs.sentence);
}

export function renderLog(r) {
  var ol = $("#event-log");
  ol.textContent = "";
  r.log.forEach(function (e) {
    var li = document.createElement("li"), tm = document.createElement("time"), k = document.createElement("span");
    var txt = document.createElement("span");
    tm.textContent = clock(e.t);
    k.className = "kind " + e.kind;
    k.textContent = KIND_LABEL[e.kind] || e.kind;
    txt.textContent = e.text;
    li.dataset.t = e.t;
    li.append(tm, k, txt);
    ol.appendChild(li);
  });
  if (!r.log.length) ol.innerHTML = "<li><span></span><span></span><span>No events.</span></li>";
}
