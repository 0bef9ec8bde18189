"""A store, a fake clock, an App and the real scheduler and worker loops (issue 16's tests)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from cronlab import App
from cronlab.clock import FakeClock
from cronlab.core.policy import to_ms
from cronlab.election.store import StoreElector
from cronlab.handlers import Context
from cronlab.ports import Retry
from cronlab.queues.store import StoreQueue
from cronlab.runtime.scheduler import Duty, Scheduler, SchedulerConfig
from cronlab.runtime.worker import Worker, WorkerConfig

T0 = to_ms(datetime(2026, 6, 1, 9, 0, 30, tzinfo=UTC))  # half past 09:00:00
MIN = 60_000


def minute(k: int) -> int:
    """The k-th whole minute after T0's minute (k=1 is 09:01:00)."""
    return T0 - 30_000 + k * MIN


@dataclass
class OpsLab:
    """``record`` runs and notes each occurrence; it raises while ``failing`` is set."""

    store: Any
    clock: FakeClock
    app: App
    ran: list[int] = field(default_factory=list)
    failing: bool = False
    scheduler: Scheduler | None = None
    worker: Worker | None = None

    def start(self, duties: Sequence[Duty] = (), max_attempts: int = 1, n: int = 0) -> None:
        self.scheduler = Scheduler(
            SchedulerConfig(replica=n, ttl_ms=10_000, scan_ms=1_000),
            store=self.store,
            queue=StoreQueue(self.store, self.clock),
            elector=StoreElector(self.store, self.clock),
            clock=self.clock,
            owner=f"scheduler-{n}",
            duties=duties,
        )
        self.worker = Worker(
            WorkerConfig(index=n, retry=Retry(max_attempts=max_attempts, base_ms=100)),
            store=self.store,
            queue=StoreQueue(self.store, self.clock),
            registry=self.app.registry,
            clock=self.clock,
            name=f"worker-{n}",
        )

    def run_for(self, ms: int, *, work: bool = True, step_ms: int = 1_000) -> None:
        end = self.clock.now_ms() + ms
        assert self.scheduler is not None and self.worker is not None
        while self.clock.now_ms() < end:
            self.clock.advance(min(step_ms, end - self.clock.now_ms()))
            self.scheduler.step()
            while work and self.worker.step() == 0:
                pass

    def cron(self, name: str = "tick", expr: str = "* * * * *", **kw: Any) -> None:
        self.app.schedules.pop(name, None)
        self.app.cron(expr, name=name, **kw)(self.app.tasks["record"])
        self.app.sync()


def ops_lab(store: Any) -> OpsLab:
    clock = FakeClock(T0)
    app = App(store=store, clock=clock)
    lab = OpsLab(store=store, clock=clock, app=app)

    @app.task(name="record")
    def record(ctx: Context) -> None:
        lab.ran.append(ctx.scheduled_ms)
        if lab.failing:
            raise RuntimeError(f"boom at {ctx.scheduled_ms}")

    return lab
