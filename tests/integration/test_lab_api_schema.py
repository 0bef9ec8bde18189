"""schemathesis over the whole lab API (issue 13): every operation of ``/openapi.json``, every
default check, a fixed seed and at most ``EXAMPLES`` cases per operation and phase → 0 failures.

The live endpoints drive the real CLI, store and processes, scaled down (``small_engine.py``)
so a run costs seconds. The operations run in an order that meets both states of the live run:
start (one run, then 409s), what reads or signals it while it goes, stop, the same reads again
(a test that xdist sent to another worker, whose server has no run or one, starts or stops
it first).
The module ends by checking that nothing it started is alive and no run folder is left.
The operator's console and the engine's metrics port (issue 28) get the same treatment, each
from its own document.
"""

from __future__ import annotations

import os
import re
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from prometheus_client import CollectorRegistry
from schemathesis import Case

from cronlab import stores
from cronlab.clock import SystemClock
from cronlab.core.policy import Schedule
from cronlab.lab.web import openapi
from cronlab.lab.web.app import LabConfig, create_app
from cronlab.lab.web.live import Live, LiveConfig
from cronlab.metrics import server
from cronlab.metrics.prometheus import PrometheusMetrics, StoreCollector
from cronlab.web import console_api
from cronlab.web.console import ConsoleConfig, create_console

pytestmark = pytest.mark.integration
SEED = 13
EXAMPLES = 100
ACCEPTED = ["2xx", "3xx", "401", "403", "404", "409", "429", "5xx", "422"]
ACROSS_PARAMETERS = (  # what a 422 for a schema-valid /api/simulate query may say
    r"target (replica|pod) \d+ does not exist \((replicas|pods) 0\.\.\d+\)",  # crash, pause
    r"^tasks due must be 0\.\.1,000,000,000,000",  # the buckets' (or steady minutes') sum
    r"^bucket count must be 0\.\.1,000,000,000,000",  # the buckets given for one minute
    r"the lab charts at most 50,000 ",  # the run's length: tasks / capacity, faults
)
BACKFILL_RANGE = (
    r"^backfill: --from must be before --to$",
    r"^backfill: --to is in the future",
    r"^backfill of .*: the range holds more than 1,000 ",
)
ENGINE = (sys.executable, str(Path(__file__).with_name("small_engine.py")))
CONFIG = schemathesis.Config.from_dict(
    {
        "seed": SEED,
        "base-url": "http://127.0.0.1",
        "workers": 1,
        "request-timeout": 30,  # a loaded CI machine; an event stream is cut sooner, below
        "max-stream-events": 2,  # a run's stream never ends: its first two events are judged
        "generation": {"max-examples": EXAMPLES, "database": "none"},
        # A schema-valid scenario may still break a rule across parameters, which JSON Schema
        # cannot state. Its 422 passes this check, and the one below judges every 422 instead.
        "checks": {"positive_data_acceptance": {"expected-statuses": ACCEPTED}},
    }
)
MODEL = ["/", "/api/simulate", "/openapi.json", "/static/{path}", "/metrics"]
READS = ["/api/live", "/api/live/events", "/metrics"]
REALSIM = ["/api/realsim"]
GROUPS = [
    MODEL,
    REALSIM,
    ["/api/live/start"],
    [*READS, "/api/live/chaos"],
    ["/api/live/stop"],
    READS,
]
CASES: dict[str, int] = {}


