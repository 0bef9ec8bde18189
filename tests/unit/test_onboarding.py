"""examples/onboarding.py: three days on a fake clock, through the engine's memory store."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from cronlab.ports import Batch, Message
from cronlab.runtime.clock import FakeClock
from cronlab.stores.memory import MemoryStore

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "onboarding.py"
T0 = 1_780_000_000_000
MIN, DAY = 60_000, 86_400_000


def load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("onboarding_example", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while being built
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def ex() -> ModuleType:
    return load()


def setup(ex: ModuleType) -> tuple[FakeClock, MemoryStore, object]:
    return FakeClock(T0), MemoryStore(), ex.Onboarding()


def sent(app: object) -> list[tuple[str, str, int]]:
    return [(e.kind, e.to, e.sent_ms - T0) for e in app.mailer.sent]  # type: ignore[attr-defined]


def test_welcome_now_nudge_after_exactly_three_days_and_only_once(ex: ModuleType) -> None:
    clock, store, app = setup(ex)
    assert ex.sign_up(store, "ada", clock.now_ms())
    engine = ex.Engine.start(store, clock, app)
    engine.run_until(T0 + MIN)
    assert sent(app) == [("welcome", "ada", MIN)]
    assert store.counts()["PENDING"] == 1  # the nudge, a durable row
    engine.run_until(T0 + MIN + 3 * DAY - MIN)
    assert [kind for kind, _, _ in sent(app)] == ["welcome"]
    engine.run_until(T0 + 6 * DAY)
    assert sent(app) == [("welcome", "ada", MIN), ("nudge", "ada", MIN + 3 * DAY)]
    assert store.counts()["PENDING"] == 0 and store.counts()["DONE"] == 2


def test_a_user_who_activated_gets_no_nudge(ex: ModuleType) -> None:
    clock, store, app = setup(ex)
    ex.sign_up(store, "grace", clock.now_ms())
    engine = ex.Engine.start(store, clock, app)
    engine.run_until(T0 + DAY)
    app.activated.add("grace")  # type: ignore[attr-defined]
    engine.run_until(T0 + 4 * DAY)
    assert [kind for kind, _, _ in sent(app)] == ["welcome"]
    assert store.counts()["DONE"] == 2  # the nudge ran, with no effect


def test_the_timer_survives_the_processes_that_set_it(ex: ModuleType) -> None:
    clock, store, app = setup(ex)
    ex.sign_up(store, "ada", clock.now_ms())
    ex.Engine.start(store, clock, app).run_until(T0 + DAY)
    # Those processes die without releasing anything; new ones start on day 2.
    clock.advance(DAY)
    ex.Engine.start(store, clock, app, n=1).run_until(T0 + 5 * DAY)
    assert sent(app) == [("welcome", "ada", MIN), ("nudge", "ada", MIN + 3 * DAY)]


def test_signing_up_twice_sends_one_welcome_and_one_nudge(ex: ModuleType) -> None:
    clock, store, app = setup(ex)
    assert ex.sign_up(store, "ada", clock.now_ms())
    assert not ex.sign_up(store, "ada", clock.now_ms())
    ex.Engine.start(store, clock, app).run_until(T0 + 4 * DAY)
    assert [kind for kind, _, _ in sent(app)] == ["welcome", "nudge"]


def test_a_redelivered_welcome_sends_nothing_twice(ex: ModuleType) -> None:
    clock, store, app = setup(ex)
    ex.sign_up(store, "ada", clock.now_ms())
    engine = ex.Engine.start(store, clock, app)
    engine.run_until(T0 + MIN)
    # The same delivery once more, as after a worker that died before its ack was seen.
    welcome = store.task(1)
    again = Message(
        id=999,
        task_id=welcome.id,
        idempotency_key=welcome.idempotency_key,
        handler=welcome.handler,
        payload=welcome.payload,
        trigger_ms=welcome.trigger_ms,
        attempt=2,
    )
    run = app.registry().runner(clock.now_ms)  # type: ignore[attr-defined]
    counts = store.execute(
        Batch(
            worker="w", messages=[again], run=run, retry=engine.worker.cfg.retry, now=clock.now_ms
        )
    )
    assert counts["stale"] == 1  # its task is DONE: the handler does not even run again
    engine.run_until(T0 + 4 * DAY)
    assert [kind for kind, _, _ in sent(app)] == ["welcome", "nudge"]
    assert store.counts()["DONE"] == 2


def test_the_script_runs_three_days_and_prints_the_mail() -> None:
    out = subprocess.run(
        [sys.executable, str(EXAMPLE)], capture_output=True, text=True, timeout=60, check=True
    )
    lines = out.stdout.splitlines()
    assert len(lines) == 3
    assert "welcome  → ada" in lines[0] and "welcome  → grace" in lines[1]
    assert lines[2].startswith("+3 days, 0:00:01 nudge") and lines[2].endswith("→ ada")
