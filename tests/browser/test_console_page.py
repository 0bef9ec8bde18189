"""The operator's console (issue 16) served by the real CLI (`cronlab console` subprocess) and
driven in Debian's Chromium: it lists the schedules with their next fires and runs, its
controls change the store, a token guards it off loopback (a page on another origin:
``test_cross_site.py``)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page, expect

from cronlab import App, Context
from cronlab.clock import FakeClock
from cronlab.core.policy import to_ms
from cronlab.runtime import embedded
from cronlab.runtime.duties import Operations
from cronlab.stores.sqlite import SqliteStore

from .conftest import CHROMIUM, serve_console

pytestmark = pytest.mark.browser
Console = list[str]


def seed(path: Path) -> None:
    """Three schedules and ten minutes of their runs, ending now: one fails every run."""
    now = datetime.now(UTC).replace(microsecond=0)
    clock = FakeClock(to_ms(now) - 10 * 60_000)
    store = SqliteStore(path)
    app = App(store=store, clock=clock, name="shop")

    @app.cron("* * * * *", name="sync-stock")
    @app.cron("*/2 * * * *", name="flaky-export", alert_on_failures=2)
    @app.cron("0 3 * * *", name="nightly-report", tz="Europe/Berlin", catchup="all")
    @app.task(name="job", retries=0)
    def job(ctx: Context) -> None:
        if ctx.idempotency_key.startswith("schedule:flaky-export:"):
            raise RuntimeError("export endpoint answered 503")

    engine = embedded.start(app, concurrency=4, ops=Operations())
    for _ in range(10 * 60):
        clock.advance(1_000)
        engine.scheduler.step()
        while engine.worker.step() == 0:
            pass
    engine.stop()
    store.close()


@pytest.fixture(scope="module")
def shop(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if not Path(CHROMIUM).exists():
        pytest.skip(f"{CHROMIUM} missing: scripts/setup.sh installs it")
    path = tmp_path_factory.mktemp("console") / "shop.db"
    seed(path)
    return path


@pytest.fixture(scope="module")
def console_url(shop: Path) -> Iterator[str]:
    with serve_console(shop) as url:
        yield url


@pytest.fixture
def page_on(browser: Browser, console_url: str, console: Console) -> Iterator[Page]:
    context = browser.new_context(viewport={"width": 1440, "height": 900}, base_url=console_url)
    context.route(
        "**/*",
        lambda r: r.continue_() if r.request.url.startswith(console_url) else r.abort(),
    )
    page = context.new_page()
    page.on("console", lambda m: console.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda exc: console.append(f"pageerror: {exc}"))
    yield page
    context.close()


def opened(page: Page, path: str = "/") -> None:
    page.goto(path)
    page.wait_for_function("() => window.cronlabConsole && window.cronlabConsole.loads > 0")


def loads(page: Page) -> int:
    return int(page.evaluate("window.cronlabConsole.loads"))


def test_it_lists_every_schedule_with_its_next_fires_and_last_runs(
    page_on: Page, console: Console
) -> None:
    opened(page_on)
    expect(page_on).to_have_title("cronlab console")
    rows = page_on.locator("tr[data-schedule]")
    expect(rows).to_have_count(3)
    stock = page_on.locator('tr[data-schedule="sync-stock"]')
    expect(stock.locator(".fires")).to_have_attribute("data-next", "10")
    expect(stock.locator(".runs .run")).to_have_count(10)
    assert stock.locator('.run[data-outcome="ok"]').count() >= 9
    flaky = page_on.locator('tr[data-schedule="flaky-export"]')
    expect(flaky.locator('.run[data-outcome="failed"]')).to_have_count(5)
    title = flaky.locator('.run[data-outcome="failed"]').first.get_attribute("title") or ""
    assert "export endpoint answered 503" in title
    nightly = page_on.locator('tr[data-schedule="nightly-report"]')
    expect(nightly).to_contain_text("Europe/Berlin")
    expect(nightly.locator(".fires")).to_contain_text("03:00:00+0")  # in its own zone
    # each later fire on another day says which (it read "03:00 03:00 …", issue 31)
    later = (nightly.locator(".fires").text_content() or "").split()[2:]
    assert len(later) == 18 and all(re.fullmatch(r"\d\d-\d\d|03:00", w) for w in later), later
    assert later[0::2] == sorted(set(later[0::2])) and set(later[1::2]) == {"03:00"}
    expect(page_on.locator("#counts")).to_contain_text("3")
    expect(page_on.locator("#alerts")).to_contain_text("flaky-export: 2 runs in a row failed")
    expect(page_on.locator("#processes tr[data-process]")).to_have_count(1)
    assert page_on.locator("#chart canvas").count() == 1
    assert console == []


def test_pause_resume_trigger_and_backfill_through_the_page_change_the_store(
    page_on: Page, shop: Path, console: Console
) -> None:
    opened(page_on)
    row = page_on.locator('tr[data-schedule="sync-stock"]')
    row.locator('[data-action="pause"]').click()
    page_on.locator("#note").fill("stock API migration")
    page_on.locator('[data-action="confirm"]').click()
    expect(row).to_have_class("paused")
    expect(row.locator(".note")).to_have_text("stock API migration")
    store = SqliteStore(shop, create=False)
    info = store.get_schedule("sync-stock")
    assert info.schedule.paused and info.paused_note == "stock API migration"

    row.locator('[data-action="resume"]').click()
    expect(row).not_to_have_class("paused")
    assert not store.get_schedule("sync-stock").schedule.paused

    row.locator('[data-action="trigger"]').click()
    expect(page_on.locator("#toast")).to_contain_text("triggered sync-stock")
    keys = [r[0] for r in store.query(store.own("SELECT idempotency_key FROM tasks"))]
    assert any(k.startswith("trigger:sync-stock:") for k in keys)

    hour = datetime.now(UTC).replace(minute=0, second=0, microsecond=0)
    row.locator('[data-action="backfill"]').click()
    page_on.locator("#from").fill((hour - timedelta(hours=3)).isoformat())
    page_on.locator("#to").fill((hour - timedelta(hours=2)).isoformat())
    page_on.locator('[data-action="confirm"]').click()
    expect(page_on.locator("#toast")).to_contain_text("backfilled sync-stock: 60 added")
    backfilled = store.query(
        store.own("SELECT count(*) FROM tasks WHERE idempotency_key LIKE 'backfill:%'")
    )
    assert backfilled[0][0] == 60

    row.locator('[data-action="backfill"]').click()
    page_on.locator("#from").fill(hour.isoformat())
    page_on.locator("#to").fill((hour - timedelta(hours=1)).isoformat())
    page_on.locator('[data-action="confirm"]').click()
    expect(page_on.locator("#toast")).to_contain_text("--from must be before --to")
    assert (
        store.query(
            store.own("SELECT count(*) FROM tasks WHERE idempotency_key LIKE 'backfill:%'")
        )[0][0]
        == 60
    )
    store.close()
    assert console == [] or all("422" in c for c in console)


def test_the_filter_and_the_pager_reach_every_schedule(page_on: Page) -> None:
    opened(page_on)
    page_on.locator("#filter").fill("flaky")
    expect(page_on.locator("tr[data-schedule]")).to_have_count(1)
    expect(page_on.locator("#page-of")).to_contain_text("1 matching")
    page_on.locator("#filter").fill("")
    expect(page_on.locator("tr[data-schedule]")).to_have_count(3)


def test_off_loopback_rules_a_token_unlocks_the_api(browser: Browser, shop: Path) -> None:
    with serve_console(shop, "--token", "t0k3n") as url:
        context = browser.new_context(base_url=url)
        page = context.new_page()
        opened_without = page.goto("/")
        assert opened_without is not None and opened_without.status == 200
        expect(page.locator("#problem")).to_contain_text("needs its token")
        with_token = context.new_page()
        opened(with_token, "/#token=t0k3n")
        expect(with_token.locator("tr[data-schedule]")).to_have_count(3)
        assert "token" not in with_token.url  # taken out of the address bar
        context.close()


def test_a_failed_run_is_retried_and_a_task_not_run_yet_cancelled_from_the_page(
    page_on: Page, shop: Path, console: Console
) -> None:
    opened(page_on)
    store = SqliteStore(shop, create=False)
    panel = page_on.locator("#task")
    failed = page_on.locator('tr[data-schedule="flaky-export"] .run[data-outcome="failed"]').last
    failed_id = int(failed.get_attribute("data-task") or "0")
    failed.click()
    expect(panel).to_have_attribute("data-status", "FAILED")
    expect(panel).to_contain_text("export endpoint answered 503")
    expect(panel.locator('[data-task-action="cancel"]')).to_have_count(0)
    panel.locator('[data-task-action="retry"]').click()
    expect(page_on.locator("#toast")).to_contain_text(f"retrying task {failed_id}: attempt 2")
    expect(panel).to_have_attribute("data-status", "DISPATCHED")
    assert store.task(failed_id).status == "DISPATCHED"

    nightly = store.get_schedule("nightly-report").next_fire_ms
    pending = store.task_by_key(f"schedule:nightly-report:{nightly}").id
    page_on.locator("#task-id").fill(str(pending))
    page_on.locator('[data-task-action="show"]').click()
    expect(panel).to_have_attribute("data-status", "PENDING")
    panel.locator('[data-task-action="cancel"]').click()
    expect(page_on.locator("#dialog-title")).to_contain_text(f"Cancel task {pending}")
    page_on.locator('[data-action="confirm"]').click()
    expect(page_on.locator("#toast")).to_contain_text(f"cancelled task {pending}")
    expect(panel).to_have_attribute("data-status", "SKIPPED")
    assert store.task(pending).status == "SKIPPED"
    assert store.get_schedule("nightly-report").next_fire_ms == nightly + 86_400_000

    page_on.locator("#task-id").fill("0")
    page_on.locator('[data-task-action="show"]').click()
    expect(page_on.locator("#toast")).to_contain_text("a task id is an integer")
    store.close()
    assert all("422" in c for c in console)
