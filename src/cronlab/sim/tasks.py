"""The simulated application: its tasks, what each run of them does, and the App API actor.

Every run of a task is noted in the ledger (``Invocation``): who ran it, on which attempt,
and whether it completed — its outside effect (an e-mail) happened. Its inside effect is a
row in ``sim_effects`` written through ``ctx.tx``, which commits with the run's ack or not at
all. A run behaves as its task's arguments say (``scenario.Job.payload``): it fails its first
attempts (raising an error, or a BaseException; writing first, or not), runs past its
task's timeout, works a while, defers a follow-up through ``ctx.defer``.

The App API actor (the ``api`` kind) uses ``cronlab.App`` itself: ``Task.defer`` with and
without keys, ``defer_many`` with keys repeated, and ``App.sync`` redeploys of the app's
schedule ``api-s`` (version 2: the same grid, another task; version 3: another grid).
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import timedelta
from functools import partial
from typing import TYPE_CHECKING, Any

import cronlab
from cronlab import tasks as task_module
from cronlab.core.policy import Schedule
from cronlab.exceptions import ConflictError
from cronlab.handlers import Context, Options, Registry
from cronlab.ports import NewTask
from cronlab.sim import scenario as sc
from cronlab.sim.world import Killed

if TYPE_CHECKING:
    from cronlab.sim.run import Invocation, _Run

API_SCHEDULE = "api-s"
API_APP = "sim-api"
# Rows the engine cannot run (the ``poison`` kind): each must end FAILED, and the engine go on.
POISON = (
    ("poison:no-such-task", "no_such_task", "{}"),  # a task no app registers
    ("poison:bad-arguments", "api", '{"zz": 1}'),  # arguments that no longer fit its signature
    ("poison:not-json", "effect", "{not json"),  # a payload that is not JSON
)
# A key that looks like an occurrence's and is not one: it runs as the plain task it is.
LOOKALIKE = ("schedule:lookalike", "effect", "{}")


def handler_of(job: sc.Job) -> str:
    """The task a job's row names."""
    if job.is_async:
        return "aeffect"
    return "teffect" if job.timeout_first else "effect"


def follow_up_key(parent: str) -> str:
    """The key of the follow-up ``Context.defer`` adds first under ``parent``'s run."""
    return f"{parent}/then/effect/1"


class SimTasks:
    """The simulated application's tasks, bound to one run's world and ledger."""

    def __init__(self, run: _Run) -> None:
        self.run, self.world, self.ledger = run, run.world, run.ledger

    def registry(self) -> Registry:
        r = Registry()
        for name in ("effect", "effect2"):
            r.handler(name)(partial(self.effect, name))
        r.handler("teffect", Options(timeout_ms=sc.TIMEOUT_MS))(partial(self.effect, "teffect"))
        r.handler("aeffect")(self.effect_async)
        for name in ("api", "api2"):
            r.handler(name)(partial(self.api, name))
        return r

    async def effect_async(self, ctx: Context, payload: dict[str, Any]) -> bool:
        """``effect`` as an async handler: run on the worker's loop next to the batch's others;
        its row goes through the queued ``ctx.tx`` into its own savepoint."""
        await asyncio.sleep(0)
        return self.effect("aeffect", ctx, payload)

    def api(self, name: str, ctx: Context, payload: dict[str, Any]) -> bool:
        """The App API's tasks, called as ``cronlab.App`` calls a task: arguments by name."""
        return self._api(name, ctx, **payload)

    def _api(self, name: str, ctx: Context, n: int) -> bool:
        return self.effect(name, ctx, {})

    def effect(self, name: str, ctx: Context, payload: dict[str, Any]) -> bool:
        """A run: an outside effect (noted when it completes) and a row through ``ctx.tx``."""
        inv = self._invoked(ctx)
        if ctx.attempt <= int(payload.get("timeout_first", 0)):
            self.world.sleep(sc.TASK_SLOW_MS)  # past the task's timeout: the run fails
            self._write(ctx, inv, name)
            return True
        if ctx.attempt <= int(payload.get("fail_first", 0)):
            if payload.get("write_first"):
                self._write(ctx, inv, name)
            if payload.get("raises") == "crash":  # it takes its worker down (a segfault)
                proc = self.world.current
                assert proc is not None
                self.world.log(f"{proc.name} crashes in {inv.key} attempt {inv.attempt}")
                proc.dying = proc.faulted = True
                raise Killed
            raise _failure(str(payload.get("raises", "")), inv)
        if work := int(payload.get("work_ms", 0)):
            self.world.sleep(work)
        self._write(ctx, inv, name)
        follow = payload.get("follow_ms")
        if follow is not None:
            ctx.defer("effect", {}, delay=timedelta(milliseconds=int(follow)))
            inv.follow_up = follow_up_key(ctx.idempotency_key)
        inv.completed = True
        return True

    def _invoked(self, ctx: Context) -> Invocation:
        from cronlab.sim.run import Invocation

        proc = self.world.current
        assert proc is not None
        inv = Invocation(
            id=len(self.ledger.invocations) + 1,
            key=ctx.idempotency_key,
            attempt=ctx.attempt,
            proc=proc.name,
            at_ms=self.world.now_ms,
        )
        self.ledger.invocations.append(inv)
        self.run.tx_invs.setdefault(proc.name, []).append(inv)
        self.world.log(f"{proc.name} runs {inv.key} attempt {inv.attempt}")
        return inv

    def _write(self, ctx: Context, inv: Invocation, name: str) -> None:
        row = (inv.key, ctx.task_id, ctx.attempt, inv.id, self.run._authority(),
               self.world.now_ms, name, ctx.scheduled_ms)  # fmt: skip
        marks = ", ".join(["?" if ctx.tx.dialect == "sqlite" else "%s"] * len(row))
        ctx.tx.execute(f"INSERT INTO sim_effects VALUES ({marks})", row)


