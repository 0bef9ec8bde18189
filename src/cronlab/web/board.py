"""What the console shows, read from the store: the schedules (next fires, recent runs,
counts), the leader, every process and its heartbeat, the queue, the lateness by minute, the
recent alerts. Read-only: the console writes only through the store's operator methods."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from cronlab.core import cron, occurrences, policy
from cronlab.ports import Alert
from cronlab.runtime.heartbeat import HEARTBEAT_MS
from cronlab.stores.rows import LISTED, SCHEDULE, LateMinute, RecentRun, by_column
from cronlab.stores.rows import schedule as stored_schedule

if TYPE_CHECKING:
    from cronlab.stores.sql import SqlStore

NEXT_FIRES = 10
PAGE_SIZE = 25  # schedules a page lists (the filter and the pager reach the others)
RECENT_RUNS = 10
LATENESS_SPAN_MS = 3_600_000  # the chart's last hour
SETTLED_MS = 300_000  # a minute of occurrences this old is charted as it was read
ALIVE_BEATS = 3  # a process whose heartbeat is older than this many beats is not alive
GONE_MS = 3_600_000  # a process not heard of for this long is no longer listed, only counted


class Fires:
    """What the console computes, kept between page loads: each (cron, zone)'s next fire times
    as ISO 8601 in the zone, moved on as they pass (1,000 schedules on a handful of
    expressions cost a handful), each stored row's validated ``Schedule``, and the lateness
    of minutes that have settled."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._known: dict[tuple[str, str], list[tuple[int, str]]] = {}
        self._parsed: dict[tuple[Any, ...], policy.Schedule] = {}
        self._minutes: dict[int, LateMinute] = {}
        self._settled_until = -(1 << 62)

    def lateness(self, store: SqlStore, now_ms: int) -> list[LateMinute]:
        """``SqlHistory.lateness_by_minute`` over the last hour. Minutes more than
        ``SETTLED_MS`` old are read once and kept (a thousand schedules make 60,000 runs an
        hour); a run starting later than that after its occurrence is left out of them."""
        settled = (now_ms - SETTLED_MS) // 60_000 * 60_000
        since = now_ms - LATENESS_SPAN_MS
        with self._lock:
            if self._settled_until < settled:
                start = max(self._settled_until, since)
                self._minutes.update(
                    (row.minute, row)
                    for row in store.history.lateness_by_minute(start, settled - 1)
                )
                self._settled_until = settled
            kept = [row for m, row in sorted(self._minutes.items()) if m >= since - 60_000]
            self._minutes = {row.minute: row for row in kept}
        fresh = store.history.lateness_by_minute(settled, now_ms)
        return [row for row in kept if row.minute < settled] + fresh

    def schedule(self, row: tuple[Any, ...]) -> policy.Schedule:
        """The schedule of a stored row (parsed once per distinct row)."""
        with self._lock:
            found = self._parsed.get(row)
        if found is None:
            found = stored_schedule(row)
            with self._lock:
                if len(self._parsed) > 100_000:
                    self._parsed.clear()
                self._parsed[row] = found
        return found

    def next(self, s: policy.Schedule, now_ms: int, n: int = NEXT_FIRES) -> list[str]:
        key = (s.cron, s.tz)
        with self._lock:
            known = [f for f in self._known.get(key, []) if f[0] > now_ms]
            if len(known) < n:
                start = known[-1][0] if known else now_ms
                zone = cron.zone(s.tz)
                for fire in _take(s, start, n - len(known)):
                    known.append((fire, policy.from_ms(fire).astimezone(zone).isoformat()))
            self._known[key] = known
            return [iso for _, iso in known[:n]]


def _take(s: policy.Schedule, after_ms: int, n: int) -> list[int]:
    out: list[int] = []
    for fire in policy.fires(s, after_ms):
        out.append(fire)
        if len(out) >= n:
            break
    return out


@dataclass(frozen=True, kw_only=True)
class Page:
    """Which schedules the page lists: those whose name contains ``q``, ``size`` at a time."""

    q: str = ""
    page: int = 0
    size: int = PAGE_SIZE


def snapshot(
    store: SqlStore, now_ms: int, fires: Fires, page: Page | None = None
) -> dict[str, Any]:
    """Everything the page shows, in one object (times in epoch ms unless ISO)."""
    return {
        "now_ms": now_ms,
        "store": store.db.describe(),
        "leader": _leader(store, now_ms),
        **_processes(store, now_ms),
        "queue_depth": store.queue_depth(),
        "pending_due": store.pending_due(now_ms),
        **_schedules(store, now_ms, fires, page or Page()),
        "alerts": [_alert(a) for a in store.alerts.recent(10)],
        "lateness": _lateness(store, now_ms, fires),
        "codes": list(CODES),
    }


CODES = {"ok": 0, "noop": 1, "error": 2, "failed": 3, "skipped": 4, "missed": 5, "due": 6,
         "queued": 7}  # fmt: skip
ERROR_CHARS = 200  # of a run's error, in its compact row


