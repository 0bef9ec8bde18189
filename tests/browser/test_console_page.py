"""The operator's console (issue 16) served by the real CLI (`cronlab console` subprocess) and
driven in Debian's Chromium: it lists the schedules with their next fires and runs, its
controls change the store, a token guards it off loopback, a cross-site POST is refused."""

from __future__ import annotations

import http.server
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page, expect

from cronlab import App, Context
from cronlab.core.policy import to_ms
from cronlab.runtime import embedded
from cronlab.runtime.clock import FakeClock
from cronlab.runtime.duties import Operations
from cronlab.stores.sqlite import SqliteStore

from .conftest import CHROMIUM, free_port, wait_http

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


@contextmanager
def serve_console(store: Path, *extra: str) -> Iterator[str]:
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "cronlab", "console", "--store", f"sqlite:///{store}",
         "--port", str(port), "--no-open", *extra],
        stdout=subprocess.DEVNULL,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        wait_http(url + "/openapi.json")
        yield url
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


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
    keys = [r[0] for r in store.query("SELECT idempotency_key FROM tasks")]
    assert any(k.startswith("trigger:sync-stock:") for k in keys)

    hour = datetime.now(UTC).replace(minute=0, second=0, microsecond=0)
    row.locator('[data-action="backfill"]').click()
    page_on.locator("#from").fill((hour - timedelta(hours=3)).isoformat())
    page_on.locator("#to").fill((hour - timedelta(hours=2)).isoformat())
    page_on.locator('[data-action="confirm"]').click()
    expect(page_on.locator("#toast")).to_contain_text("backfilled sync-stock: 60 added")
    backfilled = store.query("SELECT count(*) FROM tasks WHERE idempotency_key LIKE 'backfill:%'")
    assert backfilled[0][0] == 60

    row.locator('[data-action="backfill"]').click()
    page_on.locator("#from").fill(hour.isoformat())
    page_on.locator("#to").fill((hour - timedelta(hours=1)).isoformat())
    page_on.locator('[data-action="confirm"]').click()
    expect(page_on.locator("#toast")).to_contain_text("--from must be before --to")
    assert (
        store.query("SELECT count(*) FROM tasks WHERE idempotency_key LIKE 'backfill:%'")[0][0]
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


EVIL = """<!doctype html><html><body>
<iframe name="sink"></iframe>
<form id="f" method="post" enctype="text/plain" target="sink"
      action="{console}/api/schedules/sync-stock/pause">
  <input name='{{"note":"' value='owned"}}'>
</form>
<script>
  document.getElementById("f").submit();
  fetch("{console}/api/schedules/sync-stock/trigger", {{method: "POST", mode: "no-cors",
    headers: {{"Content-Type": "text/plain"}}, body: "{{}}"}})
    .then(function () {{ document.title = "sent"; }}, function () {{ document.title = "sent"; }});
</script></body></html>"""


@contextmanager
def evil_site(console_url: str) -> Iterator[str]:
    body = EVIL.format(console=console_url).encode()

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", free_port()), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()


def test_a_cross_site_post_is_refused_and_changes_nothing(
    browser: Browser, console_url: str, shop: Path
) -> None:
    store = SqliteStore(shop, create=False)
    before = store.query("SELECT count(*) FROM tasks")[0][0], store.get_schedule("sync-stock")
    with evil_site(console_url) as evil:
        context = browser.new_context()
        page = context.new_page()
        refused: list[int] = []
        page.on("response", lambda r: refused.append(r.status) if "/api/" in r.url else None)
        page.goto(evil)
        page.wait_for_function("document.title === 'sent'", timeout=15_000)
        deadline = time.monotonic() + 10
        while len(refused) < 2 and time.monotonic() < deadline:
            page.wait_for_timeout(200)
        context.close()
    assert refused and set(refused) == {403}, refused
    after = store.query("SELECT count(*) FROM tasks")[0][0], store.get_schedule("sync-stock")
    store.close()
    assert after == before


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
