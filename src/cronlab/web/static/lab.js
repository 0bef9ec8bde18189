/* cronlab lab: the page. Every change asks /api/simulate (the model, exact) and redraws.
   Playback walks the model's run-length timeline; particles are a sample, never one per task. */
(function () {
  "use strict";

  var DEFAULTS = {
    preset: "midnight", tasks: "1000000", minutes: "60", election: "lease", replicas: "3",
    ttl: "10", timers: "durable", "restart-after": "300", workers: "5", rate: "200",
  };
  var NEXT_B = {
    election: function (s) { return s.election === "off" ? "lease" : "off"; },
    timers: function (s) { return s.timers === "durable" ? "in-memory" : "durable"; },
    replicas: function (s) { return String(Number(s.replicas) + 2); },
    workers: function (s) { return String(Number(s.workers) * 2); },
    rate: function (s) { return String(Number(s.rate) * 2); },
    "lease-ttl": function () { return "30"; },
    "restart-after": function () { return "never"; },
    crash: function () { return "leader@0"; },
  };
  var $ = function (sel) { return document.querySelector(sel); };
  var fmt = function (n) { return Math.round(n).toLocaleString("en-US"); };
  var pad = function (n) { return String(n).padStart(2, "0"); };

  var state = {
    scenario: Object.assign({}, DEFAULTS), crashes: [], compare: "election=off",
    result: null, derived: null, t: 0, playing: false, speed: 60, changeAt: 0, spawned: -1,
    inflight: null, token: "", live: null, source: null, liveNote: "",
  };
  window.cronlabLab = { state: state, recomputes: 0, lastRecomputeMs: null };

  /* ---------- time and timeline ---------- */

  function clock(s) {
    s = Math.max(0, Math.floor(s));
    var h = Math.floor(s / 3600), m = Math.floor((s % 3600) / 60), sec = s % 60;
    return (h ? h + ":" + pad(m) : pad(m)) + ":" + pad(sec);
  }

  function derive(r) {
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
  function upto(d, key, t) {
    if (t < 0 || !d.tl.t.length) return 0;
    var i = runAt(d, t), k = Math.min(t - d.tl.t[i] + 1, d.tl.n[i]);
    return d.prefix[key][i] + d.tl[key][i] * k;
  }

  function at(d, t) {
    var i = runAt(d, Math.min(t, d.end - 1)), tl = d.tl;
    var k = Math.min(t, d.end - 1) - tl.t[i];
    return {
      backlog: tl.backlog[i] + tl.backlog_step[i] * k,
      executed: t < d.end ? tl.executed[i] : 0,
      leader: tl.leader[i],
    };
  }

  /* ---------- controls, URL ---------- */

  function readURL() {
    var q = new URLSearchParams(location.search);
    Object.keys(DEFAULTS).forEach(function (k) {
      var v = q.get(k) || (k === "ttl" && q.get("lease-ttl"));
      if (v) state.scenario[k] = v;
    });
    state.crashes = q.getAll("crash");
    if (q.get("compare")) state.compare = q.get("compare");
    readToken();
  }

  /* The token rides in the fragment: never sent to the server in the URL, never in shared links. */
  function readToken() {
    var m = /token=([^&]+)/.exec(location.hash);
    state.token = m ? decodeURIComponent(m[1]) : "";
  }

  function query(withCompare) {
    var q = new URLSearchParams();
    Object.keys(DEFAULTS).forEach(function (k) {
      if (state.scenario[k] !== DEFAULTS[k]) q.set(k, state.scenario[k]);
    });
    state.crashes.forEach(function (c) { q.append("crash", c); });
    if (withCompare && state.compare) q.set("compare", state.compare);
    return q;
  }

  function writeURL() {
    var q = query(false);
    if (state.compare !== "election=off") q.set("compare", state.compare);
    var s = q.toString();
    history.replaceState(null, "", location.pathname + (s ? "?" + s : "") + location.hash);
  }

  function syncForm() {
    var s = state.scenario;
    $("#c-preset").value = s.preset;
    $("#c-tasks").value = s.tasks;
    $("#c-minutes").value = s.minutes;
    $("#minutes-row").hidden = s.preset === "midnight";
    $("#tasks-label").textContent = s.preset === "steady" ? "Tasks due per minute" : "Tasks due";
    $("#c-election").checked = s.election === "lease";
    $("#c-replicas").value = s.replicas;
    $("#c-ttl").value = s.ttl;
    $("#c-timers").value = s.timers;
    $("#c-restart").value = s["restart-after"];
    $("#c-workers").value = s.workers;
    $("#c-rate").value = s.rate;
    $("#o-replicas").textContent = s.replicas;
    $("#o-ttl").textContent = s.ttl + " s";
    $("#o-workers").textContent = s.workers;
    var kv = state.compare.split("=");
    $("#c-ab-key").value = kv[0];
    $("#c-ab-value").value = kv.slice(1).join("=");
    syncCrashes();
  }

  function syncCrashes() {
    var list = $("#crash-list");
    list.textContent = "";
    state.crashes.forEach(function (c, i) {
      var li = document.createElement("li"), b = document.createElement("button");
      li.textContent = "crash " + c;
      b.type = "button";
      b.textContent = "✕";
      b.setAttribute("aria-label", "Remove crash " + c);
      b.addEventListener("click", function () { state.crashes.splice(i, 1); changed(); });
      li.appendChild(b);
      list.appendChild(li);
    });
    var sel = $("#c-crash-replica"), n = Number(state.scenario.replicas), keep = sel.value;
    sel.textContent = "";
    for (var r = 0; r < n; r++) {
      var o = document.createElement("option");
      o.value = String(r);
      o.textContent = "replica " + r;
      sel.appendChild(o);
    }
    if (keep && Number(keep) < n) sel.value = keep;
  }

  function readForm(e) {
    var s = state.scenario, id = e && e.target && e.target.id;
    s.preset = $("#c-preset").value;
    s.tasks = $("#c-tasks").value || "0";
    s.minutes = $("#c-minutes").value || "1";
    s.election = $("#c-election").checked ? "lease" : "off";
    s.replicas = $("#c-replicas").value;
    s.ttl = $("#c-ttl").value;
    s.timers = $("#c-timers").value;
    s["restart-after"] = $("#c-restart").value;
    s.workers = $("#c-workers").value;
    s.rate = $("#c-rate").value || "1";
    /* Fewer replicas: a crash of one that no longer exists would only be a 422. */
    state.crashes = state.crashes.filter(function (c) {
      var m = /^replica:(\d+)@/.exec(c);
      return !m || Number(m[1]) < Number(s.replicas);
    });
    if (id === "c-ab-key") $("#c-ab-value").value = NEXT_B[$("#c-ab-key").value](s);
    state.compare = $("#c-ab-key").value + "=" + $("#c-ab-value").value.trim();
  }

  var urlTimer = null;
  function changed(e) {
    state.changeAt = performance.now();
    if (e) readForm(e);
    syncForm();
    recompute();
    /* history.replaceState costs Chromium 5–15 ms: write the URL once the redraw is done. */
    clearTimeout(urlTimer);
    urlTimer = setTimeout(writeURL, 120);
  }

  /* ---------- the model ---------- */

  function recompute() {
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
    buildDiagram(r);
    frame(true);
    /* From the change event to everything redrawn (cards, charts, diagram). */
    var ms = performance.now() - started, api = window.cronlabLab;
    api.recomputes += 1;
    api.lastRecomputeMs = ms;
    $("#perf").textContent = "recomputed in " + ms.toFixed(0) + " ms";
  }

  function setMetric(name, text) {
    var el = document.querySelector('[data-metric="' + name + '"]');
    el.textContent = text;
    /* Billions must still fit the card: shrink long numbers instead of clipping them. */
    el.parentNode.className = "value" + (text.length > 11 ? " longer" : text.length > 9 ? " long" : "");
  }

  function renderCards(r) {
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

  function renderSentence(r) {
    var el = $("#sentence"), s = r.scenario;
    el.textContent = r.sentence;
    el.className = "sentence" + (s.election === "off" ? " bad" : s.timers === "in-memory" ? " warn" : "");
  }

  function renderAB(r) {
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

  function renderExplain(r) {
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

  function renderLog(r) {
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

  /* ---------- charts (uPlot) ---------- */

  var charts = {};

  function markers(u) {
    var r = state.result;
    if (!r) return;
    var ctx = u.ctx, top = u.bbox.top, h = u.bbox.height;
    ctx.save();
    ctx.font = (11 * devicePixelRatio) + "px system-ui, sans-serif";
    ctx.textAlign = "left";
    ctx.textBaseline = "top";
    r.log.forEach(function (e) {
      if (e.kind !== "crash" && e.kind !== "acquire" && e.kind !== "missed") return;
      var x = Math.round(u.valToPos(e.t / 60, "x", true));
      ctx.strokeStyle = ctx.fillStyle = e.kind === "acquire" ? "#1c8c61" : e.kind === "crash" ? "#c93c3c" : "#b7791f";
      ctx.setLineDash(e.kind === "crash" ? [5, 4] : []);
      ctx.lineWidth = devicePixelRatio * 1.5;
      ctx.beginPath(); ctx.moveTo(x, top); ctx.lineTo(x, top + h); ctx.stroke();
      var label = e.kind === "crash" ? "crash r" + e.replica : e.kind === "acquire" ? "takeover r" + e.replica : "missed";
      ctx.fillText(label, x + 4 * devicePixelRatio, top + devicePixelRatio * (e.kind === "acquire" ? 16 : 3));
    });
    ctx.restore();
  }

  function chartOpts(el, series, yFmt, extra) {
    return Object.assign({
      width: Math.max(300, el.clientWidth), height: 210,
      scales: { x: { time: false, range: function (u, lo, hi) { return [0, Math.max(hi, 1)]; } } },
      axes: [
        { label: "minute", size: 36, labelSize: 16, font: "11px system-ui", labelFont: "11px system-ui" },
        { size: 62, font: "11px system-ui", values: function (u, vals) { return vals.map(yFmt); } },
      ],
      cursor: { drag: { x: false, y: false } },
      legend: { live: true },
      series: series,
      hooks: { draw: [markers] },
    }, extra || {});
  }

  function short(v) {
    if (v == null) return "";
    var a = Math.abs(v);
    return a >= 1e9 ? (v / 1e9).toFixed(1) + "B" : a >= 1e6 ? (v / 1e6).toFixed(1) + "M" : a >= 1e3 ? (v / 1e3).toFixed(0) + "k" : String(v);
  }

  function backlogData(r) {
    var tl = r.timeline, xs = [], ys = [];
    for (var i = 0; i < tl.t.length; i++) {
      xs.push(tl.t[i] / 60); ys.push(tl.backlog[i]);
      if (tl.n[i] > 1) {
        var last = tl.t[i] + tl.n[i] - 1;
        xs.push(last / 60); ys.push(tl.backlog[i] + tl.backlog_step[i] * (tl.n[i] - 1));
      }
    }
    return [xs, ys];
  }

  function renderCharts(r) {
    if (typeof uPlot === "undefined") return;
    var pm = r.per_minute;
    var flow = [pm.minute.map(function (m) { return m + 0.5; }), pm.dispatched, pm.executed];
    var bars = uPlot.paths.bars;
    var minute = { label: "minute", value: function (u, v) { return v == null ? "–" : v.toFixed(1); } };
    draw("backlog", backlogData(r), [
      minute, { label: "backlog", stroke: "#2d6cdf", fill: "rgba(45,108,223,.12)", width: 2, points: { show: false }, value: function (u, v) { return v == null ? "–" : fmt(v); } },
    ]);
    draw("flow", flow, [
      { label: "minute", value: function (u, v) { return v == null ? "–" : "min " + pad(Math.floor(v)); } },
      { label: "dispatched", stroke: "#c93c3c", fill: "rgba(201,60,60,.28)", paths: bars({ size: [0.9, 60] }), points: { show: false }, value: function (u, v) { return v == null ? "–" : fmt(v); } },
      { label: "executed", stroke: "#1c8c61", fill: "rgba(28,140,97,.55)", paths: bars({ size: [0.45, 30] }), points: { show: false }, value: function (u, v) { return v == null ? "–" : fmt(v); } },
    ]);
  }

  function draw(name, data, series) {
    var el = $("#chart-" + name), old = charts[name];
    if (old && old.series.length === series.length) {
      old.setData(data);
      return;
    }
    if (old) old.destroy();
    charts[name] = new uPlot(chartOpts(el, series, short), data, el);
    var cur = document.createElement("div");
    cur.className = "cursor";
    charts[name].over.appendChild(cur);
  }

  function moveCursors() {
    Object.keys(charts).forEach(function (k) {
      var u = charts[k], cur = u.over.querySelector(".cursor");
      if (cur) cur.style.left = u.valToPos(state.t / 60, "x") + "px";
    });
  }

  function resizeCharts() {
    Object.keys(charts).forEach(function (k) {
      var el = $("#chart-" + k);
      charts[k].setSize({ width: Math.max(300, el.clientWidth), height: 210 });
    });
  }

  /* ---------- diagram ---------- */

  var boxes = { replicas: [], pods: [] };

  function buildDiagram(r) {
    var s = r.scenario, wrap = $("#replicas"), pods = $("#pods");
    wrap.textContent = "";
    wrap.classList.toggle("many", s.replicas > 4);
    boxes.replicas = [];
    for (var i = 0; i < s.replicas; i++) {
      var el = document.createElement("div");
      el.className = "replica";
      el.innerHTML = '<span class="name">replica ' + i + '</span><span class="role"></span><span class="detail"></span><div class="ttl"><div></div></div>';
      wrap.appendChild(el);
      boxes.replicas.push(el);
    }
    var shown = Math.min(s.workers, 60);
    pods.textContent = "";
    pods.classList.toggle("dense", s.workers > 15);
    boxes.pods = [];
    for (var p = 0; p < shown; p++) {
      var pod = document.createElement("div");
      pod.className = "pod";
      pod.title = "pod " + p;
      pod.appendChild(document.createElement("div"));
      pods.appendChild(pod);
      boxes.pods.push(pod);
    }
    $("#pods-label").textContent = s.workers + " pods × " + fmt(s.rate) + "/s = " + fmt(s.workers * s.rate) + " tasks/s" +
      (s.workers > shown ? " (" + shown + " drawn)" : "");
    var b = $("#due-buckets"), counts = s.buckets.map(function (x) { return x[1]; });
    var max = Math.max.apply(null, counts.concat([1]));
    b.textContent = "";
    s.buckets.slice(0, 120).forEach(function (x) {
      var bar = document.createElement("i");
      bar.style.height = Math.max(4, (x[1] / max) * 100) + "%";
      bar.dataset.minute = x[0];
      b.appendChild(bar);
    });
    $("#due-label").textContent = s.timers === "durable" ? "PENDING rows in the store" : "timers armed in memory";
    $("#c-scrub").max = String(state.derived.end - 1);
  }

  /* Control-plane state at second t, replayed from the model's event log. */
  function plane(r, t) {
    var n = r.scenario.replicas, alive = [], epoch = 1, freeAt = null;
    for (var i = 0; i < n; i++) alive.push(true);
    r.log.forEach(function (e) {
      if (e.t > t) return;
      epoch = e.epoch;
      if (e.kind === "crash") { alive[e.replica] = false; if (/^leader/.test(e.text)) freeAt = e.t + r.scenario.lease_ttl; }
      if (e.kind === "restart") alive[e.replica] = true;
      if (e.kind === "acquire") freeAt = null;
    });
    return { alive: alive, epoch: epoch, freeAt: freeAt };
  }

  function renderDiagram(t) {
    var r = state.result, d = state.derived, s = r.scenario, now = at(d, t), cp = plane(r, t);
    var lease = s.election === "lease";
    boxes.replicas.forEach(function (el, i) {
      var up = cp.alive[i], leader = lease && now.leader === i, role, detail, ttl = 0;
      if (!up) { role = "crashed"; detail = "down" + restartNote(r, i, t); }
      else if (!lease) { role = "dispatcher"; detail = "no lease: dispatches on its own"; }
      else if (leader) { role = "leader"; detail = "holds lease · epoch " + cp.epoch + " · TTL " + s.lease_ttl + " s"; ttl = 1; }
      else {
        role = "standby";
        detail = cp.freeAt != null ? "lease free in " + Math.max(0, cp.freeAt - t) + " s" : "standby · watching the lease";
      }
      if (lease && !up && cp.freeAt != null && i === crashedLeader(r, t)) {
        ttl = Math.max(0, cp.freeAt - t) / s.lease_ttl;
        detail = "lease expires in " + Math.max(0, cp.freeAt - t) + " s (epoch " + cp.epoch + ")";
      }
      el.className = "replica " + role;
      el.children[1].textContent = role;
      el.children[2].textContent = detail;
      el.children[3].firstChild.style.width = (ttl * 100) + "%";
    });
    var due = upto(d, "dispatched", t) - upto(d, "duplicates", t) + upto(d, "missed", t);
    var triggered = 0;
    s.buckets.forEach(function (b) { if (b[0] * 60 <= t) triggered += b[1]; });
    $("#due-pending").textContent = fmt(Math.max(0, triggered - due));
    var nb = s.buckets.filter(function (b) { return b[0] * 60 > t; })[0];
    $("#due-next").textContent = nb ? "next: min " + pad(nb[0]) + " · " + fmt(nb[1]) + " due" : "no more buckets";
    var bars = $("#due-buckets").children;
    for (var k = 0; k < bars.length; k++) {
      var m = Number(bars[k].dataset.minute);
      bars[k].className = m === Math.floor(t / 60) ? "now" : m * 60 < t ? "past" : "";
    }
    $("#queue-depth").textContent = fmt(now.backlog);
    $("#queue-fill").style.width = (d.peak ? (100 * now.backlog / d.peak) : 0) + "%";
    var busy = now.executed / (s.workers * s.rate);
    boxes.pods.forEach(function (p) { p.firstChild.style.height = (busy * 100) + "%"; });
    $("#pods-busy").textContent = fmt(now.executed) + "/s executing · " + Math.round(busy * 100) + "% busy";
    return now;
  }

  function crashedLeader(r, t) {
    var who = null;
    r.log.forEach(function (e) { if (e.t <= t && e.kind === "crash" && /^leader/.test(e.text)) who = e.replica; });
    return who;
  }

  function restartNote(r, i, t) {
    var next = r.log.filter(function (e) { return e.kind === "restart" && e.replica === i && e.t > t; })[0];
    return next ? " · restarts in " + clock(next.t - t) : " · no restart";
  }

  /* ---------- playback ---------- */

  function frame(full) {
    if (!state.result) return;
    var t = Math.floor(state.t), d = state.derived, r = state.result;
    var now = renderDiagram(t);
    var pm = r.per_minute, m = Math.min(Math.floor(t / 60), pm.minute.length - 1);
    $("#ticker").textContent = "min " + pad(pm.minute[m]) + " · dispatched " + fmt(pm.dispatched[m]) +
      " · executed " + fmt(pm.executed[m]) + " · dup ×" + fmt(pm.duplicates[m]) +
      " · missed " + fmt(pm.missed[m]) + " · backlog " + fmt(pm.backlog[m]);
    $("#clock").textContent = clock(t) + " / " + clock(d.end);
    $("#crash-at").textContent = clock(t);
    $("#c-scrub").value = String(t);
    $("#sub-backlog").textContent = "now " + fmt(now.backlog) + " at " + clock(t);
    var items = $("#event-log").children;
    for (var i = 0; i < items.length; i++) {
      items[i].classList.toggle("future", Number(items[i].dataset.t) > t);
    }
    moveCursors();
    if (full || !state.playing) {
      $("#stage-summary").textContent = "At " + clock(t) + ": queue " + fmt(now.backlog) +
        (now.leader >= 0 ? ", leader replica " + now.leader : ", no lease holder");
    }
  }

  var last = null;
  function tick(ts) {
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

  function setPlaying(on) {
    if (on && state.result && state.t >= state.derived.end - 1) state.t = 0;
    if (on) state.spawned = Math.floor(state.t) - 1;
    state.playing = on;
    var b = document.querySelector('[data-action="play"]');
    b.textContent = on ? "❚❚ Pause" : "▶ Play";
    b.setAttribute("aria-pressed", String(on));
    if (!on) frame(true);
  }

  function seek(t) {
    if (!state.result) return;
    state.t = Math.max(0, Math.min(state.derived.end - 1, t));
    state.spawned = Math.floor(state.t) - 1;
    particles.clear();
    frame(true);
  }

  /* ---------- particles: a sample of the flow, drawn on one canvas ---------- */

  var particles = (function () {
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

  /* ---------- sharing ---------- */

  function download(name, blob) {
    var a = document.createElement("a"), url = URL.createObjectURL(blob);
    a.href = url;
    a.download = name;
    document.body.appendChild(a);
    a.click();
    a.remove();
    setTimeout(function () { URL.revokeObjectURL(url); }, 1000);
  }

  function csv(r) {
    var pm = r.per_minute, cols = ["minute", "dispatched", "executed", "duplicates", "missed", "backlog", "leader"];
    var lines = [cols.join(",")];
    pm.minute.forEach(function (_, i) { lines.push(cols.map(function (c) { return pm[c][i]; }).join(",")); });
    return lines.join("\n") + "\n";
  }

  function png(name) {
    var u = charts[name], src = u.ctx.canvas, out = document.createElement("canvas");
    var pad2 = 28 * devicePixelRatio;
    out.width = src.width; out.height = src.height + pad2;
    var c = out.getContext("2d");
    c.fillStyle = "#fff"; c.fillRect(0, 0, out.width, out.height);
    c.fillStyle = "#1b2230"; c.font = (13 * devicePixelRatio) + "px system-ui, sans-serif";
    c.fillText($("#chart-" + name).parentNode.querySelector("figcaption").firstChild.textContent.trim() +
      " — " + state.result.sentence.split(";")[0], 8 * devicePixelRatio, 18 * devicePixelRatio);
    c.drawImage(src, 0, pad2);
    out.toBlob(function (blob) { download("cronlab-" + name + ".png", blob); }, "image/png");
  }

  function status(text) { $("#share-status").textContent = text; setTimeout(function () { $("#share-status").textContent = ""; }, 2500); }

  /* ---------- live mode ---------- */

  function liveHeaders() {
    var h = { "Content-Type": "application/json" };
    if (state.token) h["X-Cronlab-Token"] = state.token;
    return h;
  }

  function livePost(path, body) {
    return fetch("/api/live/" + path, { method: "POST", headers: liveHeaders(), body: JSON.stringify(body || {}) })
      .then(function (res) { return res.json().then(function (b) { return { ok: res.ok, body: b }; }); });
  }

  function liveStart() {
    var s = state.scenario;
    var body = {
      replicas: Math.min(7, Number(s.replicas)), workers: Math.min(16, Number(s.workers)), election: s.election,
      timers: s.timers, ttl: Math.min(120, Number(s.ttl)), count: Number($("#c-live-count").value),
      drain_s: Number($("#c-live-drain").value),
    };
    $("#live-status").textContent = "starting…";
    livePost("start", body).then(function (res) {
      if (!res.ok) { $("#live-status").textContent = res.body.error; return; }
      liveShow(res.body);
      liveListen();
    });
  }

  function liveListen() {
    if (state.source) state.source.close();
    var src = new EventSource("/api/live/events");
    state.source = src;
    src.addEventListener("snapshot", function (ev) { liveShow(JSON.parse(ev.data)); });
    src.addEventListener("end", function () { src.close(); state.source = null; });
    src.onerror = function () { src.close(); state.source = null; };
  }

  var LIVE_ROWS = [
    ["due", "Due"], ["dispatched", "Dispatched"], ["executed", "Executed"],
    ["duplicates", "Duplicate executions"], ["missed", "Missed triggers"],
    ["backlog_peak", "Queue backlog peak"], ["drain_time_s", "Drain time (s)"],
    ["takeover_delays_s", "Takeovers"],
  ];

  function liveShow(snap) {
    state.live = snap;
    var on = !!snap.running;
    ["live-crash", "live-pause", "live-stop"].forEach(function (a) {
      document.querySelector('[data-action="' + a + '"]').disabled = !on;
    });
    document.querySelector('[data-action="live-start"]').disabled = on;
    if (!on) { $("#live-status").textContent = state.liveNote || "idle"; return; }
    state.liveNote = "";
    $("#live-body").hidden = false;
    var st = snap.status || {}, lead = st.leader || {};
    $("#live-status").textContent = "running · t = " + snap.t + " s · worker rate " + snap.config.worker_rate + "/s" +
      (lead.replica != null ? " · leader replica " + lead.replica + " (epoch " + lead.epoch + ")" : "") +
      (snap.cluster_exit != null ? " · cluster exited " + snap.cluster_exit : "");
    var body = $("#live-table tbody"), rep = snap.report || {}, pred = snap.prediction.totals;
    body.textContent = "";
    LIVE_ROWS.forEach(function (row) {
      var k = row[0], tr = document.createElement("tr");
      [row[1], show(rep[k]), show(pred[k])].forEach(function (v, i) {
        var td = document.createElement(i ? "td" : "th");
        td.textContent = v;
        tr.appendChild(td);
      });
      tr.dataset.live = k;
      body.appendChild(tr);
    });
    var ol = $("#live-log");
    ol.textContent = "";
    snap.events.forEach(function (e) {
      var li = document.createElement("li"), tm = document.createElement("time"), k = document.createElement("span"), tx = document.createElement("span");
      tm.textContent = (e.t < 0 ? "−" : "") + clock(Math.abs(e.t));
      k.className = "kind " + e.kind; k.textContent = e.kind; tx.textContent = e.text;
      li.append(tm, k, tx);
      ol.appendChild(li);
    });
  }

  function show(v) {
    if (v == null) return "–";
    if (Array.isArray(v)) return v.length ? v.map(function (x) { return show(x) + " s"; }).join(", ") : "none";
    if (typeof v !== "number") return String(v);
    return Number.isInteger(v) ? fmt(v) : v.toFixed(1);
  }

  function liveStop() {
    $("#live-status").textContent = "stopping…";
    livePost("stop").then(function (res) {
      state.liveNote = res.ok ? "stopped; processes killed, folder removed" : res.body.error;
      liveShow({ running: false });
    });
  }

  function liveChaos(action) {
    livePost("chaos", { action: action, for: 15 }).then(function (res) {
      if (!res.ok) $("#live-status").textContent = res.body.error;
    });
  }

  /* ---------- wiring ---------- */

  var ACTIONS = {
    "crash-leader": function () { state.crashes.push("leader@" + Math.floor(state.t)); changed(); },
    "crash-replica": function () { state.crashes.push("replica:" + $("#c-crash-replica").value + "@" + Math.floor(state.t)); changed(); },
    reset: function () {
      state.scenario = Object.assign({}, DEFAULTS); state.crashes = []; state.compare = "election=off";
      state.t = 0; setPlaying(false); changed();
    },
    play: function () { setPlaying(!state.playing); },
    restart: function () { seek(0); },
    "step-back": function () { seek(Math.floor(state.t) - 10); },
    "step-forward": function () { seek(Math.floor(state.t) + 10); },
    "copy-link": function () {
      var url = location.href.split("#")[0];
      (navigator.clipboard ? navigator.clipboard.writeText(url) : Promise.reject()).then(
        function () { status("link copied"); }, function () { status(url); });
    },
    "export-json": function () {
      download("cronlab-run.json", new Blob([JSON.stringify(state.result, null, 2)], { type: "application/json" }));
    },
    "export-csv": function () { download("cronlab-per-minute.csv", new Blob([csv(state.result)], { type: "text/csv" })); },
    "png-backlog": function () { png("backlog"); },
    "png-flow": function () { png("flow"); },
    "live-start": liveStart,
    "live-stop": liveStop,
    "live-crash": function () { liveChaos("crash-leader"); },
    "live-pause": function () { liveChaos("pause-leader"); },
  };

  function wire() {
    document.addEventListener("click", function (e) {
      var el = e.target.closest("[data-action]");
      if (el && ACTIONS[el.dataset.action]) { e.preventDefault(); ACTIONS[el.dataset.action](); }
    });
    var form = $("#controls");
    form.addEventListener("submit", function (e) { e.preventDefault(); });
    form.addEventListener("change", function (e) { if (e.target.id !== "c-crash-replica") changed(e); });
    form.addEventListener("input", function (e) { if (e.target.type === "range") changed(e); });
    $("#c-ab-key").addEventListener("change", changed);
    $("#c-ab-value").addEventListener("change", changed);
    $("#c-speed").addEventListener("change", function (e) { state.speed = Number(e.target.value); });
    $("#c-scrub").addEventListener("input", function (e) { seek(Number(e.target.value)); });
    document.addEventListener("keydown", function (e) {
      var tag = e.target.tagName;
      if (e.key === " " && tag !== "INPUT" && tag !== "SELECT" && tag !== "BUTTON" && tag !== "TEXTAREA") {
        e.preventDefault(); setPlaying(!state.playing);
      }
    });
    window.addEventListener("hashchange", readToken);
    window.addEventListener("resize", function () { particles.fit(); resizeCharts(); moveCursors(); });
  }

  readURL();
  syncForm();
  wire();
  recompute();
  fetch("/api/live").then(function (r) { return r.json(); }).then(function (snap) {
    if (snap.running) { liveShow(snap); liveListen(); }
  }).catch(function () {});
  requestAnimationFrame(tick);
})();
