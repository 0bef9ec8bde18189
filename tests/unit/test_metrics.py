"""The engine's Prometheus instruments (issue 16): what a process records, the store's values
at scrape time, the dashboard naming only what is exported, and `import cronlab` staying lean."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from cronlab.core.policy import Schedule
from cronlab.metrics.prometheus import PrometheusMetrics, StoreCollector
from cronlab.ports import Ended, Message, NewTask
from cronlab.stores.memory import MemoryStore

DASHBOARD = Path(__file__).resolve().parents[2] / "docs" / "grafana-cronlab.json"


def scrape(registry: CollectorRegistry) -> dict[str, list[object]]:
    text = generate_latest(registry).decode()
    return {f.name: f.samples for f in text_string_to_metric_families(text)}


def message(key: str, trigger: int, attempt: int = 1) -> Message:
    return Message(1, 1, key, "bill", "{}", trigger, 1, attempt)


def test_a_process_records_dispatches_runs_lateness_durations_and_leadership() -> None:
    registry = CollectorRegistry()
    m = PrometheusMetrics(registry)
    m.dispatched(3)
    m.executed({"ok": 2, "failed": 1, "stale": 4})
    m.ended([
        Ended(message("a", 1_000), 1_250, 1_300, "ok"),
        Ended(message("b", 1_000, attempt=2), 9_000, 9_500, "ok"),  # a retry: not lateness
        Ended(message("backfill:s:0", 0), 50_000, 50_010, "ok"),  # late on purpose
    ])  # fmt: skip
    m.leading(7)
    got = scrape(registry)
    values = {(s.name, tuple(sorted(s.labels.items()))): s.value for f in got.values() for s in f}  # type: ignore[attr-defined]
    assert values[("cronlab_tasks_dispatched_total", ())] == 3
    assert values[("cronlab_tasks_executed_total", (("outcome", "ok"),))] == 2
    assert ("cronlab_tasks_executed_total", (("outcome", "stale"),)) not in values
    assert values[("cronlab_trigger_lateness_seconds_count", ())] == 1
    assert values[("cronlab_trigger_lateness_seconds_sum", ())] == 0.25
    assert values[("cronlab_handler_duration_seconds_count", (("task", "bill"),))] == 3
    assert values[("cronlab_is_leader", ())] == 1 and values[("cronlab_lease_epoch", ())] == 7
    m.leading(None)
    assert scrape(registry)["cronlab_is_leader"][0].value == 0  # type: ignore[attr-defined]


def test_the_store_collector_reads_depth_due_and_missed_counts_when_scraped() -> None:
    store = MemoryStore()
    store.put_schedule(Schedule(name="nightly", cron="0 3 * * *", task="bill"), 0, replace=False)
    store.add_tasks([NewTask("a", "bill", 10), NewTask("b", "bill", 10**12)])
    registry = CollectorRegistry()
    registry.register(StoreCollector(lambda: store, lambda: 1_000, close=False))
    got = scrape(registry)
    assert got["cronlab_pending_due"][0].value == 1  # type: ignore[attr-defined]
    assert got["cronlab_queue_depth"][0].value == 0  # type: ignore[attr-defined]
    (missed,) = got["cronlab_schedule_missed"]
    assert missed.labels == {"schedule": "nightly"} and missed.value == 0  # type: ignore[attr-defined]


EXPORTED = {
    "cronlab_trigger_lateness_seconds", "cronlab_tasks_dispatched_total",
    "cronlab_tasks_executed_total", "cronlab_queue_depth", "cronlab_pending_due",
    "cronlab_lease_epoch", "cronlab_is_leader", "cronlab_schedule_missed_total",
    "cronlab_handler_duration_seconds",
}  # fmt: skip


def test_the_grafana_dashboard_names_only_exported_metrics() -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    exprs = [t["expr"] for p in dashboard["panels"] for t in p["targets"]]
    names = {re.sub(r"_bucket$", "", n) for e in exprs for n in re.findall(r"cronlab_\w+", e)}
    assert names <= EXPORTED and len(names) == len(EXPORTED)


def test_import_cronlab_loads_no_prometheus_client() -> None:
    code = "import sys, cronlab, cronlab.cli; print('prometheus_client' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_scraping_again_and_again_leaves_no_connection_open(tmp_path: Path) -> None:
    import os

    from cronlab.stores.sqlite import SqliteStore

    SqliteStore(tmp_path / "s.db").close()
    registry = CollectorRegistry()
    registry.register(StoreCollector(lambda: SqliteStore(tmp_path / "s.db"), lambda: 0))
    scrape(registry)
    before = len(os.listdir("/proc/self/fd"))
    for _ in range(30):
        scrape(registry)
    assert len(os.listdir("/proc/self/fd")) <= before


def test_a_scrape_while_the_store_cannot_be_read_still_answers() -> None:
    """Issue 28: a cluster serves its metrics port before its store exists (the port is bound
    first, the store checked after); a scrape then was a 500. The process's own instruments
    are still served, the store's are left out until it can be read."""
    from cronlab.exceptions import BackendBusy, ConfigError

    for error in (ConfigError("no store at 's.db' (file does not exist)"), BackendBusy("busy")):

        def unreadable(error: Exception = error) -> MemoryStore:
            raise error

        registry = CollectorRegistry()
        PrometheusMetrics(registry).dispatched(2)
        registry.register(StoreCollector(unreadable, lambda: 1_000))
        got = scrape(registry)
        assert got["cronlab_tasks_dispatched"][0].value == 2  # type: ignore[attr-defined]
        assert "cronlab_queue_depth" not in got