def _recent(r: RecentRun) -> list[Any]:
    """A ``SqlHistory.recent_runs`` row as the page's compact run: ``[occurrence ms, outcome
    code, lateness ms, duration ms, attempt, error, task id]`` (``CODES`` name the outcomes;
    the task id is what the page's task panel acts on)."""
    start, end = r.start_ms, r.end_ms
    if r.outcome is not None:
        outcome, error = r.outcome, r.error
    else:
        outcome, error = occurrences.unrun_outcome(r.status, r.last_error), r.last_error
    return [
        r.trigger_ms,
        CODES[outcome],
        None if start is None else start - r.trigger_ms,
        None if start is None or end is None else end - start,
        r.attempt,
        error[:ERROR_CHARS] if error else None,
        r.task_id,
    ]


def _leader(store: SqlStore, now_ms: int) -> dict[str, Any] | None:
    lease = store.lease_read()
    if lease.holder is None or lease.expires_ms <= now_ms:
        return None
    return {"holder": lease.holder, "epoch": lease.epoch, "expires_ms": lease.expires_ms}


def _processes(store: SqlStore, now_ms: int) -> dict[str, Any]:
    """The processes heard of within ``GONE_MS`` (``processes``), and how many others there
    are (``processes_gone``: exited or silent for longer; a restarted cluster's old ones)."""
    out, gone = [], 0
    for p in store.processes():
        beat = p.heartbeat_ms
        alive = (
            p.exited_ms is None and beat is not None and now_ms - beat < ALIVE_BEATS * HEARTBEAT_MS
        )
        heard = max(x for x in (p.started_ms, beat, p.exited_ms) if x is not None)
        if not alive and now_ms - heard > GONE_MS:
            gone += 1
            continue
        out.append(
            {
                "role": p.role,
                "index": p.index,
                "pid": p.pid,
                "owner": p.owner,
                "started_ms": p.started_ms,
                "exited_ms": p.exited_ms,
                "heartbeat_ms": beat,
                "alive": alive,
            }
        )
    return {"processes": out, "processes_gone": gone}


def _schedules(store: SqlStore, now_ms: int, fires: Fires, page: Page) -> dict[str, Any]:
    """The page's schedules with their next fires and recent runs, and the counts of all."""
    rows = [by_column(LISTED, r) for r in store.named("schedules_all")]
    wanted = [r for r in rows if page.q in r["name"]] if page.q else rows
    pages = max(1, -(-len(wanted) // page.size))
    number = min(page.page, pages - 1)
    shown = wanted[number * page.size : (number + 1) * page.size]
    found = store.history.recent_runs([r["name"] for r in shown], now_ms, RECENT_RUNS)
    recent = {name: [_recent(r) for r in runs] for name, runs in found.items()}
    return {
        "schedules": [_schedule(r, now_ms, fires, recent) for r in shown],
        "total": len(rows),
        "paused": sum(1 for r in rows if r["paused"]),
        "matching": len(wanted),
        "page": number,
        "pages": pages,
    }


def _schedule(
    r: dict[str, Any], now_ms: int, fires: Fires, recent: dict[str, Any]
) -> dict[str, Any]:
    s = fires.schedule(tuple(r[c] for c in SCHEDULE))
    return {
        "name": s.name,
        "cron": s.cron,
        "tz": s.tz,
        "task": s.task,
        "catchup": s.catchup,
        "overlap": s.overlap,
        "paused": s.paused,
        "note": r["paused_note"],
        "app": r["app"],
        "missed": int(r["missed"]),
        "skipped": int(r["skipped"]),
        "alert_after_ms": s.alert_after_ms,
        "alert_on_failures": s.alert_on_failures,
        "next": [] if s.paused else fires.next(s, now_ms),
        "runs": recent.get(s.name, []),
    }


def _alert(a: Alert) -> dict[str, Any]:
    from cronlab.runtime.alerts import message

    shown = ("id", "schedule", "kind", "raised_ms", "delivery")
    return {**{name: getattr(a, name) for name in shown}, "message": message(a)}


def _lateness(store: SqlStore, now_ms: int, fires: Fires) -> dict[str, list[float]]:
    rows = fires.lateness(store, now_ms)
    return {
        "minute": [r.minute / 1000 for r in rows],
        "runs": [float(r.runs) for r in rows],
        "mean_ms": [round(r.mean_ms, 1) for r in rows],
        "max_ms": [float(r.max_ms) for r in rows],
    }


def local(ms: int, tz: str) -> str:
    """``ms`` as ISO 8601 in zone ``tz``."""
    return datetime.fromtimestamp(ms / 1000, cron.zone(tz)).isoformat()


def reader(opener: Callable[[], SqlStore], shared: bool) -> Callable[[], SqlStore]:
    """The store for the calling thread: one per thread (a SQLite connection belongs to the
    thread that opened it), or one for all (``shared``: PostgreSQL's pool is thread-safe)."""
    local_ = threading.local()
    lock = threading.Lock()
    one: list[SqlStore] = []

    def get() -> SqlStore:
        if shared:
            with lock:
                if not one:
                    one.append(opener())
                return one[0]
        store: SqlStore | None = getattr(local_, "store", None)
        if store is None:
            store = local_.store = opener()
        return store

    return get
