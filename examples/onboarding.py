"""Onboarding: a welcome email, then three days later a nudge — on durable timers.

What hand-rolled cron does badly here: a ``sleep(3 days)`` or an in-process timer is lost the
moment the process restarts; a nightly job that scans "users who signed up three days ago"
misses everyone if it is down that night and mails them twice if it runs on two hosts.

Here the wait is a PENDING task row. ``welcome`` defers ``nudge`` with ``ctx.defer`` in the
same transaction as its own acknowledgement, under a key derived from its own, so a crash can
neither lose the nudge nor create it twice; whichever scheduler leads in three days' time
dispatches it. Emails leave through a mailer that, like real mail APIs, takes an idempotency
key: a redelivered run (at-least-once) does not send a second email.

Run ``python examples/onboarding.py`` to watch three days go by on a fake clock.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

import cronlab
from cronlab.testing import FakeClock, MemoryStore

NUDGE_AFTER = timedelta(days=3)


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


class Onboarding:
    """The product side: its two tasks, who activated their account, and the mail sent."""

    def __init__(self, store: MemoryStore, clock: FakeClock) -> None:
        self.app = cronlab.App(store=store, clock=clock, name="onboarding")
        self.mailer, self.activated = Mailer(), set[str]()
        self.welcome = self.app.task(name="welcome")(self._welcome)
        self.nudge = self.app.task(name="nudge")(self._nudge)

    def sign_up(self, user: str) -> bool:
        """A welcome due now; signing up twice adds nothing (the key is the user's)."""
        return self.welcome.defer(user=user, key=f"signup:{user}").added

    def _welcome(self, ctx: cronlab.Context, user: str) -> bool:
        """Send the welcome email and set the three-day timer in the same transaction."""
        ctx.defer(self.nudge, {"user": user}, delay=NUDGE_AFTER)
        return self._mail(ctx, user, "welcome")

    def _nudge(self, ctx: cronlab.Context, user: str) -> bool:
        """Nudge a user who has not activated yet; no effect for one who has."""
        return user not in self.activated and self._mail(ctx, user, "nudge")

    def _mail(self, ctx: cronlab.Context, user: str, kind: str) -> bool:
        email = Email(to=user, kind=kind, sent_ms=ctx.now_ms)
        return self.mailer.send(ctx.idempotency_key, email)


def main() -> None:
    """Three days on a fake clock: sign-ups, one activation, a restart on day 1."""
    start = datetime(2026, 6, 1, 9, 0, tzinfo=UTC)
    clock, store = FakeClock(int(start.timestamp() * 1000)), MemoryStore()
    product = Onboarding(store, clock)
    for user in ("ada", "grace", "ada"):
        product.sign_up(user)
    product.app.run_until_idle()
    product.activated.add("grace")
    clock.advance(int(timedelta(days=1).total_seconds() * 1000))
    # A redeploy: the old process is gone, the timer rows are not.
    restarted = Onboarding(store, clock)
    restarted.mailer, restarted.activated = product.mailer, product.activated
    clock.advance(int(timedelta(days=2).total_seconds() * 1000) + 1_000)
    restarted.app.run_until_idle()
    for email in product.mailer.sent:
        when = datetime.fromtimestamp(email.sent_ms / 1000, UTC) - start
        print(f"+{when} {email.kind:8} → {email.to}")


if __name__ == "__main__":
    main()
