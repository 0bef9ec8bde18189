/* The "three ways to run it" table: the real code in the simulator next to the model at the
   same scale, and the live engine's measured totals next to the model of the live run. */
import { $, fmt } from "./state.js";

export const ROWS = [
  ["due", "Due"], ["dispatched", "Dispatched"], ["executed", "Executed"],
  ["duplicates", "Duplicate executions"], ["missed", "Missed triggers"],
  ["fenced_writes", "Fenced writes"], ["redelivered", "Redelivered"], ["stuck", "Stuck"], ["late", "Late"],
  ["backlog_peak", "Queue backlog peak"], ["drain_time_s", "Drain time (s)"], ["takeover_delays_s", "Takeovers"],
];
export const COLUMNS = ["sim-model", "code", "live-model", "measured"];

export function buildRunsTable() {
  var body = $("#live-table tbody");
  if (body.children.length) return;
  ROWS.forEach(function (row) {
    var tr = document.createElement("tr"), th = document.createElement("th");
    th.scope = "row";
    th.textContent = row[1];
    tr.dataset.live = row[0];
    tr.appendChild(th);
    COLUMNS.forEach(function (c) {
      var td = document.createElement("td");
      td.dataset.col = c;
      td.textContent = "–";
      tr.appendChild(td);
    });
    body.appendChild(tr);
  });
}

/* Fill column `col` from `totals` (null: "–"); `marked` names the rows that disagree,
   `near` those that differ within tolerance. */
export function setColumn(col, totals, marked, near) {
  ROWS.forEach(function (row) {
    var td = document.querySelector('#live-table tr[data-live="' + row[0] + '"] td[data-col="' + col + '"]');
    td.textContent = show(totals ? totals[row[0]] : null);
    td.classList.toggle("disagree", !!(marked && marked.indexOf(row[0]) >= 0));
    td.classList.toggle("differs", !!(near && near.indexOf(row[0]) >= 0));
  });
}

export function setStale(cols, stale) {
  cols.forEach(function (c) {
    document.querySelectorAll('#live-table td[data-col="' + c + '"]').forEach(function (td) { td.classList.toggle("stale", stale); });
  });
}

export function show(v) {
  if (v == null) return "–";
  if (Array.isArray(v)) return v.length ? v.map(function (x) { return show(x) + " s"; }).join(", ") : "none";
  if (typeof v !== "number") return String(v);
  return Number.isInteger(v) ? fmt(v) : v.toFixed(1);
}
