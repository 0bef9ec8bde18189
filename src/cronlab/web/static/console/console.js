// The operator's console: one GET of /api/console renders everything; the controls POST to
// /api/schedules/NAME/ACTION and /api/tasks/ID/ACTION (JSON, with the token when the page was
// opened as /#token=…). The task panel shows one task (GET /api/tasks/ID): a run's, clicked.
(function () {
  "use strict";
  var OUTCOMES = ["ok", "noop", "error", "failed", "skipped", "missed", "due", "queued"];
  var REFRESH_MS = 5000;
  var DELIVERY = { none: "no webhook", pending: "sending", delivered: "delivered",
    undeliverable: "webhook gave up" };
  var state = { data: null, chart: null, q: "", page: 0, pending: null, timer: null, typing: null };
  var api = (window.cronlabConsole = { loads: 0, rendered: 0, reload: load, marks: {} });

  function token() {
    var m = /token=([^&]+)/.exec(location.hash);
    if (m) {
      sessionStorage.setItem("cronlab-console-token", decodeURIComponent(m[1]));
      history.replaceState(null, "", location.pathname);
    }
    return sessionStorage.getItem("cronlab-console-token");
  }
  var TOKEN = token();

  function headers(json) {
    var h = {};
    if (TOKEN) h["X-Cronlab-Token"] = TOKEN;
    if (json) h["Content-Type"] = "application/json";
    return h;
  }

  function esc(text) {
    return String(text).replace(/[&<>"']/g, function (c) {
      return { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" }[c];
    });
  }

  function $(id) { return document.getElementById(id); }
  // (toLocaleString builds an Intl formatter per call: a page of runs makes a thousand calls)
  function num(n) { return String(n).replace(/\B(?=(\d{3})+(?!\d))/g, ","); }
  function utc(ms) { return new Date(ms).toISOString().replace(".000Z", "Z"); }
  function ago(ms, now) {
    var s = Math.max(0, Math.round((now - ms) / 1000));
    return s < 120 ? s + " s ago" : Math.round(s / 60) + " min ago";
  }
  function secs(ms) { return ms % 60000 === 0 ? ms / 60000 + " min" : ms / 1000 + " s"; }

  function load() {
    clearTimeout(state.timer);
    var query = "?page=" + state.page + (state.q ? "&q=" + encodeURIComponent(state.q) : "");
    // (credentials and mode as the page's <link rel=preload>, so the first load reuses it)
    var init = { headers: headers(false), credentials: "include", mode: "cors" };
    return fetch("/api/console" + query, init)
      .then(function (res) {
        return res.json().then(function (body) { return { ok: res.ok, body: body }; });
      })
      .then(function (r) {
        if (!r.ok) return problem(r.body.error || "the console's API refused");
        $("problem").hidden = true;
        state.data = r.body;
        render(r.body);
      })
      .catch(function (e) { problem("cannot reach the console: " + e); })
      .then(function () { state.timer = setTimeout(load, REFRESH_MS); });
  }

  function problem(text) {
    $("problem").textContent = text;
    $("problem").hidden = false;
  }

  function render(d) {
    $("store").textContent = d.store;
    $("updated").textContent = "updated " + utc(d.now_ms);
    var t = performance.now();
    [cards, processes, alerts, schedules, chart].forEach(function (part) {
      part(d);
      var now = performance.now();
      api.marks[part.name] = now - t;
      t = now;
    });
    document.body.offsetHeight;  // layout now: "rendered" means laid out
    api.marks.layout = performance.now() - t;
    api.loads += 1;
    api.rendered = performance.now();
    document.body.setAttribute("data-loaded", String(api.loads));
  }

  function cards(d) {
    var lead = d.leader;
    $("leader").innerHTML = lead
      ? esc(lead.holder.split("@")[0]) + " <small>epoch " + lead.epoch + " · lease " +
        Math.max(0, Math.round((lead.expires_ms - d.now_ms) / 1000)) + " s</small>"
      : "none <small>no replica holds the lease</small>";
    $("queue").textContent = num(d.queue_depth);
    $("due").textContent = num(d.pending_due);
    $("counts").innerHTML = num(d.total) + " <small>" + num(d.paused) + " paused</small>";
  }

  /* A later fire: its time, with its date when it falls on another day than the one before
     (a monthly schedule's fires read 01-01 00:00 02-01 00:00 …, not 00:00 00:00). */
  function later(f, before) {
    var time = f.slice(11, 16);
    if (f.slice(0, 10) === before.slice(0, 10)) return time;
    return (f.slice(0, 4) === before.slice(0, 4) ? f.slice(5, 10) : f.slice(0, 10)) + " " + time;
  }

  function processes(d) {
    $("processes").tBodies[0].innerHTML = d.processes.map(function (p) {
      var host = p.owner.split("@")[1] || "";
      var beat = p.heartbeat_ms === null ? "never" : ago(p.heartbeat_ms, d.now_ms);
      var live = p.alive ? '<span class="alive">alive</span>'
        : '<span class="dead">' + (p.exited_ms ? "exited" : "silent") + "</span>";
      var leader = d.leader && d.leader.holder === p.owner ? ' <span class="badge">leader</span>' : "";
      return "<tr data-process=\"" + esc(p.role + "-" + p.index) + "\"><td>" + esc(p.role) + leader +
        "</td><td>" + p.index + "</td><td>" + p.pid + "</td><td>" + esc(host.split(":")[0]) +
        "</td><td>" + beat + "</td><td>" + live + "</td></tr>";
    }).join("") || '<tr><td colspan="6" class="muted">no process has registered</td></tr>';
    if (d.processes_gone) {
      $("processes").tBodies[0].innerHTML += '<tr class="gone"><td colspan="6" class="muted">and ' +
        num(d.processes_gone) + " not heard of for over an hour (not listed)</td></tr>";
    }
  }

  function alerts(d) {
    $("alerts").innerHTML = d.alerts.map(function (a) {
      return '<li class="' + esc(a.kind) + '">' + utc(a.raised_ms) + " · " + esc(a.message) +
        ' <span class="muted">(' + esc(DELIVERY[a.delivery] || a.delivery) + ")</span></li>";
    }).join("") || '<li class="muted">none</li>';
  }

  function runCell(r) {
    var outcome = OUTCOMES[r[1]];
    var tip = utc(r[0]) + " " + outcome + (r[4] ? " · attempt " + r[4] : "") +
      (r[2] === null ? "" : " · late " + num(r[2]) + " ms") +
      (r[3] === null ? "" : " · took " + num(r[3]) + " ms") + (r[5] ? " · " + r[5] : "");
    return '<span class="run o-' + r[1] + '" data-outcome="' + outcome + '" data-task="' + r[6] +
      '" title="' + esc(tip + " · task " + r[6]) + '"></span>';
  }

  function row(s) {
    var name = esc(s.name);
    var state = s.paused ? '<span class="badge">paused</span>' : "";
    var note = s.note ? '<div class="note">' + esc(s.note) + "</div>" : "";
    var fires = s.next.length
      ? "<b>" + esc(s.next[0].replace("T", " ")) + "</b> " +
        s.next.slice(1).map(function (f, i) { return esc(later(f, s.next[i])); }).join(" ")
      : "—";
    var runs = s.runs.slice().reverse().map(runCell).join("");
    var alertsSet = (s.alert_after_ms ? "late > " + secs(s.alert_after_ms) : "") +
      (s.alert_on_failures ? (s.alert_after_ms ? " · " : "") + s.alert_on_failures + " failures" : "");
    var toggle = s.paused
      ? '<button type="button" data-action="resume">resume</button>'
      : '<button type="button" data-action="pause">pause</button>';
    return '<tr data-schedule="' + name + '"' + (s.paused ? ' class="paused"' : "") + ">" +
      '<td><span class="name">' + name + "</span>" + state + note +
      '<div class="muted">' + esc(s.task) + "</div></td>" +
      "<td><code>" + esc(s.cron) + "</code> " + esc(s.tz) +
      '<div class="muted">' + esc(s.overlap === "skip" ? "no overlap" : "overlap") +
      (alertsSet ? " · alert " + esc(alertsSet) : "") + "</div></td>" +
      '<td class="fires" data-next="' + s.next.length + '">' + fires + "</td>" +
      '<td class="runs" data-runs="' + s.runs.length + '">' + runs + "</td>" +
      '<td data-missed="' + s.missed + '">' + num(s.missed) + " · " + num(s.skipped) + "</td>" +
      "<td>" + toggle + ' <button type="button" data-action="trigger">trigger</button>' +
      ' <button type="button" data-action="backfill">backfill</button></td></tr>';
  }

  function schedules(d) {
    state.page = d.page;
    $("schedules").tBodies[0].innerHTML = d.schedules.map(row).join("") ||
      '<tr><td colspan="6" class="muted">no schedules</td></tr>';
    $("page-of").textContent = "page " + (d.page + 1) + " of " + d.pages + " · " +
      num(d.matching) + (state.q ? " matching" : " schedules");
  }

  function chart(d) {
    var l = d.lateness;
    var secs = function (ms) { return ms / 1000; };
    var data = [l.minute, l.mean_ms.map(secs), l.max_ms.map(secs)];
    if (state.chart) {
      state.chart.setData(data);
      return;
    }
    var width = Math.max(300, $("chart").clientWidth || 600);
    state.chart = new uPlot({
      width: width,
      height: 200,
      series: [
        {},
        { label: "mean s", stroke: "#58a6ff", width: 2 },
        { label: "max s", stroke: "#f0883e", width: 1, dash: [4, 3] },
      ],
      axes: [
        { stroke: "#8a96ad", grid: { stroke: "#263049" } },
        { stroke: "#8a96ad", grid: { stroke: "#263049" }, size: 60 },
      ],
    }, data, $("chart"));
  }

  function post(name, action, body) {
    return fetch("/api/schedules/" + encodeURIComponent(name) + "/" + action, {
      method: "POST", headers: headers(true), body: JSON.stringify(body || {}),
    }).then(function (res) {
      return res.json().then(function (out) {
        toast(res.ok ? said(action, name, out) : out.error, !res.ok);
        return load();
      });
    });
  }

  function said(action, name, out) {
    if (action === "backfill") return "backfilled " + name + ": " + out.added + " added, " + out.existing + " already there";
    if (action === "trigger") return "triggered " + name;
    return (action === "pause" ? "paused " : "resumed ") + name;
  }

  function toast(text, bad) {
    var t = $("toast");
    t.textContent = text;
    t.className = bad ? "toast bad" : "toast";
    t.hidden = false;
    clearTimeout(t._timer);
    t._timer = setTimeout(function () { t.hidden = true; }, 4000);
  }

  function task(id) {
    var init = { headers: headers(false) };
    return fetch("/api/tasks/" + encodeURIComponent(id), init).then(function (res) {
      return res.json().then(function (t) {
        if (!res.ok) return toast(t.error, true);
        $("task-id").value = String(t.id);
        showTask(t);
      });
    });
  }

  function showTask(t) {
    var box = $("task");
    var acts = (t.status === "PENDING" || t.status === "DISPATCHED")
      ? '<button type="button" data-task-action="cancel">cancel task</button>'
      : t.status === "FAILED" ? '<button type="button" data-task-action="retry">retry now</button>' : "";
    box.setAttribute("data-task-id", String(t.id));
    box.setAttribute("data-status", t.status);
    box.className = "task";
    box.innerHTML = '<span class="status">' + esc(t.status) + "</span><span>task " + t.id +
      " · <code>" + esc(t.key) + "</code></span><span>" + esc(t.task) +
      (t.schedule ? " · schedule " + esc(t.schedule) : "") + "</span><span>occurrence " +
      utc(t.occurrence_ms) + " · attempts " + t.attempts + "</span>" +
      (t.last_error ? '<span class="error">' + esc(t.last_error) + "</span>" : "") + acts;
  }

  function postTask(id, action) {
    return fetch("/api/tasks/" + encodeURIComponent(id) + "/" + action, {
      method: "POST", headers: headers(true), body: "{}",
    }).then(function (res) {
      return res.json().then(function (t) {
        if (!res.ok) return toast(t.error, true);
        toast(action === "cancel" ? "cancelled task " + t.id + ": skipped, reason cancelled"
          : "retrying task " + t.id + ": attempt " + (t.attempts + 1) + " queued");
        showTask(t);
        return load();
      });
    });
  }

  function askTask(action, id) {
    if (action === "retry") { postTask(id, "retry"); return; }
    state.pending = { action: "cancel-task", name: id };
    $("dialog-title").textContent = "Cancel task " + id + "? It will not run (skipped, reason cancelled).";
    $("note-field").hidden = $("from-field").hidden = $("to-field").hidden = true;
    $("dialog").hidden = false;
  }

  function ask(action, name) {
    state.pending = { action: action, name: name };
    $("dialog-title").textContent = (action === "pause" ? "Pause " : "Backfill ") + name;
    $("note-field").hidden = action !== "pause";
    $("from-field").hidden = $("to-field").hidden = action !== "backfill";
    if (action === "backfill" && !$("from").value) {
      var hour = Math.floor(Date.now() / 3600000) * 3600000;
      $("from").value = utc(hour - 3600000);
      $("to").value = utc(hour);
    }
    $("dialog").hidden = false;
    (action === "pause" ? $("note") : $("from")).focus();
  }

  function confirm() {
    var p = state.pending;
    $("dialog").hidden = true;
    if (!p) return;
    state.pending = null;
    if (p.action === "cancel-task") postTask(p.name, "cancel");
    else if (p.action === "pause") post(p.name, "pause", $("note").value ? { note: $("note").value } : {});
    else post(p.name, "backfill", { from: $("from").value.trim(), to: $("to").value.trim() });
    $("note").value = "";
  }

  document.addEventListener("click", function (e) {
    var turn = e.target.closest("button[data-page]");
    if (turn && state.data) {
      var next = state.page + Number(turn.getAttribute("data-page"));
      if (next >= 0 && next < state.data.pages) { state.page = next; load(); }
      return;
    }
    var run = e.target.closest(".run[data-task]");
    if (run) { task(run.getAttribute("data-task")); return; }
    var onTask = e.target.closest("button[data-task-action]");
    if (onTask) {
      var which = onTask.getAttribute("data-task-action");
      if (which === "show") task($("task-id").value.trim() || "0");
      else askTask(which, $("task").getAttribute("data-task-id"));
      return;
    }
    var button = e.target.closest("button[data-action]");
    if (!button) return;
    var action = button.getAttribute("data-action");
    if (action === "cancel") { $("dialog").hidden = true; state.pending = null; return; }
    if (action === "confirm") { confirm(); return; }
    var tr = button.closest("tr[data-schedule]");
    if (!tr) return;
    var name = tr.getAttribute("data-schedule");
    if (action === "pause" || action === "backfill") ask(action, name);
    else post(name, action);
  });
  document.addEventListener("keydown", function (e) {
    if (e.key === "Enter" && e.target.id === "task-id") { task(e.target.value.trim() || "0"); return; }
    if ($("dialog").hidden) return;
    if (e.key === "Escape") { $("dialog").hidden = true; state.pending = null; }
    if (e.key === "Enter") confirm();
  });
  $("filter").addEventListener("input", function (e) {
    clearTimeout(state.typing);
    state.typing = setTimeout(function () {
      state.q = e.target.value.trim();
      state.page = 0;
      load();
    }, 200);
  });

  load();
})();
