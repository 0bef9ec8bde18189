"""A worker: claim a batch with a visibility timeout, run the handlers, ack — at-least-once.

The handlers' writes, the execution records and the acks commit in one transaction
(``execution.execute``). A worker killed mid-batch leaves its deliveries invisible until the
timeout; then another worker receives them again. ``rate`` caps tasks/s with a token bucket.

Batch size adapts (slow start, as TCP's window does): the first claim takes ``FIRST_BATCH``;
a full batch done in under half of ``TARGET_BATCH_MS`` doubles the next one, up to ``batch``;
a slower one shrinks it to what fits in the target. Fast handlers (a midnight run of invoices)
get large batches, so a store pays its per-transaction costs rarely; slow ones get small
batches, so one worker does not hoard the queue or outlive its visibility timeout.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from cronlab import execution
from cronlab.exceptions import BackendUnavailable, SessionLost
from cronlab.handlers import CONCURRENCY, Registry
from cronlab.metrics import NO_METRICS, Metrics
from cronlab.ports import (
    RUN_ENDINGS,
    Batch,
    Clock,
    Ended,
    Event,
    Message,
    Queue,
    Retry,
    Store,
    Waiter,
)
from cronlab.runtime import reports
from cronlab.runtime.heartbeat import Heartbeat
from cronlab.runtime.outage import Outage
from cronlab.urls import redact_text

IDLE_MS = 100  # an idle worker's poll
WOKEN_IDLE_MS = 1_000  # its poll when a waiter wakes it on news (redeliveries, retries due)
FIRST_BATCH = 10
TARGET_BATCH_MS = 1_000
YIELD_MAX_MS = 100
LONG_BATCH_MS = 250
ERROR_CHARS = 300  # of a failed run's error in its line


@dataclass(frozen=True, kw_only=True)
class WorkerConfig:
    """A worker's knobs; ``rate`` None means uncapped."""

    index: int
    batch: int = 10_000
    visibility_ms: int = 30_000
    rate: float | None = None
    retry: Retry = field(default_factory=Retry)
    concurrency: int = CONCURRENCY  # async handlers run at once
    checked: bool = True  # False (``--fencing off``): every delivery runs, stale ones too
    idle_ms: int = IDLE_MS  # how long an idle worker waits before it polls again


def failure_line(worker: str, run: Ended) -> str:
    """``run``'s failure in one line (its error cut to ``ERROR_CHARS``, secrets hidden)."""
    m = run.message
    error = " ".join(redact_text(run.error or "").split())
    if len(error) > ERROR_CHARS:
        error = error[: ERROR_CHARS - 1] + "…"
    then = "retried" if run.outcome == "error" else "no attempts left: FAILED"
    return (
        f"{worker}: task {m.task} (id {m.task_id}, key {m.idempotency_key}) attempt "
        f"{m.attempt} failed: {error}; {then}"
    )


def transactions(messages: Sequence[Message]) -> list[list[Message]]:
    """The claimed ``messages`` (oldest envelope first) as the transactions they run in, in
    the order of their oldest message: every first attempt in one, each retry in one of its
    own. A run that fails by ending its transaction — a handler outlasting the server's
    ``idle_in_transaction_session_timeout`` or its own timeout inside SQL, a crash — takes its
    batch-mates down once; its retries then run alone, so they never cost another task an
    attempt (PostgreSQL seed 1529: batch-mates lost again and again, stuck at the end). A
    delivery of an earlier attempt that never ended runs nothing (``execution.LostRun``): it
    stays with the first attempts."""
    together: list[Message] = []
    groups: list[list[Message]] = []
    for m in messages:
        if m.attempt > 1 and m.receives == 1:
            groups.append([m])
        else:
            if not together:
                groups.append(together)
            together.append(m)
    return groups


class TokenBucket:
    """``rate`` tokens a second, at most one second's worth saved up — and at least one token's
    room, so a rate below one a second still runs a task every 1/rate seconds."""

    def __init__(self, rate: float, now_ms: int) -> None:
        self.rate, self.tokens, self.at_ms = rate, min(rate, 1.0), now_ms
        self.cap = max(rate, 1.0)

    def available(self, now_ms: int) -> int:
        self.tokens = min(self.cap, self.tokens + (now_ms - self.at_ms) * self.rate / 1000)
        self.at_ms = now_ms
        return int(self.tokens)

    def take(self, n: int) -> None:
        self.tokens -= n

    def wait_ms(self) -> int:
        """Milliseconds until one whole token is there."""
        return max(1, int((1 - self.tokens) * 1000 / self.rate) + 1)