class ServerLifespan:
    """The lab app, its lifespan left to this module: schemathesis ends an ASGI app's lifespan
    after every test, which for the lab is the server stopping (it stops the run). Here the
    server stops once, at the end (``cleaned_up``)."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "lifespan":
            await self.app(scope, receive, send)
            return
        while (await receive())["type"] != "lifespan.shutdown":
            await send({"type": "lifespan.startup.complete"})
        await send({"type": "lifespan.shutdown.complete"})


LIVE = Live(cronlab=ENGINE, poll_s=2.0)  # a second event within 2 s
schema = schemathesis.openapi.from_asgi(
    "/openapi.json",
    ServerLifespan(create_app(LabConfig(), LIVE)),
    config=CONFIG,
    headers={"host": "127.0.0.1"},  # a loopback lab refuses another Host
)


@pytest.fixture(scope="module", autouse=True)
def cleaned_up() -> Iterator[None]:
    """At the end, no process the run started is alive and its folder is gone."""
    yield
    run = LIVE._run
    LIVE.close()
    print(f"\nschemathesis (seed {SEED}): {sum(CASES.values())} cases, {CASES}")
    if run is not None:
        assert not os.path.exists(run.folder)


@schemathesis.check
def only_rules_across_parameters(
    ctx: schemathesis.CheckContext, response: schemathesis.Response, case: Case
) -> bool | None:
    """Schema-valid data refused with 422: only by ``/api/simulate``, for a rule across
    parameters (positive_data_acceptance's own verdict on every other status stands)."""
    meta = case.meta
    if response.status_code != 422 or meta is None or not meta.generation.mode.is_positive:
        return None
    error = response.json()["error"]
    rules = {
        "/api/simulate": ACROSS_PARAMETERS,
        "/api/realsim": ACROSS_PARAMETERS,
        "/api/live/start": (r"fencing must be on with election off",),  # fencing × election
        "/api/schedules/{name}/backfill": BACKFILL_RANGE,  # the console's: from × to × now
    }.get(case.operation.path, ())
    if not any(re.search(rule, error) for rule in rules):
        raise AssertionError(f"schema-valid data refused: {error}")
    return None


def check(case: Case, where: str = "") -> None:
    label = f"{where}{case.operation.label}"
    CASES[label] = CASES.get(label, 0) + 1
    case.call_and_validate()


def test_the_groups_cover_every_operation() -> None:
    assert {p for group in GROUPS for p in group} == set(openapi.PATHS)


@schema.include(path=MODEL).parametrize()
def test_the_model_and_the_files(case: Case) -> None:
    check(case)


# A simulated run of the real code costs seconds (most generated scenarios are too long to
# simulate and say so at once): a few cases, on an app of their own with a longer timeout.
realsim_schema = schemathesis.openapi.from_asgi(
    "/openapi.json",
    ServerLifespan(create_app(LabConfig(), Live())),
    config=schemathesis.Config.from_dict(
        {
            "seed": SEED,
            "base-url": "http://127.0.0.1",
            "workers": 1,
            "request-timeout": 120,
            "generation": {"max-examples": 3, "database": "none"},
            "checks": {"positive_data_acceptance": {"expected-statuses": ACCEPTED}},
        }
    ),
    headers={"host": "127.0.0.1"},
)


@realsim_schema.include(path=REALSIM).parametrize()
def test_the_real_code_simulated(case: Case) -> None:
    check(case)


@schema.include(path="/api/live/start").parametrize()
def test_start(case: Case) -> None:
    check(case)


@schema.include(path=[*READS, "/api/live/chaos"]).parametrize()
def test_while_a_run_goes(case: Case) -> None:
    if not LIVE.running:  # test_start ran on another xdist worker (each has its own LIVE)
        LIVE.start(LiveConfig(count=600, workers=2, lease_ttl=3, drain_s=5, lead_s=3))
    assert LIVE.running
    check(case)


@schema.include(path="/api/live/stop").parametrize()
def test_stop(case: Case) -> None:
    check(case)


@schema.include(path=READS).parametrize()
def test_once_stopped(case: Case) -> None:
    if LIVE.running:  # test_stop ran on another xdist worker
        LIVE.stop()
    assert not LIVE.running
    check(case)


# The operator's console (``cronlab console``): its own document and server, on a real SQLite
# store holding two schedules. A smaller budget: its nine operations take no live run.
CONSOLE_EXAMPLES = 25
CONSOLE_STORE = Path(tempfile.mkdtemp(prefix="cronlab-schema-")) / "console.db"


def console_store() -> stores.SqlStore:
    """The console's store (made on first use, with a schedule to act on and one paused)."""
    made = not CONSOLE_STORE.exists()
    store = stores.open_store(f"sqlite:///{CONSOLE_STORE}", create=True)
    if made:
        now = SystemClock().now_ms()
        for name in ("nightly", "hourly"):
            store.put_schedule(Schedule(name=name, cron="0 * * * *", task="h"), now, replace=False)
        store.pause_schedule("hourly", now, note="maintenance")
    return store


console_schema = schemathesis.openapi.from_asgi(
    "/openapi.json",
    create_console(ConsoleConfig(store_url=f"sqlite:///{CONSOLE_STORE}"), opener=console_store),
    config=schemathesis.Config.from_dict(
        {
            "seed": SEED,
            "base-url": "http://127.0.0.1",
            "workers": 1,
            "generation": {"max-examples": CONSOLE_EXAMPLES, "database": "none"},
            "checks": {"positive_data_acceptance": {"expected-statuses": ACCEPTED}},
        }
    ),
    headers={"host": "127.0.0.1"},
)


@pytest.fixture(scope="module")
def console_folder() -> Iterator[None]:
    yield
    shutil.rmtree(CONSOLE_STORE.parent, ignore_errors=True)


def test_the_console_document_lists_every_operation() -> None:
    paths = set(console_api.document()["paths"])
    assert paths == {"/api/console", "/api/runs", "/api/tasks/{id}"} | {
        f"/api/schedules/{{name}}/{a}" for a in console_api.FIELDS
    } | {f"/api/tasks/{{id}}/{a}" for a in console_api.TASK_ACTIONS}


@console_schema.parametrize()
def test_the_console(case: Case, console_folder: None) -> None:
    check(case)


# The engine's metrics port (issue 28): its own document (metrics/server.py) and its guarded
# WSGI app over the engine's instruments and the store's collector, on the console's store;
# bound to loopback with no token, and off loopback with one (the cases carry none: 403).
METRICS_EXAMPLES = 50


def metrics_registry() -> CollectorRegistry:
    registry = CollectorRegistry()
    PrometheusMetrics(registry).dispatched(3)
    registry.register(StoreCollector(console_store, SystemClock().now_ms))
    return registry


def metrics_schema(host: str, token: str | None) -> Any:
    loaded = schemathesis.openapi.from_dict(
        server.document(),
        config=schemathesis.Config.from_dict(
            {
                "seed": SEED,
                "base-url": "http://127.0.0.1",
                "workers": 1,
                "generation": {"max-examples": METRICS_EXAMPLES, "database": "none"},
                "checks": {"positive_data_acceptance": {"expected-statuses": ACCEPTED}},
            }
        ),
    )
    loaded.app = server.guarded(metrics_registry(), host, token)
    return loaded


@metrics_schema("127.0.0.1", None).parametrize()
def test_the_metrics_port(case: Case, console_folder: None) -> None:
    check(case, "metrics port ")


@metrics_schema("0.0.0.0", "a-token").parametrize()
def test_the_metrics_port_off_loopback(case: Case, console_folder: None) -> None:
    check(case, "metrics port, token ")
