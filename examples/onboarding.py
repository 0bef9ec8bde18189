"""Onboarding: a welcome email, then three days later a nudge — on durable timers.

What hand-rolled cron does badly here: a ``sleep(3 days)`` or an in-process timer is lost the
moment the process restarts; a nightly job that scans "users who signed up three days ago"
misses everyone if it is down that night and mails them twice if it runs on two hosts.

Here the wait is a PENDING task row. The welcome handler adds it with ``ctx.defer`` in the
same transaction as its own acknowledgement, under a key derived from its own, so a crash can
neither lose the nudge nor create it twice; whichever scheduler leads in three days' time
dispatches it. Emails leave through a mailer that, like real mail APIs, takes an idempotency
key: a redelivered run (at-least-once) does not send a second email.

Run ``python examples/onboarding.py`` to watch three days go by on a fake clock.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from cronlab.election.store import StoreElector
from cronlab.handlers import Context, Registry
from cronlab.ports import NewTask
from cronlab.queues.store import StoreQueue
from cronlab.runtime.clock import FakeClock
from cronlab.runtime.scheduler import Scheduler, SchedulerConfig
from cronlab.runtime.worker import Worker, WorkerConfig
from cronlab.stores.memory import MemoryStore

NUDGE_AFTER = timedelta(days=3)
MINUTE_MS = 60_000


@dataclass(frozen=True, kw_only=True)
class Email:
    """One email handed to the mail provider."""

    to: str
    kind: str
    sent_ms: int


@dataclass
class Mailer:
    """A mail provider's API: a second send under the same idempotency key is ignored."""

    sent: list[Email] = field(default_factory=list)
    _keys: set[str] = field(default_factory=set)

    def send(self, key: str, email: Email) -> bool:
        if key in self._keys:
            return False
        self._keys.add(key)
        self.sent.append(email)
        return True


@dataclass
class Onboarding:
    """The product side: who activated their account, and the mail that went out."""

    mailer: Mailer = field(default_factory=Mailer)
    activated: set[str] = field(default_factory=set)

    def registry(self) -> Registry:
        """The two handlers, registered by name (a worker never imports a callable path)."""
        handlers = Registry()
        handlers.handler("welcome")(self.welcome)
        handlers.handler("nudge")(self.nudge)
        return handlers

    def welcome(self, ctx: Context, payload: dict[str, Any]) -> bool:
        """Send the welcome email and set the three-day timer in the same transaction."""
        user = str(payload["user"])
        ctx.defer("nudge", {"user": user}, delay=NUDGE_AFTER)
        return self._mail(ctx, user, "welcome")

    def nudge(self, ctx: Context, payload: dict[str, Any]) -> bool:
        """Nudge a user who has not activated yet; no effect for one who has."""
        user = str(payload["user"])
        return user not in self.activated and self._mail(ctx, user, "nudge")

    def _mail(self, ctx: Context, user: str, kind: str) -> bool:
        email = Email(to=user, kind=kind, sent_ms=ctx.now_ms)
        return self.mailer.send(ctx.idempotency_key, email)


def sign_up(store: MemoryStore, user: str, now_ms: int) -> bool:
    """Record a sign-up as a task due now; a second sign-up of the same user adds nothing."""
    task = NewTask(
        idempotency_key=f"signup:{user}",
        handler="welcome",
        trigger_ms=now_ms,
        payload=json.dumps({"user": user}),
    )
    return store.add_tasks([task]) == 1


@dataclass
class Engine:
    """One scheduler replica and one worker on a store, driven by hand on a fake clock."""

    store: MemoryStore
    clock: FakeClock
    scheduler: Scheduler
    worker: Worker

    @classmethod
    def start(cls, store: MemoryStore, clock: FakeClock, app: Onboarding, n: int = 0) -> Engine:
        """Fresh processes (replica/worker number ``n``) on an existing store."""
        config = SchedulerConfig(replica=n, scan_ms=1_000)
        scheduler = Scheduler(
            config,
            store=store,
            queue=StoreQueue(store, clock),
            elector=StoreElector(store, clock),
            clock=clock,
            owner=f"scheduler-{n}",
        )
        worker = Worker(
            WorkerConfig(index=n),
            store=store,
            queue=StoreQueue(store, clock),
            registry=app.registry(),
            clock=clock,
            name=f"worker-{n}",
        )
        return cls(store=store, clock=clock, scheduler=scheduler, worker=worker)

    def run_until(self, until_ms: int, step_ms: int = MINUTE_MS) -> None:
        """Advance the clock to ``until_ms``, letting the scheduler and worker work each step."""
        while self.clock.now_ms() < until_ms:
            self.clock.advance(min(step_ms, until_ms - self.clock.now_ms()))
            self.scheduler.step()
            while self.worker.step() == 0:  # 0: it ran a batch; there may be more
                pass


def main() -> None:
    """Three days on a fake clock: sign-ups, one activation, a restart on day 1."""
    start = datetime(2026, 6, 1, 9, 0, tzinfo=UTC)
    clock, store, app = FakeClock(int(start.timestamp() * 1000)), MemoryStore(), Onboarding()
    for user in ("ada", "grace", "ada"):
        sign_up(store, user, clock.now_ms())
    engine = Engine.start(store, clock, app)
    engine.run_until(clock.now_ms() + 1_000)
    app.activated.add("grace")
    engine.run_until(clock.now_ms() + int(timedelta(days=1).total_seconds() * 1000))
    engine = Engine.start(store, clock, app, n=1)  # the old processes are gone; the row is not
    engine.run_until(clock.now_ms() + int(timedelta(days=3).total_seconds() * 1000))
    for email in app.mailer.sent:
        when = datetime.fromtimestamp(email.sent_ms / 1000, UTC) - start
        print(f"+{when} {email.kind:8} → {email.to}")


if __name__ == "__main__":
    main()
