"""Missed and failing runs alert: the leader's ``Alerter`` duty.

Per schedule, ``alert_after`` (a run not started this long after its occurrence) and
``alert_on_failures=N`` (N failed runs in a row). The leader checks and raises each condition
once: an outage is one condition however many occurrences it makes late (until a run starts
again), a failure streak is one until a run succeeds. Raising writes a row in ``alerts``,
whose unique key refuses a second, and an ``alert`` event, in one fenced transaction; the
line goes to stderr, and the alert to ``--alert-webhook``: a JSON POST signed with
HMAC-SHA256 of the body under ``CRONLAB_ALERT_SECRET`` (header ``X-Cronlab-Signature:
sha256=HEX``), retried with backoff (1 s doubling to 5 min, 10 tries). The POST runs in a
thread of its own, so a slow receiver never delays a dispatch; a delivery not made when the
leader dies is made by the next one.

A run has *started* when its record is there or a worker holds its message (the claim commits
before the handler runs, its record with its end; with a Redis queue only the record counts,
and a run longer than the visibility timeout looks unstarted until it ends).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import queue
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from cronlab import urls
from cronlab.core import policy
from cronlab.core.policy import from_ms
from cronlab.exceptions import ConfigError
from cronlab.ports import Alert, Clock, Watched
from cronlab.runtime import reports
from cronlab.stores.sql import alerting

if TYPE_CHECKING:
    from cronlab.stores.sql import SqlStore

SECRET_ENV = "CRONLAB_ALERT_SECRET"
WEBHOOK_ENV = "CRONLAB_ALERT_WEBHOOK"
SIGNATURE = "X-Cronlab-Signature"
CHECK_MS = 2_000  # how often the late occurrences are looked at
FAILURES_MS = 10_000  # how often the failure streaks are
SCHEDULES_MS = 10_000  # how often the alerting schedules are read again
FIRST_RETRY_MS, MAX_RETRY_MS, MAX_TRIES = 1_000, 300_000, 10
SEND_BATCH = 20
POST_TIMEOUT_S = 5.0


@dataclass(frozen=True, kw_only=True)
class Webhook:
    """Where alerts go. ``secret`` signs each body (None: sent unsigned)."""

    url: str
    secret: bytes | None = None

    def __repr__(self) -> str:  # never the secret, never a password in the URL
        from cronlab.urls import redact

        return f"Webhook({redact(self.url)!r}, signed={self.secret is not None})"


def webhook(url: str | None) -> Webhook | None:
    """``--alert-webhook``: an http(s) URL, signed with ``CRONLAB_ALERT_SECRET`` if it is set.
    A user or password in it is refused (urllib sends no such credentials: every delivery
    would fail, its error echoing them); no message shows the user part."""
    if not url:
        return None
    shown = urls.redact(url, user=False)[:120]
    if url.partition("://")[0] not in ("http", "https") or "://" not in url:
        raise ConfigError(f"--alert-webhook must be an http:// or https:// URL, got {shown!r}")
    netloc = _netloc(url)
    if "@" in netloc:
        raise ConfigError(
            f"--alert-webhook {shown!r}: a user or password in the URL is refused; "
            f"authenticate the receiver with {SECRET_ENV} (each POST is signed)"
        )
    if not netloc:
        raise ConfigError(f"--alert-webhook {shown!r}: expected http(s)://host[:port]/PATH")
    secret = os.environ.get(SECRET_ENV)
    return Webhook(url=url, secret=secret.encode() if secret else None)


def _netloc(url: str) -> str:
    """The host part of ``url`` as urllib reads it, or "" when urllib cannot (a ``[`` not
    closed, a port that is not a number: a password's unencoded ``/`` or ``#`` ends it early)."""
    try:
        parts = urlsplit(url)
        return parts.netloc if parts.hostname and parts.port != 0 else ""
    except ValueError:
        return ""


def signature(secret: bytes, body: bytes) -> str:
    """The ``X-Cronlab-Signature`` of ``body``: ``sha256=`` and the HMAC's hex digest."""
    return "sha256=" + hmac.new(secret, body, hashlib.sha256).hexdigest()


def payload(alert: Alert) -> dict[str, Any]:
    """The JSON body of an alert (``message`` is what the log says)."""
    return {
        "id": alert.id,
        "kind": alert.kind,
        "schedule": alert.schedule,
        "subject": alert.subject,
        "message": message(alert),
        "raised_ms": alert.raised_ms,
        "raised_at": from_ms(alert.raised_ms).isoformat(),
        "detail": dict(alert.detail),
    }


def message(alert: Alert) -> str:
    """One line saying what is wrong."""
    d = alert.detail
    if alert.kind == "late":
        due = from_ms(int(d["occurrence_ms"])).isoformat()
        after = int(d["alert_after_ms"]) / 1000
        return (
            f"schedule {alert.schedule}: no run of its occurrence at {due} started "
            f"within {after:g} s"
        )
    return (
        f"schedule {alert.schedule}: {d['failures']} runs in a row failed "
        f"(the last: {d.get('error') or 'no error text'})"
    )


def post(hook: Webhook, body: bytes, alert_id: int) -> None:
    """POST ``body``; raises on anything but a 2xx answer in ``POST_TIMEOUT_S``."""
    import urllib.error  # only a process that alerts loads the HTTP client
    import urllib.request

    headers = {"Content-Type": "application/json", "X-Cronlab-Delivery": str(alert_id)}
    if hook.secret is not None:
        headers[SIGNATURE] = signature(hook.secret, body)
    request = urllib.request.Request(hook.url, data=body, headers=headers, method="POST")
    with urllib.request.urlopen(request, timeout=POST_TIMEOUT_S) as answer:
        if not 200 <= answer.status < 300:
            raise urllib.error.HTTPError(hook.url, answer.status, "not 2xx", answer.headers, None)


class Sender:
    """Posts alerts from a daemon thread; ``results()`` hands back ``(id, error or None)``."""

    def __init__(self, hook: Webhook, send: Callable[[Webhook, bytes, int], None] = post) -> None:
        self.hook, self._send = hook, send
        self._todo: queue.Queue[Alert] = queue.Queue()
        self._done: queue.Queue[tuple[int, str | None]] = queue.Queue()
        self._thread: threading.Thread | None = None

    def submit(self, alert: Alert) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._loop, name="cronlab-alerts", daemon=True)
            self._thread.start()
        self._todo.put(alert)

    def results(self) -> list[tuple[int, str | None]]:
        out = []
        while not self._done.empty():
            out.append(self._done.get_nowait())
        return out

    def _loop(self) -> None:
        while True:
            alert = self._todo.get()
            body = json.dumps(payload(alert), sort_keys=True).encode()
            try:
                self._send(self.hook, body, alert.id)
            except Exception as exc:  # any failure is the receiver's: retried later
                why = urls.scrub(f"{type(exc).__name__}: {exc}", self.hook.url)
                self._done.put((alert.id, why[:300]))
            else:
                self._done.put((alert.id, None))


class Alerter:
    """``Duty``: check, raise, deliver. ``holder`` names this replica in the alert events."""

    def __init__(
        self,
        store: SqlStore,
        clock: Clock,
        holder: str,
        sender: Sender | None = None,
        say: Callable[[str], None] = reports.stderr,
    ) -> None:
        self.store, self.clock, self.holder, self.sender, self.say = (
            store,
            clock,
            holder,
            sender,
            say,
        )
        self._rows: dict[str, tuple[tuple[Any, ...], Watched]] = {}
        self._next_late: dict[tuple[Any, ...], int] = {}  # wall ms to look at a schedule again
        self._in_flight: dict[int, Alert] = {}
        self._read_ms = self._late_ms = self._failures_ms = 0  # monotonic
        self.raised = 0

    def run(self, now_ms: int, epoch: int) -> None:
        mono = self.clock.monotonic_ms()
        self._settle(now_ms)
        if mono >= self._read_ms:
            self._read_ms = mono + SCHEDULES_MS
            self._read()
        if mono >= self._late_ms:
            self._late_ms = mono + CHECK_MS
            for w in self._watched(lambda s: s.alert_after_ms is not None):
                self._check_late(w, now_ms, epoch)
        if mono >= self._failures_ms:
            self._failures_ms = mono + FAILURES_MS
            for w in self._watched(lambda s: s.alert_on_failures is not None):
                self._check_failures(w.schedule, now_ms, epoch)
        self._deliver(now_ms)

    def _read(self) -> None:
        """The alerting schedules, parsed again only when their row changed."""
        fresh: dict[str, tuple[tuple[Any, ...], Watched]] = {}
        for row, expected in self.store.alerts.watched():
            key = (*row, expected)
            old = self._rows.get(row[0])
            fresh[row[0]] = (
                old if old and old[0] == key else (key, alerting.as_watched(row, expected))
            )
        self._rows = fresh

    def _watched(self, wanted: Callable[[policy.Schedule], bool]) -> list[Watched]:
        return [w for _, w in self._rows.values() if wanted(w.schedule)]

    def _check_late(self, w: Watched, now_ms: int, epoch: int) -> None:
        """The newest fire time ``alert_after`` ago, once: alert unless a run has started."""
        s, after = w.schedule, w.schedule.alert_after_ms
        assert after is not None
        key = (s.name, s.cron, s.tz, after, w.expected_from_ms)
        if now_ms < self._next_late.get(key, 0) or w.expected_from_ms is None:
            return
        fire = policy.latest_fire(s, now_ms - after, w.expected_from_ms)
        if fire is not None and self._late(s.name, fire, now_ms):
            detail = {"occurrence_ms": fire, "alert_after_ms": after}
            self._raise(s.name, "late", str(fire), detail, now_ms, epoch)
        self._next_late[key] = policy.next_fire(s, max(fire or 0, now_ms - after)) + after

    def _late(self, name: str, fire_ms: int, now_ms: int) -> bool:
        """No run since ``fire_ms`` has started, and ``fire_ms`` is not said already: the
        schedule's newest late alert is not about a later occurrence (alerts move forward: a
        leader whose clock is behind, after the runs of an older one were pruned, must not say
        it again), nor about an earlier one with no run started since (the same outage)."""
        if self.store.alerts.started_since(name, fire_ms, now_ms):
            return False
        alerted = self.store.alerts.newest(name, "late")
        return alerted is None or (
            alerted < fire_ms and self.store.alerts.started_since(name, alerted, now_ms)
        )

    def _check_failures(self, s: policy.Schedule, now_ms: int, epoch: int) -> None:
        assert s.alert_on_failures is not None
        streak = self.store.alerts.failure_streak(s.name, s.alert_on_failures)
        if streak is not None:
            first, last = streak[0], streak[-1]
            detail = {"failures": len(streak), "first_ms": int(first[1]), "error": last[2]}
            self._raise(s.name, "failing", first[0], detail, now_ms, epoch)

    def _raise(
        self, name: str, kind: str, subject: str, detail: dict[str, Any], now_ms: int, epoch: int
    ) -> None:
        about: dict[str, Any] = {"schedule": name, "kind": kind, "subject": subject}
        delivery = "pending" if self.sender is not None else "none"
        alert = Alert(id=0, raised_ms=now_ms, detail=detail, delivery=delivery, **about)
        alert_id = self.store.alerts.raise_alert(alert, epoch, self.holder)
        if alert_id is not None:
            self.raised += 1
            self.say(f"cronlab: alert {alert_id}: {message(alert)}")

    def _deliver(self, now_ms: int) -> None:
        if self.sender is None:
            return
        for alert in self.store.alerts.to_send(now_ms, SEND_BATCH):
            if alert.id not in self._in_flight:
                self._in_flight[alert.id] = alert
                self.sender.submit(alert)

    def _settle(self, now_ms: int) -> None:
        """Record the deliveries that ended since the last round."""
        if self.sender is None:
            return
        for alert_id, error in self.sender.results():
            alert = self._in_flight.pop(alert_id)
            if error is None:
                self.store.alerts.sent(alert_id, "delivered", 0, now_ms)
                continue
            tries = alert.attempts + 1
            if tries >= MAX_TRIES:
                self.store.alerts.sent(alert_id, "undeliverable", 0, None)
                self.say(f"cronlab: alert {alert_id} not delivered after {tries} tries: {error}")
            else:
                wait = min(MAX_RETRY_MS, FIRST_RETRY_MS * 2 ** (tries - 1))
                self.store.alerts.sent(alert_id, "pending", now_ms + wait, None)
