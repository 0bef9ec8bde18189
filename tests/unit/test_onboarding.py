"""examples/onboarding.py: three days on a fake clock, through the engine's memory store."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from cronlab import execution
from cronlab.clock import FakeClock
from cronlab.ports import Batch, Message, Retry
from cronlab.stores.memory import MemoryStore

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "onboarding.py"
T0 = 1_780_000_000_000
DAY = 86_400_000


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


def setup(ex: ModuleType) -> tuple[FakeClock, MemoryStore, Any]:
    clock, store = FakeClock(T0), MemoryStore()
    return clock, store, ex.Onboarding(store, clock)


def sent(product: Any) -> list[tuple[str, str, int]]:
    return [(e.kind, e.to, e.sent_ms - T0) for e in product.mailer.sent]


def test_welcome_now_nudge_after_exactly_three_days_and_only_once(ex: ModuleType) -> None:
    clock, store, product = setup(ex)
    assert product.sign_up("ada")
    product.app.run_until_idle()
    assert sent(product) == [("welcome", "ada", 0)]
    assert store.counts()["PENDING"] == 1  # the nudge, a durable row
    clock.advance(3 * DAY - 1)
    product.app.run_until_idle()
    assert [kind for kind, _, _ in sent(product)] == ["welcome"]
    clock.advance(1)
    product.app.run_until_idle()
    assert sent(product) == [("welcome", "ada", 0), ("nudge", "ada", 3 * DAY)]
    assert store.counts()["PENDING"] == 0 and store.counts()["DONE"] == 2


def test_a_user_who_activated_gets_no_nudge(ex: ModuleType) -> None:
    clock, store, product = setup(ex)
    product.sign_up("grace")
    product.app.run_until_idle()
    product.activated.add("grace")
    clock.advance(4 * DAY)
    assert product.app.run_until_idle()["noop"] == 1  # the nudge ran, with no effect
    assert [kind for kind, _, _ in sent(product)] == ["welcome"]
    assert store.counts()["DONE"] == 2


def test_the_timer_survives_the_process_that_set_it(ex: ModuleType) -> None:
    clock, store, product = setup(ex)
    product.sign_up("ada")
    product.app.run_until_idle()
    clock.advance(4 * DAY)
    later = ex.Onboarding(store, clock)  # a new process on the same store
    later.app.run_until_idle()
    # Due on day 3, run when a process is next up: day 4.
    assert [(e.kind, e.sent_ms - T0) for e in later.mailer.sent] == [("nudge", 4 * DAY)]


def test_signing_up_twice_sends_one_welcome_and_one_nudge(ex: ModuleType) -> None:
    clock, _, product = setup(ex)
    assert product.sign_up("ada")
    assert not product.sign_up("ada")
    product.app.run_until_idle()
    clock.advance(4 * DAY)
    product.app.run_until_idle()
    assert [kind for kind, _, _ in sent(product)] == ["welcome", "nudge"]


def test_a_redelivered_welcome_sends_nothing_twice(ex: ModuleType) -> None:
    clock, store, product = setup(ex)
    product.sign_up("ada")
    product.app.run_until_idle()
    # The same delivery once more, as after a worker that died before its ack was seen.
    welcome = store.task(1)
    again = Message(
        id=999,
        task_id=welcome.id,
        idempotency_key=welcome.idempotency_key,
        task=welcome.task,
        payload=welcome.payload,
        trigger_ms=welcome.trigger_ms,
        attempt=2,
    )
    run = product.app.registry.runner(clock.now_ms)
    work = Batch(worker="w", messages=[again], run=run, retry=Retry(), now=clock.now_ms)
    assert (
        execution.execute(work, store)["stale"] == 1
    )  # its task is DONE: the handler does not run again
    clock.advance(4 * DAY)
    product.app.run_until_idle()
    assert [kind for kind, _, _ in sent(product)] == ["welcome", "nudge"]
    assert store.counts()["DONE"] == 2


def test_the_script_runs_three_days_and_prints_the_mail() -> None:
    out = subprocess.run(
        [sys.executable, str(EXAMPLE)], capture_output=True, text=True, timeout=60, check=True
    )
    lines = out.stdout.splitlines()
    assert len(lines) == 3
    assert "welcome  → ada" in lines[0] and "welcome  → grace" in lines[1]
    assert lines[2].startswith("+3 days, 0:00:01 nudge") and lines[2].endswith("→ ada")