class Worker:
    """One worker process's loop."""

    def __init__(
        self,
        cfg: WorkerConfig,
        *,
        store: Store,
        queue: Queue,
        registry: Registry,
        clock: Clock,
        name: str,
        metrics: Metrics = NO_METRICS,
        heartbeat: Heartbeat | None = None,
        waiter: Waiter | None = None,
    ) -> None:
        """``waiter``: on the queue's "queued" channel (None: sleep between polls)."""
        self.cfg, self.store, self.queue, self.clock, self.name = cfg, store, queue, clock, name
        self.waiter = waiter
        self.idle = False  # the last claim found nothing
        self.metrics, self.heartbeat = metrics, heartbeat
        self._observe = None if metrics is NO_METRICS else metrics.ended
        self.run_message = registry.runner(clock.now_ms, cfg.concurrency)
        self.bucket = TokenBucket(cfg.rate, clock.now_ms()) if cfg.rate else None
        self.totals = dict.fromkeys(RUN_ENDINGS, 0)
        self.limit = min(cfg.batch, FIRST_BATCH)
        self.outage = Outage(clock, name)
        self.say: Callable[[str], None] = (
            reports.stderr
        )  # a failed run's line (the simulator's trace)

    def run(self, stopping: Callable[[], bool]) -> None:
        while not stopping():
            wait_ms = self.step()
            if not wait_ms:
                continue
            if self.waiter is not None and self.idle:
                self.waiter.wait(wait_ms / 1000)  # until news, or the fallback poll
            else:
                self.clock.sleep(wait_ms / 1000)  # a rate cap's wait, a step aside: in full

    def step(self) -> int:
        """Claim and run one batch; returns milliseconds to sleep before the next. A backend
        outage is waited out with backoff (the batch's transaction rolled back: its messages
        come back after the visibility timeout)."""
        try:
            wait = self._batch()
        except BackendUnavailable as exc:
            delay = self.outage.failed(exc)
            if self.outage.fresh:
                self._note("backend_unreachable", error=str(exc))
            return delay
        if (lasted := self.outage.recovered()) is not None:
            self._note("backend_down", lasted_ms=lasted, error=self.outage.error)
        return wait

    def _note(self, kind: str, **detail: object) -> None:
        """An event in the store's log, if the store answers (it may be what is down)."""
        event = Event(
            kind=kind, at_ms=self.clock.now_ms(), holder=self.name, epoch=0, detail=detail
        )
        with contextlib.suppress(BackendUnavailable):
            self.store.record_event(event)

    def _batch(self) -> int:
        if self.heartbeat is not None:
            self.heartbeat.beat()
        limit = self.limit
        if self.bucket is not None:
            limit = min(limit, self.bucket.available(self.clock.now_ms()))
            if limit < 1:
                return self.bucket.wait_ms()
        messages = self.queue.claim(self.name, limit, self.cfg.visibility_ms)
        self.idle = not messages
        if not messages:
            return self.cfg.idle_ms
        if self.bucket is not None:
            self.bucket.take(len(messages))
        self.claimed(messages)
        started = self.clock.now_ms()
        with self.queue.holding(transactions(messages), self.cfg.visibility_ms) as groups:
            self._execute_all(groups)
        # Step aside briefly after a LONG batch (slow handlers): a single-writer store
        # (SQLite) would otherwise let this worker take the lock again before any waiting
        # process wakes. After a short batch, going on at once keeps the lock busy.
        took = self.clock.now_ms() - started
        self._size_next(len(messages), limit, took)
        return 0 if took < LONG_BATCH_MS else min(YIELD_MAX_MS, took // 10)

    def claimed(self, messages: Sequence[Message]) -> None:
        """A batch was claimed and is about to run (a subclass may replace it: the lab's
        worker dies here when asked, ``cronlab chaos kill-worker --mid-batch``)."""

    def _execute_all(self, groups: Sequence[Sequence[Message]]) -> None:
        """Each group in a transaction of its own, in order. A group whose session the server
        ended (``SessionLost``: a handler that outlasts the server's limits) does not stop the
        next, which never ran and gets a fresh session; a backend that cannot be reached
        stops the batch (what is left comes back through the queue: PostgreSQL seed 1529 at
        ffb1f53 stopped after two sessions lost in a row, and the groups it never ran were
        charged a lost attempt each at their redelivery, until one FAILED without ever
        running). The first loss is raised once all have run."""
        lost: BackendUnavailable | None = None
        for group in groups:
            try:
                self._execute(group)
            except SessionLost as exc:
                lost = lost or exc
            except BackendUnavailable as exc:
                lost = lost or exc
                break
        if lost is not None:
            raise lost

    def _execute(self, messages: Sequence[Message]) -> None:
        """Run ``messages`` in one transaction of the store's (``execution.execute``)."""
        work = Batch(
            worker=self.name,
            messages=messages,
            run=self.run_message,
            retry=self.cfg.retry,
            now=self.clock.now_ms,
            checked=self.cfg.checked,
            observe=self._observe,
            failed=self._failed,
        )
        counts = execution.execute(work, self.store, self.queue)
        for key, n in counts.items():
            self.totals[key] += n
        self.metrics.executed(counts)

    def _failed(self, runs: Sequence[Ended]) -> None:
        """Say each failed run, one line: the task, its attempt, the error, what comes next."""
        for r in runs:
            self.say(failure_line(self.name, r))

    def _size_next(self, n: int, asked: int, took_ms: int) -> None:
        """The next batch's size from how long this one took (only a full batch tells)."""
        if n < asked or asked < self.limit:
            return  # the queue ran dry, or the rate cap asked for less
        if took_ms * 2 < TARGET_BATCH_MS:
            self.limit = min(self.cfg.batch, self.limit * 2)
        elif took_ms > TARGET_BATCH_MS:
            self.limit = max(1, n * TARGET_BATCH_MS // took_ms)