def _failure(kind: str, inv: Invocation) -> BaseException:
    """What a failing attempt raises."""
    text = f"{inv.key} fails on attempt {inv.attempt}"
    found: dict[str, BaseException] = {
        "CancelledError": asyncio.CancelledError(text),
        "SystemExit": SystemExit(text),
        "KeyboardInterrupt": KeyboardInterrupt(text),
    }
    return found.get(kind, RuntimeError(text))


def poison_rows(trigger_ms: int) -> list[NewTask]:
    return [NewTask(k, h, trigger_ms, p) for k, h, p in (*POISON, LOOKALIKE)]


# -- the App API actor ----------------------------------------------------------------------


@dataclass(frozen=True)
class _AuthorityClock:
    """An App's clock reading the authority's time (as the operator's CLI passes it)."""

    now: Any

    def now_ms(self) -> int:
        return int(self.now())

    def monotonic_ms(self) -> int:
        return int(self.now())

    def sleep(self, seconds: float) -> None:
        raise AssertionError("the App API actor never sleeps")


def api_app(store: Any, now: Any, version: int) -> cronlab.App:
    """The actor's app on ``store``: its tasks, and its schedule as ``version`` declares it."""
    app = cronlab.App(store=store, clock=_AuthorityClock(now), name=API_APP)

    @app.task(name="api")
    def api(ctx: Context, n: int) -> None:
        """Runs on a worker (``SimTasks.api``); here for its signature."""

    @app.task(name="api2")
    def api2(ctx: Context, n: int) -> None:
        """Version 2's task: the same grid, another task."""

    every = 3 if version == 3 else 2
    app.cron(f"* * * * * */{every}", name=API_SCHEDULE, args={"n": 0}, catchup="all",
             overlap="allow")(api2 if version == 2 else api)  # fmt: skip
    return app


def api_definition(version: int) -> Schedule:
    """The schedule ``api_app`` declares at ``version``, as the store keeps it."""
    return api_app(None, lambda: 0, version).schedules[API_SCHEDULE]


class Refused(Exception):
    """The App API refused a call it must take: a key deferred again with the arguments it
    holds (a ``ConflictError`` there is a bug, not a refusal the checker allows)."""


def api_call(app: cronlab.App, call: sc.ApiCall, index: int) -> tuple[str, bool]:
    """One call of the actor: what it did, for the trace, and whether it changed the app's
    schedule (a sync that found it as declared changes nothing)."""
    task = app.tasks["api"]
    try:
        if call.op == "defer":
            key = call.keys[0]
            ref = task.defer(n=_n(key, index), key=key)
            return f"defer {ref.key} added={ref.added}", False
        if call.op == "many":
            items = [({"n": _n(key, index)}, key) for key in call.keys]
            done = task.defer_many(items)
            return f"defer_many {len(items)}: added {done.added}, existing {done.existing}", False
    except ConflictError as exc:  # (a key is always deferred with the same argument)
        raise Refused(str(exc)) from exc
    report = app.sync()
    return f"sync version {call.version}: {report}", API_SCHEDULE in report.added + report.changed


def _n(key: str | None, index: int) -> int:
    """The argument a key is deferred with: always the same for a key (else a conflict)."""
    return int(key.removeprefix("api:k")) if key is not None else 1_000 + index


@contextmanager
def seeded_keys(seed: int) -> Iterator[None]:
    """The random part of a task's default key drawn from the seed (a run replays)."""
    rng = random.Random(f"{seed}:keys")
    real = task_module.random_hex
    task_module.random_hex = lambda: f"{rng.getrandbits(128):032x}"
    try:
        yield
    finally:
        task_module.random_hex = real
